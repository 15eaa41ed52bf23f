// x·σ(1.702·x), the sigmoid approximation of GELU that CLIP's QuickGELU writes, becomes ONNX
// Runtime's com.microsoft.QuickGelu with that factor as its alpha.
//
//   x ──┬── Mul(·, alpha) ── Sigmoid ──┐
//       └──────────────────────────── Mul ── y      ==>   x ── QuickGelu(alpha) ── y
#pragma once

#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"

namespace passes {
using namespace fusekit::pattern;

struct quick_gelu {
  static constexpr std::string_view name = "quick-gelu";
  static constexpr auto x = capture<"x">.dtype<fusekit::dtype::float32, fusekit::dtype::float16>();
  static constexpr auto pattern =
      commutative(op<"Mul">(x, op<"Sigmoid">(commutative(op<"Mul">(x, constant_scalar<"alpha">)))));

  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    e.replace_root(
        e.op("QuickGelu", {e.value(get<"x">(m))}, {{"alpha", get<"alpha">(m)}}, "com.microsoft"));
  }
};

}  // namespace passes
