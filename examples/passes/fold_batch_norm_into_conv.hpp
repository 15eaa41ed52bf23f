// A BatchNormalization at inference after a Conv with constant weights is folded into them:
//
//   x ── Conv(W, b?) ── BatchNormalization(γ, β, μ, σ², ε) ── y   ==>   x ── Conv(W', b') ── y
//
//   s = γ / √(σ² + ε),   W' = W · s (per output channel),   b' = (b − μ) · s + β
//
// Every statistic is a constant vector of one number per output channel (W's dim 0). The fold is
// computed in float64 and written in W's type; the Conv keeps its attributes.
#pragma once

#include "fusekit/graph/array.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"

namespace passes {
using namespace fusekit::pattern;

struct fold_batch_norm_into_conv {
  static constexpr std::string_view name = "fold-batch-norm-into-conv";
  template <fixed_string N>
  static constexpr auto channels =
      constant<N>.template proven_rank<1>().template same_dim<0, "w", 0>();
  static constexpr auto pattern =
      op<"BatchNormalization">(
          op<"Conv">(capture<"x">, constant<"w">, maybe(channels<"b">)).bind<"conv">(),
          channels<"gamma">, channels<"beta">, channels<"mean">, channels<"var">)
          .attr<"training_mode">(0)
          .attr<"is_test">(1);

  static void emit(const fusekit::graph& g, const auto& m, fusekit::rewrite::emitter& e) {
    using fusekit::array;
    const auto read = [&](auto t) { return array(g, t).as(fusekit::dtype::float64); };
    const array w = read(get<"w">(m)), mean = read(get<"mean">(m));
    const array s = read(get<"gamma">(m)) /
                    (read(get<"var">(m)) + g.attribute_float(m.root(), "epsilon").value()).sqrt();
    const array b = has<"b">(m) ? read(get<"b">(m)) : array::zeros(w.type(), w.dims()[0]);
    const fusekit::dtype type = fusekit::dtype(get<"w">(m)->data_type());
    e.replace_root(e.copy(get<"conv">(m),
                          {e.value(get<"x">(m)), e.constant((w * s.along(0, w.rank())).as(type)),
                           e.constant(((b - mean) * s + read(get<"beta">(m))).as(type))}));
  }
};

}  // namespace passes
