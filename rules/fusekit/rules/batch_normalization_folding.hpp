// A BatchNormalization at inference after a Conv, a ConvTranspose or a Gemm with constant weights
// is folded into them:
//
//   x ── Conv(W, b?) ── BatchNormalization(γ, β, μ, σ², ε) ── y   ==>   x ── Conv(W', b') ── y
//   x ── ConvTranspose(W, b?) ── BatchNormalization ── y   ==>   x ── ConvTranspose(W', b') ── y
//   a ── Gemm(W, c?; α, β_g) ── BatchNormalization ── y    ==>   a ── Gemm(W', c'; α, 1) ── y
//
//   s = γ / √(σ² + ε),   W' = W · s along the output channels,   b' = (b − μ) · s + β
//
// The output channels are W's dim 0 for a Conv ([C_out, C_in/group, k…]); dim 1 for a
// ConvTranspose of one group ([C_in, C_out, k…]: with more, a group's channels are a block of
// both dims); for a Gemm the product's columns, W's dim 1, or dim 0 where transB transposes it.
// A Gemm's bias is c scaled by β_g, its product by α: c' = (β_g·c − μ)·s + β, written with β_g 1,
// and α kept. Every statistic is a constant vector of one number per output channel, and so is a
// Conv's bias; a Gemm's is a vector of one number or one per channel. The fold is computed in
// float64 and written in W's type; the node keeps its other attributes. What TorchScript leaves of
// every convolution's and Linear's norm when it does not fold, and what a runtime without ONNX
// Runtime's own fold would run as a second pass over the activations.
//
// A near miss is told only of a BatchNormalization that reads the node each rule folds into: the
// others are no fold.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fusekit/graph/array.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"

namespace fusekit::rules {
using namespace pattern;

namespace batch_normalization {

// A constant vector of one number per output channel, dim `Axis` of the value bound to `Of`.
template <fixed_string N, fixed_string Of, int Axis>
inline constexpr auto channels =
    constant<N>.template proven_rank<1>().template same_dim<0, Of, Axis>();

// The norm, at inference, of the output channels along dim `Axis` of `Of` (W, or the product).
template <fixed_string Of, int Axis, class Producer>
constexpr auto of(Producer producer) {
  return op<"BatchNormalization">(producer, channels<"gamma", Of, Axis>, channels<"beta", Of, Axis>,
                                  channels<"mean", Of, Axis>, channels<"var", Of, Axis>)
      .template attr<"training_mode">(0)
      .template attr<"is_test">(1);
}

// Whether input `input` of n is an output of an `op` node (of ai.onnx).
inline bool reads(const graph& g, node_id n, std::string_view op, std::size_t input = 0) {
  if (g.input(n, input) == no_id) return false;
  const node_id producer = g.producer(g.input(n, input));
  return producer != no_id && g.op_type(producer) == op && g.domain(producer).empty();
}

// W scaled by s along `axis`, and the bias (b·factor − μ)·s + β (b zeros where the node has
// none): computed in float64, written in W's type.
template <fixed_string Bias, class M>
std::pair<std::string, std::string> folded(const graph& g, const M& m, rewrite::emitter& e,
                                           std::size_t axis, double factor = 1) {
  const auto read = [&](auto t) { return array(g, t).as(dtype::float64); };
  const array w = read(get<"w">(m)), mean = read(get<"mean">(m));
  const array s = read(get<"gamma">(m)) /
                  (read(get<"var">(m)) + g.attribute_float(m.root(), "epsilon").value()).sqrt();
  const array b =
      has<Bias>(m) ? read(get<Bias>(m)) * factor : array::zeros(w.type(), w.dims()[axis]);
  const dtype type = dtype(get<"w">(m)->data_type());
  return {e.constant((w * s.along(axis, w.rank())).as(type)),
          e.constant(((b - mean) * s + read(get<"beta">(m))).as(type))};
}

}  // namespace batch_normalization

struct batch_normalization_into_conv {
  static constexpr std::string_view name = "batch-normalization-into-conv";
  // A clean-up, as the eliminations and the constant folds are.
  static constexpr int priority = -1;
  static constexpr auto pattern = batch_normalization::of<"w", 0>(
      op<"Conv">(capture<"x">, constant<"w">, maybe(batch_normalization::channels<"b", "w", 0>))
          .bind<"conv">());

  static bool resembles(const graph& g, node_id n) {
    return batch_normalization::reads(g, n, "Conv");
  }

  static void emit(const graph& g, const auto& m, rewrite::emitter& e) {
    const auto [w, b] = batch_normalization::folded<"b">(g, m, e, 0);
    e.replace_root(e.copy(get<"conv">(m), {e.value(get<"x">(m)), w, b}));
  }
};

struct batch_normalization_into_conv_transpose {
  static constexpr std::string_view name = "batch-normalization-into-conv-transpose";
  static constexpr int priority = -1;
  static constexpr auto pattern = batch_normalization::of<"w", 1>(
      op<"ConvTranspose">(capture<"x">, constant<"w">,
                          maybe(batch_normalization::channels<"b", "w", 1>))
          .attr<"group">(1)
          .bind<"conv">());

  // x of as many channels as W's dim 0 reads: the shape the search gives a leaf, as W has it,
  // its dim 0 for x's channels.
  struct input_channels {
    static auto write(auto& w) {
      std::vector<std::int64_t> dims = w.leaf_shape();
      if (dims.size() >= 2) dims[1] = dims[0];
      return w.input(w.type(), dims);
    }
  };
  static constexpr auto sources = pattern::sources(source<"x">(written<input_channels>));

  static bool resembles(const graph& g, node_id n) {
    return batch_normalization::reads(g, n, "ConvTranspose");
  }

  static void emit(const graph& g, const auto& m, rewrite::emitter& e) {
    const auto [w, b] = batch_normalization::folded<"b">(g, m, e, 1);
    e.replace_root(e.copy(get<"conv">(m), {e.value(get<"x">(m)), w, b}));
  }
};

struct batch_normalization_into_gemm {
  static constexpr std::string_view name = "batch-normalization-into-gemm";
  static constexpr int priority = -1;
  // The statistics as long as the product's columns, whichever of W's dims transB makes them.
  static constexpr auto pattern = batch_normalization::of<"product", 1>(
      capture<"product">(op<"Gemm">(capture<"a">.proven_rank<2>(), constant<"w">.proven_rank<2>(),
                                    maybe(constant<"c">.proven_rank<1>()))
                             .bind<"gemm">()));

  // A [M, K] against W [K, N], as Gemm reads them without transB: the 2-D shape the search
  // gives a leaf, as W has it, transposed.
  struct rows {
    static auto write(auto& w) {
      std::vector<std::int64_t> dims = w.leaf_shape();
      if (dims.size() == 2) std::swap(dims[0], dims[1]);
      return w.input(w.type(), dims);
    }
  };
  static constexpr auto sources = pattern::sources(source<"a">(written<rows>));

  static bool resembles(const graph& g, node_id n) {
    return batch_normalization::reads(g, n, "Gemm");
  }

  // c, one number or one per column, broadcasts to the product as Gemm reads it; so does c'.
  static void emit(const graph& g, const auto& m, rewrite::emitter& e) {
    const node_id gemm = get<"gemm">(m);
    const std::size_t columns = g.attribute_int(gemm, "transB").value_or(0) == 1 ? 0 : 1;
    const auto [w, c] = batch_normalization::folded<"c">(
        g, m, e, columns, g.attribute_float(gemm, "beta").value_or(1.0f));
    e.replace_root(e.copy(gemm, {e.value(get<"a">(m)), w, c}, {{"beta", 1.0}}));
  }
};

}  // namespace fusekit::rules
