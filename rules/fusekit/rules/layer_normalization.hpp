// LayerNorm and RMSNorm written out in elementary ops, each as the one op that computes it.
//
//   LayerNorm:  x ─┬─ ReduceMean ─┐
//                  └──────────── Sub ── d ─┬─ Pow(·, 2) | d·d ── ReduceMean ── Add(·, ε) ── Sqrt ─┐
//                                          └──────────── Div | ·Reciprocal ─────────────────────┴─
//               ── Mul(·, γ) ── Add(·, β)? ── y
//   ==>         x, γ, β? ── LayerNormalization(axis -1, epsilon ε) ── y
//
//   RMSNorm:    x ─┬─ Pow(·, 2) | x·x ── ReduceMean ── Add(·, ε) ── Sqrt ─┐
//                  └──────────────── ·Reciprocal | Div | ·(1 ÷ ·) ───────┴─ [Mul(·, w | s)] ── y
//   ==>         x, w ── SimplifiedLayerNormalization (target ort) | RMSNormalization (target onnx,
//               opset ≥ 23), axis -1, epsilon ε ── y
//               (a scalar s: w = s in every element; no Mul at all, torch's RMSNorm without
//               elementwise_affine: w = 1)
//
// Both reduce over the last axis only, keeping it (keepdims 1); ε is a constant at least 0; γ, β
// and w are vectors of the last axis (transformers' Gemma multiplies by 1 + w: any such vector
// value is the scale), s a scalar (DiffLlama scales its unweighted head norm by 1 − λ). The
// statistics may run in float32 on a float16 x (torch's `.float()` and converters' float32 islands:
// Casts in and out, crossed by the pattern), never narrower than x, since the fused ops compute in
// float32 (stash_type 1); y is of x's type.
#pragma once

#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fusekit/graph/facts.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/rule.hpp"
#include "layer_ops.hpp"
#include "options.hpp"

namespace fusekit::rules {

namespace norm_forms {
using namespace pattern;

using layer::add;
using layer::mul;

// The mean over the last axis, kept: what the norms subtract or divide by broadcasts back.
inline constexpr auto mean_last = [](auto p) {
  return op<"ReduceMean">(p, maybe(any())).axes(last_axis).template attr<"keepdims">(1);
};
inline constexpr auto square = [](auto p) {
  return any_of(op<"Pow">(p, constant_scalar<"two">.value(2.0)), mul(p, p));
};
// ε becomes a float attribute: any larger would not be one.
inline constexpr double max_epsilon = std::numeric_limits<float>::max();
// √(mean of squares + ε)
inline constexpr auto root_mean_square = [](auto p) {
  return op<"Sqrt">(add(mean_last(square(p)).template bind<"statistics">(),
                        constant_scalar<"epsilon">.at_least(0).at_most(max_epsilon)));
};
// p ÷ d in the spellings exporters write it
inline constexpr auto divided = [](auto p, auto d) {
  return any_of(op<"Div">(p, d), mul(p, op<"Reciprocal">(d)),
                mul(p, op<"Div">(constant_scalar<"one">.value(1.0), d)));
};
inline constexpr auto hidden_vector = [](auto c) {
  return c.template proven_rank<1>().template same_dim<0, "x", -1>();
};

// Whether what n computes (through Casts) is multiplied by a vector or a scalar: the scaled
// RMSNorm whose match, rooted at that Mul, takes it or says why not.
inline bool scaled_after(const graph& g, node_id n) {
  const facts& f = facts_of(g);
  for (const use& u : g.consumers(g.output(n, 0))) {
    if (!g.domain(u.node).empty()) continue;
    if (g.op_type(u.node) == "Cast" && scaled_after(g, u.node)) return true;
    if (g.op_type(u.node) != "Mul") continue;
    const auto rank = f.rank(g.input(u.node, u.slot == 0 ? 1 : 0));
    if (rank && *rank <= 1) return true;
  }
  return false;
}

inline constexpr auto x = through_casts(capture<"x">);
inline constexpr auto centred = capture<"centred">(op<"Sub">(x, mean_last(x)));
inline constexpr auto layer_normed = divided(centred, root_mean_square(capture<"centred">));
inline constexpr auto rms_normed = divided(x, root_mean_square(x));
// The RMSNorm that nothing scales after it: rooted at its division.
inline constexpr auto unscaled_rms_normed = [] {
  constexpr auto last = [](const graph& g, node_id n) { return !scaled_after(g, n); };
  constexpr const char* text = "is scaled by no vector or scalar after it";
  constexpr auto d = root_mean_square(x);
  return any_of(op<"Div">(x, d).where(text, last), mul(x, op<"Reciprocal">(d)).where(text, last),
                mul(x, op<"Div">(constant_scalar<"one">.value(1.0), d)).where(text, last));
}();

}  // namespace norm_forms

// What both rules prove beyond the pattern: the kernels' types, and the statistics computed in
// x's type or float32 (the fused op's), never narrower.
inline rewrite::verdict admits_norm(const graph& g, value_id x, node_id statistics, node_id root,
                                    std::string_view op, const fusion_options& o) {
  if (auto no = layer::admits_dtype(g, x, op, o); !no) return no;
  const dtype computed = g.type(g.output(statistics, 0));
  if (computed != g.type(x) && computed != dtype::float32)
    return rewrite::verdict::no(
        g.describe(statistics) + " runs in " + std::string(dtype_name(computed)) + " on " +
        std::string(dtype_name(g.type(x))) + " " + pattern::describe_value(g, x) + "; " +
        std::string(op) + " computes in float32");
  if (g.type(g.output(root, 0)) != g.type(x))
    return rewrite::verdict::no(
        g.describe(root) + " returns " + std::string(dtype_name(g.type(g.output(root, 0)))) +
        " of " + std::string(dtype_name(g.type(x))) + " " + pattern::describe_value(g, x) + "; " +
        std::string(op) + " returns x's type");
  return rewrite::verdict::yes();
}

// Whether a vector is added to n's output: a β the match rooted at n would leave behind, where
// the match rooted at that Add takes it.
inline bool shifted_by_a_vector(const graph& g, node_id n) {
  for (const use& u : g.consumers(g.output(n, 0)))
    if (g.op_type(u.node) == "Add" && g.domain(u.node).empty())
      for (value_id in : g.inputs(u.node))
        if (in != g.output(n, 0) && facts_of(g).rank(in) == 1) return true;
  return false;
}

struct layer_normalization {
  using options = fusion_options;
  static constexpr std::string_view name = "layer-normalization";
  // A LayerNorm is also the RMSNorm of its centred x: where both rules match, this one wins.
  static constexpr int priority = 1;
  static constexpr auto pattern = [] {
    using namespace norm_forms;
    constexpr auto scaled = mul(through_casts(layer_normed), hidden_vector(capture<"gamma">));
    return any_of(add(scaled, hidden_vector(capture<"beta">)),
                  scaled.where("is shifted by no vector (β)", [](const graph& g, node_id n) {
                    return !shifted_by_a_vector(g, n);
                  }));
  }();

  static bool resembles(const graph& g, node_id n) {
    return layer::reads_op_within(g, n, "Sqrt", 4) && layer::reads_op_within(g, n, "Sub", 4);
  }

  static rewrite::verdict guard(const graph& g, const auto& m, const options& o) {
    if (auto no =
            admits_norm(g, get<"x">(m), get<"statistics">(m), m.root(), "LayerNormalization", o);
        !no)
      return no;
    return layer::admits_opset(g, o.fused_target, "LayerNormalization", 17);
  }

  static void emit(const graph&, const auto& m, rewrite::emitter& e, const options&) {
    e.replace_root(e.op("LayerNormalization",
                        {e.value(get<"x">(m)), e.value(get<"gamma">(m)), e.value(get<"beta">(m))},
                        {{"axis", -1}, {"epsilon", get<"epsilon">(m)}}));
  }
};

struct rms_normalization {
  using options = fusion_options;
  static constexpr std::string_view name = "rms-normalization";
  static constexpr auto pattern = [] {
    using namespace norm_forms;
    return any_of(mul(through_casts(rms_normed), hidden_vector(capture<"scale">)),
                  mul(through_casts(rms_normed), capture<"factor">.template proven_rank<0>()),
                  unscaled_rms_normed);
  }();

  static bool resembles(const graph& g, node_id n) {
    return layer::reads_op_within(g, n, "Sqrt", 4) && layer::reads_op_within(g, n, "ReduceMean", 6);
  }

  static rewrite::verdict guard(const graph& g, const auto& m, const options& o) {
    const bool ort = o.fused_target == target::ort;
    const std::string_view op = ort ? "SimplifiedLayerNormalization" : "RMSNormalization";
    if (auto no = admits_norm(g, get<"x">(m), get<"statistics">(m), m.root(), op, o); !no)
      return no;
    return layer::admits_opset(g, o.fused_target, op, 23);
  }

  static void emit(const graph& g, const auto& m, rewrite::emitter& e, const options& o) {
    e.replace_root(e.op(
        o.fused_target == target::ort ? "SimplifiedLayerNormalization" : "RMSNormalization",
        {e.value(get<"x">(m)), scale(g, m, e)}, {{"axis", -1}, {"epsilon", get<"epsilon">(m)}}));
  }

 private:
  // The op's scale: w, or s (1 where nothing scales) in every element of x's last axis: a
  // constant where the facts know both, else expanded at run time.
  static std::string scale(const graph& g, const auto& m, rewrite::emitter& e) {
    if (has<"scale">(m)) return e.value(get<"scale">(m));
    const facts& f = facts_of(g);
    const value_id x = get<"x">(m), y = g.output(m.root(), 0);
    const dtype t = g.type(y);
    const auto value = has<"factor">(m) ? f.real_scalar(get<"factor">(m)) : std::optional(1.0);
    const auto rank = f.rank(x);
    const auto hidden = rank && *rank > 0 ? f.dim_of(x, int(*rank) - 1)->constant() : std::nullopt;
    if (value && hidden)
      return e.constant(t, {*hidden}, std::vector<double>(std::size_t(*hidden), *value));
    const std::string s = has<"factor">(m) ? e.value(get<"factor">(m)) : e.constant(t, {}, {1.0});
    const std::string last = e.op("Gather", {e.op("Shape", {e.value(x)}), e.ints({-1})});
    return e.op("Expand", {s, last});
  }
};

}  // namespace fusekit::rules
