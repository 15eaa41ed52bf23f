// A matrix product and a bias that broadcasts to it, as a Linear layer exports, become one Gemm.
//
//   a [M, K] ── MatMul(·, b [K, N]) ── Add(·, c) ── y   ==>   a, b, c ── Gemm ── y
//
// Gemm takes 2-D operands only, and a c that broadcasts to [M, N] without growing it
// (unidirectionally): both proven, or no Gemm.
#pragma once

#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"

namespace passes {
using namespace fusekit::pattern;
using fusekit::dtype;

struct matmul_add_to_gemm {
  static constexpr std::string_view name = "matmul-add-to-gemm";
  static constexpr auto a = capture<"a">.proven_rank<2>().dtype<dtype::float32, dtype::float16>();
  static constexpr auto pattern =
      commutative(op<"Add">(capture<"y">(op<"MatMul">(a, capture<"b">.proven_rank<2>())),
                            capture<"c">.broadcasts_to<"y">()));

  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    e.replace_root(
        e.op("Gemm", {e.value(get<"a">(m)), e.value(get<"b">(m)), e.value(get<"c">(m))}));
  }
};

}  // namespace passes
