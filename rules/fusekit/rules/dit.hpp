// DiT attention, as F5-TTS and other diffusion transformers export it.
//
//   before                                       after, target ort
//   q ──────────────────┐                        q ─ Transpose(0,2,1,3) ─ Reshape(B,S,D) ─┐
//   [Transpose] kᵀ ── MatMul                     k (BNSH) ─────────────────────────────────┤
//                       │ [Cast → f32]           v (BNSH) ─────────────────────────────────┤
//                     Mul | Div (scalar)                          com.microsoft.MultiHeadAttention
//                     Softmax (last axis)                          (num_heads, scale) → (B,S,D)
//                       │ [Cast → f16]
//   v ────────────── MatMul                      after, target onnx (opset ≥ 23)
//                     [Transpose(0,2,1,3)        Attention(q, k, v; scale, softmax_precision)
//                      → Reshape(B,S,D)]         on BNSH tensors as they are
//
// Two rules share the pattern: dit-attention-merged also absorbs the trailing head merge
// (Transpose + Reshape to (B,S,D)), which MultiHeadAttention's 3-D output makes free; it runs
// first, and dit-attention takes the blocks without one.
#pragma once

#include <cmath>
#include <string>

#include "fusekit/graph/facts.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/rule.hpp"

namespace fusekit::rules {

namespace dit {

using namespace pattern;

// The dynamo exporter's 3-D detour Reshape(B·N, S, H) → Transpose(0,2,1) → Reshape(B, N, H, S)
// is Transpose(0,1,3,2) of k exactly when the first Reshape merges batch and heads and keeps
// sequence and head size, and the second splits them back: both only regroup leading dims.
inline bool detour_is_a_transpose(const graph& g, node_id outer) {
  const facts& f = facts_of(g);
  const value_id kt = g.output(outer, 0);
  const node_id turn = g.producer(g.input(outer, 0));
  const node_id merge = turn == no_id ? no_id : g.producer(g.input(turn, 0));
  if (merge == no_id) return false;
  const value_id k = g.input(merge, 0), flat = g.output(merge, 0);
  if (f.rank(k) != 4u || f.rank(flat) != 3u || f.rank(kt) != 4u) return false;
  const auto& d = f.shape(k).dims;
  const auto& r = f.shape(flat).dims;
  const auto& t = f.shape(kt).dims;
  return equal(r[0], d[0] * d[1]) == truth::yes && equal(r[1], d[2]) == truth::yes &&
         equal(r[2], d[3]) == truth::yes && equal(t[0], d[0]) == truth::yes &&
         equal(t[1], d[1]) == truth::yes && equal(t[2], d[3]) == truth::yes &&
         equal(t[3], d[2]) == truth::yes;
}

// Kᵀ as BNHS: transposed from BNSH or BSNH here, through the proven detour, or any other
// [B, N, H, L] tensor as given (then transposed back on emit).
inline constexpr auto k_detour =
    op<"Reshape">(
        op<"Transpose">(op<"Reshape">(capture<"k_flat">, any())).attr<"perm">(ints(0, 2, 1)), any())
        .where("k's last two dims transposed", detour_is_a_transpose);
inline constexpr auto k_transposed = any_of(
    op<"Transpose">(capture<"k_bnsh">).attr<"perm">(ints(0, 1, 3, 2)),
    op<"Transpose">(capture<"k_bsnh">).attr<"perm">(ints(0, 2, 3, 1)), k_detour, capture<"kt">);

// A scale factor the facts fold to one number: a constant, or computed from q's shape at run
// time as torch's SDPA decomposition does (Shape → Slice → Cast → Sqrt → Div → Sqrt).
inline constexpr auto folded_scalar = [](const graph& g, value_id v) {
  return facts_of(g).real_scalar(v).has_value();
};

// Post-scaled, as hand-written F5-TTS exporters write it: MatMul(q, kᵀ) → [Cast] → Mul|Div.
inline constexpr auto scores = op<"MatMul">(capture<"q">, k_transposed).bind<"scores">();
inline constexpr auto widened = optional<"Cast">(scores).bind<"up">();
inline constexpr auto post_scaled =
    any_of(commutative(op<"Mul">(widened, constant_scalar<"scale">)),
           op<"Div">(widened, constant_scalar<"divisor">));
// Pre-scaled, torch's SDPA decomposition: MatMul(q·√s, kᵀ·√s).
inline constexpr auto pre_scaled =
    op<"MatMul">(
        commutative(op<"Mul">(capture<"q">, capture<"q_factor">.where("a scalar", folded_scalar))),
        commutative(op<"Mul">(k_transposed, capture<"k_factor">.where("a scalar", folded_scalar))))
        .bind<"scores">();
// An additive mask on the scaled scores, as exporters build it (Where(bool, 0, −inf|finfo.min))
// or as a model input: the fused ops' attention bias, when its shape is one they take.
inline constexpr auto logits = any_of(post_scaled, pre_scaled);
inline constexpr auto masked = any_of(commutative(op<"Add">(logits, capture<"mask">)), logits);
inline constexpr auto softmax = op<"Softmax">(masked).attr<"axis">(last_axis);
// torch's SDPA decomposition zeroes the rows a mask hides entirely: Where(IsNaN(p), 0, p).
inline constexpr auto guarded =
    any_of(op<"Where">(op<"IsNaN">(capture<"p">(softmax)), constant_scalar<"nan_fill">.value(0.0),
                       capture<"p">),
           softmax);
// Eager decoders cast after Softmax to the type it already has, sometimes twice: no-ops skipped.
inline constexpr auto probs = optional<"Cast">(transparent(guarded)).bind<"down">();
inline constexpr auto core = op<"MatMul">(probs, capture<"v">);
inline constexpr auto merged =
    op<"Reshape">(op<"Transpose">(core).attr<"perm">(ints(0, 2, 1, 3)), any());

// The scale the block applies to QKᵀ: the post-scale, or the product of the two pre-scale
// factors.
template <class M>
double scale_of(const graph& g, const M& m) {
  if (has<"scale">(m)) return get<"scale">(m);
  if (has<"divisor">(m)) return 1.0 / get<"divisor">(m);
  const facts& f = facts_of(g);
  return *f.real_scalar(get<"q_factor">(m)) * *f.real_scalar(get<"k_factor">(m));
}

// kᵀ as the QKᵀ MatMul reads it.
template <class M>
value_id key_transposed(const graph& g, const M& m) {
  const node_id scores = get<"scores">(m);
  if (has<"q_factor">(m)) {
    const node_id scaled_k = g.producer(g.input(scores, 1));
    const value_id a = g.input(scaled_k, 0);
    return a == get<"k_factor">(m) ? g.input(scaled_k, 1) : a;
  }
  return g.input(scores, 1);
}

// Whether a Softmax feeds the anchor's data path within a few nodes: what makes a failed match
// at this anchor a near miss worth a reason, rather than an unrelated MatMul or Reshape.
inline bool softmax_upstream(const graph& g, node_id n) {
  for (int step = 0; step < 8 && n != no_id; ++step) {
    if (g.op_type(n) == "Softmax" && g.domain(n).empty()) return true;
    n = g.producer(g.input(n, 0));
  }
  return false;
}

// The checks across captures that a pattern cannot express.
template <class M>
rewrite::verdict guard(const graph& g, const M& m, const rewrite::options& opts) {
  using rewrite::verdict;
  const value_id q = get<"q">(m), v = get<"v">(m);
  const dtype t = g.type(q);
  if (!is_float(t)) return verdict::no("q has dtype " + std::string(dtype_name(t)));
  if (g.type(v) != t)
    return verdict::no("q is " + std::string(dtype_name(t)) + " but v is " +
                       std::string(dtype_name(g.type(v))) + "; the fused op needs one dtype");
  const node_id up = get<"up">(m);
  node_id down = get<"down">(m);
  // A Cast after Softmax to the type it already has (eager decoders) changes nothing.
  if (up == no_id && down != no_id && g.type(g.input(down, 0)) == t &&
      g.attribute_int(down, "to") == std::int64_t(t))
    down = no_id;
  if ((up == no_id) != (down == no_id))
    return verdict::no("only one of the casts around Softmax is there");
  if (up != no_id) {
    const bool round_trip = (t == dtype::float16 || t == dtype::bfloat16) &&
                            g.attribute_int(up, "to") == std::int64_t(dtype::float32) &&
                            g.attribute_int(down, "to") == std::int64_t(t);
    if (!round_trip)
      return verdict::no("the casts around Softmax are not a " + std::string(dtype_name(t)) +
                         " → float32 → " + std::string(dtype_name(t)) + " round trip");
  }
  const value_id kt = key_transposed(g, m);
  const facts& f = facts_of(g);
  if (has<"q_factor">(m) && get<"q_factor">(m) != get<"k_factor">(m) &&
      *f.real_scalar(get<"q_factor">(m)) != *f.real_scalar(get<"k_factor">(m)))
    return verdict::no("the scale factors on q (" +
                       pattern::number_text(*f.real_scalar(get<"q_factor">(m))) + ") and kᵀ (" +
                       pattern::number_text(*f.real_scalar(get<"k_factor">(m))) +
                       ") differ; torch's decomposition scales both by one √scale");
  if (f.rank(q) != 4u || f.rank(kt) != 4u || f.rank(v) != 4u)
    return verdict::no("q, kᵀ and v are not proven 4-D [batch, heads, sequence, head size]: q " +
                       f.shape_text(q) + ", kᵀ " + f.shape_text(kt) + ", v " + f.shape_text(v));
  // The MatMuls broadcast batch and heads; the fused ops take them equal, so equal is proven.
  for (const auto& [other, label] : {std::pair{kt, "kᵀ"}, std::pair{v, "v"}})
    if (f.same_dim(q, 0, other, 0) != truth::yes)
      return verdict::no(std::string("the batch of q and ") + label + " is not proven equal (" +
                         f.shape_text(q) + " against " + f.shape_text(other) +
                         "): the MatMul broadcasts, the fused op does not");
  const bool same_heads =
      f.same_dim(q, 1, kt, 1) == truth::yes && f.same_dim(q, 1, v, 1) == truth::yes;
  if (!same_heads) {
    const auto q_heads = f.dim_of(q, 1)->constant(), kv_heads = f.dim_of(kt, 1)->constant();
    // Attention-23 takes grouped key/value heads: q's heads a multiple of k's and v's.
    const bool grouped = opts.fused_target == rewrite::options::target::onnx &&
                         f.same_dim(kt, 1, v, 1) == truth::yes && q_heads && kv_heads &&
                         *kv_heads > 0 && *q_heads % *kv_heads == 0;
    if (!grouped)
      return verdict::no("the heads of q " + f.shape_text(q) + " and of kᵀ " + f.shape_text(kt) +
                         " and v " + f.shape_text(v) +
                         " are not proven equal, nor (target onnx) a proven multiple of the "
                         "key/value heads");
  }
  if (opts.fused_target == rewrite::options::target::ort && f.same_dim(q, 3, v, 3) != truth::yes)
    return verdict::no("the head size of v " + f.shape_text(v) + " is not proven equal to q's " +
                       f.shape_text(q) + "; MultiHeadAttention needs one head size");
  const auto model_heads = f.dim_of(q, 1)->constant();
  if (!model_heads && opts.num_heads == 0)
    return verdict::no("the head count of q " + f.shape_text(q) +
                       " is not a number the model proves; give it with --num-heads");
  if (model_heads && opts.num_heads > 0 && *model_heads != opts.num_heads)
    return verdict::no("--num-heads " + std::to_string(opts.num_heads) + " contradicts the " +
                       std::to_string(*model_heads) + " heads of the model");
  if (has<"mask">(m)) {
    const value_id mask = get<"mask">(m);
    const sym* d = f.rank(mask) == 4u ? f.dim_of(mask, 0) : nullptr;
    auto one_or = [&](int i, value_id x, int j) {
      return f.dim_of(mask, i)->is_constant(1) || f.same_dim(mask, i, x, j) == truth::yes;
    };
    if (d == nullptr || !one_or(0, q, 0) || !one_or(1, q, 1) ||
        f.same_dim(mask, 2, q, 2) != truth::yes || f.same_dim(mask, 3, v, 2) != truth::yes)
      return verdict::no("the mask " + f.shape_text(mask) +
                         " is not proven to be (batch or 1, heads or 1, sequence, key length) "
                         "for q " +
                         f.shape_text(q) + " and v " + f.shape_text(v));
    if (g.type(mask) != t)
      return verdict::no("the mask is " + std::string(dtype_name(g.type(mask))) + " but q is " +
                         std::string(dtype_name(t)) + "; the fused op adds it in q's type");
  }
  const double scale = scale_of(g, m);
  if (!std::isfinite(scale) || scale <= 0)
    return verdict::no("the scale " + std::to_string(scale) + " is not a positive finite number");
  if (opts.fused_target == rewrite::options::target::onnx && g.opset("") < 23)
    return verdict::no("target onnx needs ai.onnx opset 23 for Attention; the model imports " +
                       std::to_string(g.opset("")) + " and fusekit does not raise it");
  return verdict::yes();
}

// K in BNSH, however the pattern found it.
template <class M>
std::string key_bnsh(const M& m, rewrite::emitter& e) {
  if (has<"k_bnsh">(m)) return e.value(get<"k_bnsh">(m));
  if (has<"k_flat">(m)) return e.value(get<"k_flat">(m));
  if (has<"k_bsnh">(m))
    return e.op("Transpose", {e.value(get<"k_bsnh">(m))},
                {{"perm", std::vector<std::int64_t>{0, 2, 1, 3}}});
  return e.op("Transpose", {e.value(get<"kt">(m))},
              {{"perm", std::vector<std::int64_t>{0, 1, 3, 2}}});
}

template <class M>
std::int64_t heads(const graph& g, const M& m, const rewrite::options& opts) {
  if (auto h = facts_of(g).dim_of(get<"q">(m), 1)->constant()) return *h;
  return opts.num_heads;  // only where the model does not say; the guard refuses a contradiction
}

// The ops' default scale is 1/√(head size): where the block's scale is exactly that, the fused
// node leaves the attribute out.
template <class M>
bool default_scale(const graph& g, const M& m) {
  const auto head_size = facts_of(g).dim_of(get<"q">(m), 3)->constant();
  return head_size && scale_of(g, m) == 1.0 / std::sqrt(double(*head_size));
}

template <class M>
void note(const graph& g, const M& m, rewrite::emitter& e, std::int64_t num_heads) {
  e.note("scale", scale_of(g, m));
  e.note("scale_form", has<"q_factor">(m) ? "q and kᵀ pre-scaled" : "scores post-scaled");
  e.note("num_heads", num_heads);
  e.note("casts_removed", int(get<"up">(m) != no_id) + int(get<"down">(m) != no_id));
  e.note("k_layout", has<"k_bnsh">(m)   ? "BNSH"
                     : has<"k_bsnh">(m) ? "BSNH"
                     : has<"k_flat">(m) ? "BNSH via a 3-D transpose"
                                        : "BNHS");
  e.note("dtype", std::string(dtype_name(g.type(get<"q">(m)))));
  e.note("mask", has<"mask">(m) ? "attention bias" : "none");
  e.note("nan_guard", has<"p">(m));
}

// MultiHeadAttention's (B,S,D) output, or Attention's BNSH one; `merge` says which the caller
// wants. Returns the output's name.
template <class M>
std::string attend(const graph& g, const M& m, rewrite::emitter& e, bool merge) {
  const std::int64_t num_heads = heads(g, m, e.options());
  note(g, m, e, num_heads);
  const std::string key = key_bnsh(m, e);
  const std::string value = e.value(get<"v">(m));
  const std::string q = e.value(get<"q">(m));
  const double scale = scale_of(g, m);
  const bool implicit = default_scale(g, m);
  if (e.options().fused_target == rewrite::options::target::onnx) {
    e.note("target", "ai.onnx Attention");
    std::vector<std::string> inputs{q, key, value};
    if (has<"mask">(m)) inputs.push_back(e.value(get<"mask">(m)));
    const std::string y =
        implicit
            ? e.op("Attention", inputs, {{"softmax_precision", dtype::float32}})
            : e.op("Attention", inputs, {{"scale", scale}, {"softmax_precision", dtype::float32}});
    if (!merge) return y;
    const auto bsnh = e.op("Transpose", {y}, {{"perm", std::vector<std::int64_t>{0, 2, 1, 3}}});
    return e.op("Reshape", {bsnh, e.value(g.input(m.root(), 1))});
  }
  e.note("target", "com.microsoft MultiHeadAttention");
  const auto q_bsnh = e.op("Transpose", {q}, {{"perm", std::vector<std::int64_t>{0, 2, 1, 3}}});
  const auto q_bsd = e.op("Reshape", {q_bsnh, e.constant(dtype::int64, {3}, {0, 0, -1})});
  // Inputs 3 and 4 (bias, key padding mask) stay empty; 5 is the attention bias.
  std::vector<std::string> inputs{q_bsd, key, value};
  if (has<"mask">(m)) inputs.insert(inputs.end(), {"", "", e.value(get<"mask">(m))});
  const std::string y =
      implicit ? e.op("MultiHeadAttention", inputs, {{"num_heads", num_heads}}, "com.microsoft")
               : e.op("MultiHeadAttention", inputs, {{"num_heads", num_heads}, {"scale", scale}},
                      "com.microsoft");
  if (merge) return y;
  const auto bsnh =
      e.op("Reshape", {y, e.constant(dtype::int64, {4}, {0, 0, double(num_heads), -1})});
  return e.op("Transpose", {bsnh}, {{"perm", std::vector<std::int64_t>{0, 2, 1, 3}}});
}

}  // namespace dit

struct dit_attention_merged {
  static constexpr std::string_view name = "dit-attention-merged";
  static constexpr int priority = 1;
  // Reshape(Transpose(x)) is every head merge; it is a near miss once the MatMul matched too.
  static constexpr std::size_t near_miss_depth = 3;
  static constexpr auto pattern = dit::merged;
  static bool resembles(const graph& g, node_id n) { return dit::softmax_upstream(g, n); }

  static rewrite::verdict guard(const graph& g, const auto& m, const rewrite::options& opts) {
    if (auto refused = dit::guard(g, m, opts); !refused) return refused;
    // MultiHeadAttention's output is (batch, sequence, heads·head size): the merge must be that.
    const facts& f = facts_of(g);
    const value_id q = get<"q">(m), v = get<"v">(m), merged = g.output(m.root(), 0);
    const sym* d = f.rank(merged) == 3u ? f.dim_of(merged, 0) : nullptr;
    if (d == nullptr || equal(*d, *f.dim_of(q, 0)) != truth::yes ||
        equal(*f.dim_of(merged, 1), *f.dim_of(q, 2)) != truth::yes ||
        equal(*f.dim_of(merged, 2), *f.dim_of(q, 1) * *f.dim_of(v, 3)) != truth::yes)
      return rewrite::verdict::no("the head merge " + f.shape_text(merged) +
                                  " is not proven to be (batch, sequence, heads·head size) of q " +
                                  f.shape_text(q));
    return rewrite::verdict::yes();
  }
  static void emit(const graph& g, const auto& m, rewrite::emitter& e) {
    e.replace_root(dit::attend(g, m, e, true));
  }
};

struct dit_attention {
  static constexpr std::string_view name = "dit-attention";
  static constexpr auto pattern = dit::core;
  static bool resembles(const graph& g, node_id n) { return dit::softmax_upstream(g, n); }

  static rewrite::verdict guard(const graph& g, const auto& m, const rewrite::options& opts) {
    return dit::guard(g, m, opts);
  }
  static void emit(const graph& g, const auto& m, rewrite::emitter& e) {
    e.replace_root(dit::attend(g, m, e, false));
  }
};

}  // namespace fusekit::rules
