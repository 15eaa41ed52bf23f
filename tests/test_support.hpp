// Helpers shared by the test files.
#pragma once

#include <string>
#include <vector>

#include "fusekit/io/error.hpp"
#include "fusekit/io/model.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "fusekit/rules/all.hpp"

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

// fuse<R>(m, o) for a rule of the library, run as the library compiled it (rules::rule_named,
// with its options' defaults): its test compiles none of the rule's matching again.
template <class R>
rewrite::report fuse_compiled(model& m, const rewrite::options& o = {}) {
  static const rules::attention_options defaults{};
  const rewrite::any_rule rule = rules::rule_named(R::name, defaults);
  return rewrite::fuse(m, std::span(&rule, 1), o);
}

}  // namespace fusekit::testing
