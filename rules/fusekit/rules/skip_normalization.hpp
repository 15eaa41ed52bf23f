// The residual Add of a transformer layer, and the bias Add a Linear layer leaves before it, folded
// into the norm that reads the sum (target ort; ONNX has no such op).
//
//   x ── Add(·, bias)? ── Add(·, skip) ──┬── LayerNormalization(·, γ, β?) ──────── y
//                                        │   | SimplifiedLayerNormalization(·, w)
//                                        └── the next layer's residual Add, if any
//   ==>
//   x, skip, γ, β?, bias? ── com.microsoft SkipLayerNormalization ──────────┬── output 0: y
//   x, skip, w, bias?     ── com.microsoft SkipSimplifiedLayerNormalization ┘── output 3: the sum
//
// The norms come from the exporter (LayerNormalization from opset 17) or from this library's
// layer_normalization.hpp, an earlier pass of the same run. Accepted: both Adds' operands in either
// order; a bias only where it is a vector of the last axis (any other stays an Add before the
// fused op); for --provider cuda, a sum read on, which output 3 (input_skip_bias_sum) then gives.
// Refused, with the reason: x of another rank than 2 or 3, or a skip not proven of x's shape (the
// kernels broadcast neither); a scale or shift that is not a vector of the last axis; a sum read
// on, for the CPU provider.
//
// Why the provider decides: ONNX Runtime fuses Add + norm into these ops itself when it loads a
// model, but only where the norm alone reads the sum, so that case costs nothing to fuse here. The
// sum read on (every pre-norm transformer: the next residual reads it) is this rule's own. On the
// CPU provider from ONNX Runtime 1.30 on, the fused kernels are the slower form: on [2, 256, 384]
// float32, one thread, SkipLayerNormalization took 1.21 ms where Add and LayerNormalization took
// 0.20 ms together, SkipSimplifiedLayerNormalization 0.29 ms against 0.19 ms (1.30 and 1.32 alike;
// in 1.23 to 1.29 the fused ops were the faster: benchmarks/kernel_forms.py, and its results in
// benchmarks/RESULTS.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "fusekit/graph/facts.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/rule.hpp"
#include "layer_ops.hpp"
#include "options.hpp"

namespace fusekit::rules {

namespace skip_forms {
using namespace pattern;

// A check with a fallback belongs in the pattern, not the guard: a bias that fails here leaves
// the second alternative to match without it.
inline constexpr auto biased =
    commutative(op<"Add">(capture<"x">, capture<"bias">.proven_rank<1>().same_dim<0, "x", -1>()));
// multi_use: the next layer's residual reads the sum too; emit gives it from output 3.
inline constexpr auto residual = [](auto in) {
  return commutative(op<"Add">(in, capture<"skip">)).multi_use();
};
// transformers' RMSNorm begins with `.to(torch.float32)`: in a float32 model a Cast to the type it
// reads, which TorchScript keeps, and whose output the next residual Add may read in place of the
// sum. The fused op reads the sum itself; its output 3 replaces both.
inline constexpr auto summed =
    optional_op(
        op<"Cast">(any_of(residual(biased), residual(capture<"x">)))
            .multi_use()
            .where("casts to the type it reads",
                   [](const graph& g, node_id n) { return g.passes_input_at_inference(n); }))
        .bind<"cast">();

// What the guard refuses, written (pattern/sources.hpp): x of rank 4 with a skip alike, a skip of
// one row, a scale of one element.
struct rank_four {
  static auto write(auto& w) { return w.input(w.type(), {2, 2, 2, w.leaf_shape().back()}); }
};
struct like_x {
  static auto write(auto& w) { return w.input(w.type(), *w.dims("x")); }
};
struct a_row {
  static auto write(auto& w) { return w.input(w.type(), {w.dim("x", -1)}); }
};
struct one_element {
  static auto write(auto& w) { return w.initializer(w.type(), {1}, {1.0}); }
};
inline constexpr auto guard_refusals = refusals(
    refusal<"takes rank 2 or 3">(source<"x">(written<rank_four>), source<"skip">(written<like_x>)),
    refusal<": not the same shape, and">(source<"skip">(written<a_row>)),
    refusal<"takes a vector of the last axis">(source<"scale">(written<one_element>)));

}  // namespace skip_forms

// Whether n's input is a sum (through the Cast the pattern crosses): a norm that reads anything
// else (the first layer's, reading an embedding) is no residual norm, and no near miss.
inline bool normalises_a_sum(const graph& g, node_id n) {
  node_id p = g.input(n, 0) == no_id ? no_id : g.producer(g.input(n, 0));
  if (p != no_id && g.op_type(p) == "Cast" && g.input(p, 0) != no_id) p = g.producer(g.input(p, 0));
  return p != no_id && g.op_type(p) == "Add" && g.domain(p).empty();
}

// The sum, and the Cast's output that stands for it, where readers beyond the match read either:
// what output 3 must give.
struct sum_readers {
  value_id sum = no_id;
  value_id cast_sum = no_id;
  bool sum_read_on = false;
  bool cast_read_on = false;
  bool any() const { return sum_read_on || cast_read_on; }
};

inline sum_readers readers_of_sum(const graph& g, const auto& m) {
  const auto read_on = [&](value_id v) {
    return v != no_id && (g.consumers(v).size() > 1 || g.is_graph_output(v));
  };
  const node_id cast = get<"cast">(m);
  sum_readers r;
  r.sum = cast == no_id ? g.input(m.root(), 0) : g.input(cast, 0);
  r.cast_sum = cast == no_id ? no_id : g.output(cast, 0);
  r.sum_read_on = read_on(r.sum);
  r.cast_read_on = read_on(r.cast_sum);
  return r;
}

template <class Norm>
struct skip_normalization {
  using options = fusion_options;
  static constexpr std::string_view name = Norm::name;
  static constexpr auto pattern = Norm::pattern;

  static constexpr auto refusals = skip_forms::guard_refusals;

  static bool resembles(const graph& g, node_id n) { return normalises_a_sum(g, n); }

  static rewrite::verdict guard(const graph& g, const auto& m, const options& o) {
    const facts& f = facts_of(g);
    const value_id x = get<"x">(m);
    if (auto no = layer::admits_dtype(g, x, Norm::op, o); !no) return no;
    if (const auto rank = f.rank(x); rank != 2 && rank != 3)
      return rewrite::verdict::no(pattern::describe_value(g, x) + " is " + f.shape_text(x) + ", " +
                                  std::string(Norm::op) + " takes rank 2 or 3");
    if (auto no = layer::admits_same_shape(g, x, get<"skip">(m), Norm::op); !no) return no;
    if (auto no = layer::admits_hidden_vector(g, "scale", get<"scale">(m), x, Norm::op); !no)
      return no;
    if constexpr (Norm::shifted)
      if (has<"shift">(m))
        if (auto no = layer::admits_hidden_vector(g, "shift", get<"shift">(m), x, Norm::op); !no)
          return no;
    if (o.runs_on == provider::cpu)
      if (const sum_readers r = readers_of_sum(g, m); r.any())
        return rewrite::verdict::no(
            pattern::describe_value(g, r.sum_read_on ? r.sum : r.cast_sum) +
            " is read on: on ONNX Runtime's CPU provider (1.30 on) " + std::string(Norm::op) +
            " runs slower than the Add and the norm it replaces (--provider cuda fuses it)");
    return rewrite::verdict::yes();
  }

  static void emit(const graph& g, const auto& m, rewrite::emitter& e, const options&) {
    // Output 3 only where the sum is read on (beyond the one reader the match holds); the mean
    // and inverse deviation (1, 2) never: no one reads them.
    const sum_readers r = readers_of_sum(g, m);
    // Copied, never left to the default: the norms' is 1e-5, the fused ops' 1e-12.
    const float epsilon = g.attribute_float(m.root(), "epsilon").value_or(1e-5F);
    std::vector<std::string> in = {e.value(get<"x">(m)), e.value(get<"skip">(m)),
                                   e.value(get<"scale">(m))};
    if constexpr (Norm::shifted) in.push_back(e.value(get<"shift">(m)));
    in.push_back(e.value(get<"bias">(m)));
    const auto out = e.ops(Norm::op, std::move(in), {{"epsilon", double(epsilon)}}, "com.microsoft",
                           std::vector<bool>{true, false, false, r.any()});
    e.replace_root(out[0]);
    if (r.sum_read_on) e.replace(r.sum, out[3]);
    if (r.cast_read_on) e.replace(r.cast_sum, out[3]);
    e.note("bias", has<"bias">(m));
  }
};

struct skip_layer_norm_form {
  static constexpr std::string_view name = "skip-layer-normalization";
  static constexpr std::string_view op = "SkipLayerNormalization";
  static constexpr bool shifted = true;  // β, LayerNormalization's input 2
  static constexpr auto pattern =
      pattern::op<"LayerNormalization">(skip_forms::summed, pattern::capture<"scale">,
                                        pattern::maybe(pattern::capture<"shift">))
          .attr<"axis">(pattern::last_axis);
};
struct skip_rms_norm_form {
  static constexpr std::string_view name = "skip-rms-normalization";
  static constexpr std::string_view op = "SkipSimplifiedLayerNormalization";
  static constexpr bool shifted = false;
  static constexpr auto pattern =
      pattern::op<"SimplifiedLayerNormalization">(skip_forms::summed, pattern::capture<"scale">)
          .attr<"axis">(pattern::last_axis);
};

using skip_layer_normalization = skip_normalization<skip_layer_norm_form>;
using skip_rms_normalization = skip_normalization<skip_rms_norm_form>;

}  // namespace fusekit::rules
