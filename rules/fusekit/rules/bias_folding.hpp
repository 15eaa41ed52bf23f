// A bias added after a Conv or a Gemm is folded into its own bias; a matrix product and the bias
// after it, as a Linear layer of 2-D input exports, become one Gemm:
//
//   x ── Conv(W, b?) ── Add(·, c) ── y   ==>   x ── Conv(W, b + c) ── y
//   a ── Gemm(B, c?; α, β) ── Add(·, d) ── y   ==>   a ── Gemm(B, β·c + d; α, 1) ── y
//   a [M, K] ── MatMul(·, b [K, N]) ── Add(·, c) ── y   ==>   a, b, c ── Gemm ── y
//
// A Conv's bias is one number per output channel: c folds where it is one too, a constant whose
// every dim is 1 but the one it lays along the Conv's channels (dim 1 of y), which is 1 or W's
// dim 0 ([C, 1, 1], [1, C, 1, 1], a scalar). Gemm adds its C broadcast to [M, N] without growing
// the product (unidirectionally): d must broadcast so to y, and β·c + d, computed in float64 and
// written in d's type, does too, for c a vector (a Linear's bias) or none. A MatMul becomes a
// Gemm only where both operands are proven 2-D, Gemm's only operands. What ONNX Runtime folds at
// load, and any other runtime runs as a second pass over the activations; what TorchScript
// writes for a Conv whose bias it left out, and for every Linear of a flattened input.
//
// The Add's two operands may be in either order. A near miss is told only of an Add that reads
// the node each rule folds into (for a MatMul, a product proven 2-D): the others are no fold.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "batch_normalization_folding.hpp"
#include "fusekit/graph/array.hpp"
#include "fusekit/graph/facts.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"

namespace fusekit::rules {
using namespace pattern;

namespace bias {

// Every dim of v, aligned from the last with y's, is 1 but the one along y's dim 1.
inline bool along_channels_only(const graph& g, value_id v, value_id y) {
  const facts& f = facts_of(g);
  const auto rank = f.rank(v), of = f.rank(y);
  if (!rank || !of || *rank > *of) return false;
  for (std::size_t i = 0; i < *rank; ++i) {
    const sym* d = f.dim_of(v, int(i));
    if (*of - *rank + i != 1 && (d == nullptr || !d->is_constant(1))) return false;
  }
  return true;
}

// Whether an operand of the Add n is a MatMul's output proven 2-D: a product of more dims is a
// Linear of its own, no Gemm missed.
inline bool adds_to_a_matrix_product(const graph& g, node_id n) {
  for (std::size_t input : {0, 1})
    if (batch_normalization::reads(g, n, "MatMul", input) &&
        facts_of(g).rank(g.input(n, input)) == 2)
      return true;
  return false;
}

}  // namespace bias

struct bias_into_conv {
  static constexpr std::string_view name = "bias-into-conv";
  static constexpr int priority = -1;
  static constexpr auto conv =
      op<"Conv">(capture<"x">, constant<"w">, maybe(batch_normalization::channels<"b", "w", 0>))
          .bind<"conv">();
  static constexpr auto pattern = commutative(op<"Add">(
      capture<"y">(conv),
      constant<"c">.broadcasts_to<"y">().where_bound(
          "one number per output channel", [](const graph& g, value_id v, const auto& bound) {
            return bias::along_channels_only(g, v, bound.template get<"y">());
          })));

  static bool resembles(const graph& g, node_id n) {
    return batch_normalization::reads(g, n, "Conv") || batch_normalization::reads(g, n, "Conv", 1);
  }

  static void emit(const graph& g, const auto& m, rewrite::emitter& e) {
    const auto read = [&](auto t) { return array(g, t).as(dtype::float64); };
    const std::int64_t channels = get<"w">(m)->dims(0);
    const array b = has<"b">(m) ? read(get<"b">(m)) : array::zeros(dtype::float64, channels);
    const array folded = b + read(get<"c">(m)).reshape({-1});
    const node_id conv = get<"conv">(m);
    e.replace_root(e.copy(conv, {e.value(get<"x">(m)), e.value(g.input(conv, 1)),
                                 e.constant(folded.as(dtype(get<"w">(m)->data_type())))}));
  }
};

struct bias_into_gemm {
  static constexpr std::string_view name = "bias-into-gemm";
  static constexpr int priority = -1;
  static constexpr auto pattern = commutative(op<"Add">(
      capture<"y">(op<"Gemm">(capture<"a">.proven_rank<2>(), capture<"b">.proven_rank<2>(),
                              maybe(constant<"c">.proven_rank<1>()))
                       .opset<7>()
                       .bind<"gemm">()),
      constant<"d">.broadcasts_to<"y">()));

  // b as long as a's columns: a Gemm that runs.
  struct columns_after_a {
    static auto write(auto& w) {
      return w.input(w.type(), {w.dims("a")->back(), w.leaf_shape().back()});
    }
  };
  static constexpr auto sources = pattern::sources(source<"b">(written<columns_after_a>));

  static bool resembles(const graph& g, node_id n) {
    return batch_normalization::reads(g, n, "Gemm") || batch_normalization::reads(g, n, "Gemm", 1);
  }

  static void emit(const graph& g, const auto& m, rewrite::emitter& e) {
    const auto read = [&](auto t) { return array(g, t).as(dtype::float64); };
    const node_id gemm = get<"gemm">(m);
    array c = read(get<"d">(m));
    if (has<"c">(m)) c = read(get<"c">(m)) * g.attribute_float(gemm, "beta").value_or(1.0f) + c;
    e.replace_root(e.copy(gemm,
                          {e.value(get<"a">(m)), e.value(get<"b">(m)),
                           e.constant(c.as(dtype(get<"d">(m)->data_type())))},
                          {{"beta", 1.0}}));
  }
};

struct matmul_add_to_gemm {
  static constexpr std::string_view name = "matmul-add-to-gemm";
  static constexpr int priority = -1;
  static constexpr auto a = capture<"a">.proven_rank<2>().dtype<dtype::float32, dtype::float16>();
  static constexpr auto pattern =
      commutative(op<"Add">(capture<"y">(op<"MatMul">(a, capture<"b">.proven_rank<2>())),
                            capture<"c">.broadcasts_to<"y">())
                      .opset<7>());

  static bool resembles(const graph& g, node_id n) { return bias::adds_to_a_matrix_product(g, n); }

  static void emit(const graph&, const auto& m, rewrite::emitter& e) {
    e.replace_root(
        e.op("Gemm", {e.value(get<"a">(m)), e.value(get<"b">(m)), e.value(get<"c">(m))}));
  }
};

}  // namespace fusekit::rules
