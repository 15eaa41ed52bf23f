// Helpers shared by the test files.
#pragma once

#include <string>

#include "fusekit/io/error.hpp"

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

}  // namespace fusekit::testing
