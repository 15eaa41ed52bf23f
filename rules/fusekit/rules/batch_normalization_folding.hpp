// A BatchNormalization at inference after a Conv with constant weights is folded into them:
//
//   x ── Conv(W, b?) ── BatchNormalization(γ, β, μ, σ², ε) ── y   ==>   x ── Conv(W', b') ── y
//
//   s = γ / √(σ² + ε),   W' = W · s (per output channel),   b' = (b − μ) · s + β
//
// Every statistic is a constant vector of one number per output channel (W's dim 0). The fold is
// computed in float64 and written in W's type; the Conv keeps its attributes. What TorchScript
// leaves of every convolution's norm when it does not fold, and what a runtime without ONNX
// Runtime's own fold would run as a second pass over the activations.
//
// A near miss is told only of a BatchNormalization that reads a Conv: the others are no fold.
#pragma once

#include "fusekit/graph/array.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"

namespace fusekit::rules {
using namespace pattern;

struct batch_normalization_into_conv {
  static constexpr std::string_view name = "batch-normalization-into-conv";
  // A clean-up, as the eliminations and the constant folds are.
  static constexpr int priority = -1;
  template <fixed_string N>
  static constexpr auto channels =
      constant<N>.template proven_rank<1>().template same_dim<0, "w", 0>();
  static constexpr auto pattern =
      op<"BatchNormalization">(
          op<"Conv">(capture<"x">, constant<"w">, maybe(channels<"b">)).bind<"conv">(),
          channels<"gamma">, channels<"beta">, channels<"mean">, channels<"var">)
          .attr<"training_mode">(0)
          .attr<"is_test">(1);

  static bool resembles(const graph& g, node_id n) {
    const node_id conv = g.producer(g.input(n, 0));
    return conv != no_id && g.op_type(conv) == "Conv";
  }

  static void emit(const graph& g, const auto& m, rewrite::emitter& e) {
    const auto read = [&](auto t) { return array(g, t).as(dtype::float64); };
    const array w = read(get<"w">(m)), mean = read(get<"mean">(m));
    const array s = read(get<"gamma">(m)) /
                    (read(get<"var">(m)) + g.attribute_float(m.root(), "epsilon").value()).sqrt();
    const array b = has<"b">(m) ? read(get<"b">(m)) : array::zeros(w.type(), w.dims()[0]);
    const dtype type = dtype(get<"w">(m)->data_type());
    e.replace_root(e.copy(get<"conv">(m),
                          {e.value(get<"x">(m)), e.constant((w * s.along(0, w.rank())).as(type)),
                           e.constant(((b - mean) * s + read(get<"beta">(m))).as(type))}));
  }
};

}  // namespace fusekit::rules
