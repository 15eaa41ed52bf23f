// Helpers shared by the test files.
#pragma once

#include <string>
#include <vector>

#include "fusekit/io/error.hpp"
#include "fusekit/io/model.hpp"

namespace fusekit::testing {

// The what() of the fusekit::error that `f` throws, or "no error".
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const fusekit::error& e) {
    return e.what();
  }
  return "no error";
}

// The model as it is written: equal bytes are equal models.
inline std::string bytes(const fusekit::model& m) {
  return fusekit::detail::serialize_deterministic(m.proto);
}

// The main graph's op types, in order.
inline std::vector<std::string> op_types(const fusekit::model& m) {
  std::vector<std::string> ops;
  for (const auto& n : m.proto.graph().node()) ops.push_back(n.op_type());
  return ops;
}

}  // namespace fusekit::testing
