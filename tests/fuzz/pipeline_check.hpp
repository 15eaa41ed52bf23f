// What `fusekit fuse` promises for any model it loads, checked the way a fuzzer can: a broken
// promise aborts, so libFuzzer records the input.
//
// - fusekit::error is the only exception, and a model that passes the invariants (index and
//   ONNX checker) before fusing never raises one: a valid model is fused or left as it was;
// - the fused model passes the same invariants, loads again, and a second run changes nothing.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fusekit/io/model.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "fusekit/rules/all.hpp"

namespace fusekit::fuzz {

[[noreturn]] inline void broken(std::string_view promise, std::string_view detail) {
  std::fprintf(stderr, "fusekit fuzz: %.*s: %.*s\n", int(promise.size()), promise.data(),
               int(detail.size()), detail.data());
  std::abort();
}

inline bool passes_invariants(const model& m) {
  try {
    rewrite::check_invariants(m);
    return true;
  } catch (const error&) {
    return false;
  }
}

inline void fuse_and_check(model m, const rules::attention_options& attention) {
  const bool valid = passes_invariants(m);
  try {
    rules::fuse_all(m, {}, attention);
  } catch (const error& e) {
    if (valid) broken("a valid model made fuse_all throw", e.what());
    return;
  }
  if (!valid) return;
  try {
    rewrite::check_invariants(m);
  } catch (const error& e) {
    broken("the fused model breaks the invariants", e.what());
  }
  const std::string once = detail::serialize_deterministic(m.proto);
  model again;
  try {
    again = parse_model(once, "fused.onnx");
  } catch (const error& e) {
    broken("the fused model does not load", e.what());
  }
  rules::fuse_all(again, {}, attention);
  if (detail::serialize_deterministic(again.proto) != once)
    broken("a second run", "changed the fused model");
}

}  // namespace fusekit::fuzz
