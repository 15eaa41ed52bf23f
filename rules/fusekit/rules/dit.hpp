// Scaled dot-product attention as torch's exporters write it, for diffusion transformers (F5-TTS,
// SD3, Flux) and decoders (GPT-2, LLaMA, Qwen2) alike.
//
//   before                                          after, target ort
//   q ─────────────── [× √s] ┐                      q ─ Transpose(0,2,1,3) ─ Reshape(B,S,D) ─┐
//   [repeat_kv] kᵀ ── [× √s] MatMul                 k (BNSH, heads repeated) ─────────────────┤
//                              │ [Cast → f32]       v (BNSH, heads repeated) ─────────────────┤
//                            [Mul | Div (scalar)]   bias: mask [+ Where(keep, 0, fill)] ──────┤
//                            [Where(keep, ·, fill)]                com.microsoft.MultiHeadAttention
//                            [+ mask]                                (num_heads, scale) → (B,S,D)
//                            Softmax (last axis)
//                            [Where(IsNaN(p), 0, p)]  after, target onnx (opset ≥ 23)
//                              │ [Cast]             Attention(q, k, v, bias; scale) on BNSH
//                              tensors,
//   [repeat_kv] v ────────── MatMul                 k and v with their own (grouped) heads
//                            [Transpose(0,2,1,3)
//                             → Reshape(B,S,D)]     NaN guard: output rows the bias hides entirely
//                                                   are zeroed, as the guard zeroes them
//   a mask that is causality alone (Trilu, a constant lower triangle) and as many queries as
//   keys: no bias; MultiHeadAttention unidirectional, Attention is_causal
//   grouped heads, target ort, causal (that mask, or one query): GroupQueryAttention on the
//   grouped k and v, (B,S,D) each
//
//   decode step: k = Concat(past_k, new_k) ─┬─ present_k (graph output)
//                                           └─ kᵀ …     → the op reads new_k and past_k and writes
//                (v alike)                                present_k (and v's) itself
//
// Two rules share the pattern: dit-attention-merged also absorbs the trailing head merge
// (Transpose + Reshape to (B,S,D)), which MultiHeadAttention's 3-D output makes free; it runs
// first, and dit-attention takes the blocks without one. What the fused ops accept is their
// contract's, in fused_ops.hpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "causal.hpp"
#include "fused_ops.hpp"
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

// Heads in the batch axis: attention written with bmm (Bloom's baddbmm; older transformers' eager
// BART, Whisper, OPT, CLIP) merges q, k and v from BNSH to [B·N, S, H], multiplies in 3-D, and may
// split the scores back to [B, N, S, L] around the mask and merge them again. A Reshape that only
// merges the two leading dims of a 4-D tensor, or only splits the first of a 3-D one, keeps every
// element where row-major order puts it; that each regroups q's own batch and heads is the
// guard's to prove (heads_in_batch_refused).
inline bool merges_leading_dims(const facts& f, value_id four, value_id three) {
  return f.rank(four) == 4u && f.rank(three) == 3u &&
         equal(*f.dim_of(three, 0), *f.dim_of(four, 0) * *f.dim_of(four, 1)) == truth::yes &&
         f.same_dim(three, 1, four, 2) == truth::yes && f.same_dim(three, 2, four, 3) == truth::yes;
}
inline bool merges_batch_and_heads(const graph& g, node_id reshape) {
  return merges_leading_dims(facts_of(g), g.input(reshape, 0), g.output(reshape, 0));
}
inline bool splits_batch_and_heads(const graph& g, node_id reshape) {
  return merges_leading_dims(facts_of(g), g.output(reshape, 0), g.input(reshape, 0));
}
template <fixed_string View, class P>
constexpr auto heads_merged(P p) {
  return op<"Reshape">(p, any())
      .where("batch and heads merged into one axis", merges_batch_and_heads)
      .template bind<View>();
}
template <fixed_string View, class P>
constexpr auto heads_split(P p) {
  return op<"Reshape">(p, any())
      .where("the first axis split into batch and heads", splits_batch_and_heads)
      .template bind<View>();
}

// q, k and v as the fused op reads them, BNSH. With heads in the batch axis the MatMuls read their
// merges [B·N, L, H]. q's Reshape always stays out of the match, k's and v's where the match
// could not take them: a view to read through, whose output keeps dims a Shape outside may still
// read (q's are the block's 3-D output's; Bloom reads kᵀ's).
inline node_id merge_of(const graph& g, value_id x) {
  const node_id p = g.producer(x);
  if (p == no_id || !g.domain(p).empty() || g.op_type(p) != "Reshape" ||
      !merges_batch_and_heads(g, p))
    return no_id;
  return p;
}
inline value_id unmerged(const graph& g, value_id x) {
  const node_id merge = merge_of(g, x);
  return merge == no_id ? x : g.input(merge, 0);
}
// transformers 5 outside dynamo folds a decode step's query heads into the query axis, a row of
// them per key/value head: q [B, N, 1, H] → Reshape [B, Nkv, G, H], multiplied with k and v of
// Nkv heads, and the product unfolded back. With one query that Reshape keeps every element
// where row-major order puts it, query head n at (n / G, n % G): the products are grouped
// attention of q [B, N, 1, H], query head n reading key/value head n / G, as the fused ops'
// grouped heads do (that the Reshape's Nkv is k's and v's is the guard's to prove). q is read
// through it, as through a merge.
inline bool packs_query_heads(const graph& g, node_id reshape) {
  const facts& f = facts_of(g);
  const value_id x = g.input(reshape, 0), y = g.output(reshape, 0);
  return f.rank(x) == 4u && f.rank(y) == 4u && f.dim_of(x, 2)->is_constant(1) &&
         !f.dim_of(y, 2)->is_constant(1) && f.same_dim(x, 0, y, 0) == truth::yes &&
         f.same_dim(x, 3, y, 3) == truth::yes &&
         equal(*f.dim_of(x, 1), *f.dim_of(y, 1) * *f.dim_of(y, 2)) == truth::yes;
}
inline node_id packing_of(const graph& g, value_id x) {
  const node_id p = g.producer(x);
  if (p == no_id || !g.domain(p).empty() || g.op_type(p) != "Reshape" || !packs_query_heads(g, p))
    return no_id;
  return p;
}
template <class M>
bool packed(const graph& g, const M& m) {
  return packing_of(g, get<"q">(m)) != no_id;
}
template <class M>
value_id query(const graph& g, const M& m) {
  const value_id q = get<"q">(m);
  const node_id packing = packing_of(g, q);
  return packing != no_id ? g.input(packing, 0) : unmerged(g, q);
}
// Folded query heads pair with k and v as the model holds them, the grouped heads the fused ops
// read; so do repeat_kv's sources. no_id where the match holds no such value.
template <class M>
value_id grouped_keys(const graph& g, const M& m) {
  if (has<"k_grouped">(m)) return get<"k_grouped">(m);
  return packed(g, m) && has<"k_bnsh">(m) ? get<"k_bnsh">(m) : no_id;
}
template <class M>
value_id grouped_values(const graph& g, const M& m) {
  if (has<"v_grouped">(m)) return get<"v_grouped">(m);
  return packed(g, m) ? get<"v">(m) : no_id;
}
template <class M>
value_id values(const graph& g, const M& m) {
  return unmerged(g, get<"v">(m));
}
template <class M>
bool heads_in_batch(const graph& g, const M& m) {
  return merge_of(g, get<"q">(m)) != no_id;
}

// transformers' repeat_kv: Unsqueeze(2) → Expand(B, Nkv, r, L, H) → Reshape(B, Nkv·r, L, H), every
// key/value head repeated r times in a row. Attention-23 does that itself for grouped heads and
// reads the grouped tensor; MultiHeadAttention reads the repeated one.
inline bool repeats_heads_in_a_row(const graph& g, node_id reshape) {
  const facts& f = facts_of(g);
  const node_id expand = g.producer(g.input(reshape, 0));
  const node_id unsqueeze = expand == no_id ? no_id : g.producer(g.input(expand, 0));
  if (unsqueeze == no_id) return false;
  const value_id x = g.input(unsqueeze, 0), u = g.output(unsqueeze, 0), e = g.output(expand, 0),
                 y = g.output(reshape, 0);
  if (f.rank(x) != 4u || f.rank(u) != 5u || f.rank(e) != 5u || f.rank(y) != 4u) return false;
  auto same = [&](value_id a, int i, value_id b, int j) {
    return f.same_dim(a, i, b, j) == truth::yes;
  };
  const sym* repeats = f.dim_of(e, 2);
  return f.dim_of(u, 2)->is_constant(1) && same(u, 0, x, 0) && same(u, 1, x, 1) &&
         same(u, 3, x, 2) && same(u, 4, x, 3) && same(e, 0, x, 0) && same(e, 1, x, 1) &&
         same(e, 3, x, 2) && same(e, 4, x, 3) && same(y, 0, x, 0) && same(y, 2, x, 2) &&
         same(y, 3, x, 3) && equal(*f.dim_of(y, 1), *f.dim_of(x, 1) * *repeats) == truth::yes;
}
template <fixed_string Grouped, class Source>
constexpr auto repeated(Source source) {
  return op<"Reshape">(op<"Expand">(op<"Unsqueeze">(capture<Grouped>(source), maybe(any())), any()),
                       any())
      .where("each key/value head repeated in a row", repeats_heads_in_a_row);
}

// A decoder step's cache: present = Concat(past, new) along the sequence axis of BNSH, a graph
// output besides what attention reads. Both fused ops take past and new apart and write present
// themselves; where the emit cannot move the cache into the op, the Concat stays as it is.
inline bool along_sequence(const graph& g, node_id concat) {
  const auto axis = g.attribute_int(concat, "axis");
  return facts_of(g).rank(g.output(concat, 0)) == 4u && axis && (*axis == 2 || *axis == -2);
}
template <fixed_string Past, fixed_string New, fixed_string Cache>
inline constexpr auto cached_or_not = any_of(op<"Concat">(capture<Past>, capture<New>)
                                                 .where("concatenated along the sequence axis",
                                                        along_sequence)
                                                 .multi_use()
                                                 .template bind<Cache>(),
                                             any());
inline constexpr auto k_source = cached_or_not<"k_past", "k_new", "k_cache">;
inline constexpr auto v_source = cached_or_not<"v_past", "v_new", "v_cache">;
// Kᵀ as BNHS: transposed from BNSH or BSNH here, through the proven detour, or any other
// [B, N, H, L] tensor as given (then transposed back on emit).
inline constexpr auto k_detour =
    op<"Reshape">(op<"Transpose">(op<"Reshape">(capture<"k_flat">(any_of(
                                                    repeated<"k_grouped">(k_source), k_source)),
                                                any()))
                      .attr<"perm">(ints(0, 2, 1)),
                  any())
        .where("k's last two dims transposed", detour_is_a_transpose);

// The dynamo exporter also merges repeat_kv's Reshape into that detour: Unsqueeze(2) →
// Expand(B, Nkv, r, L, H) → Reshape(B·Nkv·r, L, H) → Transpose(0,2,1) → Reshape(B, Nkv·r, H, L)
// is kᵀ of the repeated heads exactly when each step keeps what the next one regroups.
inline bool repeated_detour_is_a_transpose(const graph& g, node_id outer) {
  const facts& f = facts_of(g);
  const node_id turn = g.producer(g.input(outer, 0));
  const node_id merge = turn == no_id ? no_id : g.producer(g.input(turn, 0));
  const node_id expand = merge == no_id ? no_id : g.producer(g.input(merge, 0));
  const node_id unsqueeze = expand == no_id ? no_id : g.producer(g.input(expand, 0));
  if (unsqueeze == no_id) return false;
  const value_id x = g.input(unsqueeze, 0), u = g.output(unsqueeze, 0), e = g.output(expand, 0),
                 flat = g.output(merge, 0), kt = g.output(outer, 0);
  if (f.rank(x) != 4u || f.rank(u) != 5u || f.rank(e) != 5u || f.rank(flat) != 3u ||
      f.rank(kt) != 4u)
    return false;
  auto same = [&](value_id a, int i, value_id b, int j) {
    return f.same_dim(a, i, b, j) == truth::yes;
  };
  const sym &b = *f.dim_of(x, 0), &heads = *f.dim_of(x, 1), &repeats = *f.dim_of(e, 2);
  return f.dim_of(u, 2)->is_constant(1) && same(u, 0, x, 0) && same(u, 1, x, 1) &&
         same(u, 3, x, 2) && same(u, 4, x, 3) && same(e, 0, x, 0) && same(e, 1, x, 1) &&
         same(e, 3, x, 2) && same(e, 4, x, 3) &&
         equal(*f.dim_of(flat, 0), b * heads * repeats) == truth::yes && same(flat, 1, x, 2) &&
         same(flat, 2, x, 3) && same(kt, 0, x, 0) &&
         equal(*f.dim_of(kt, 1), heads * repeats) == truth::yes && same(kt, 2, x, 3) &&
         same(kt, 3, x, 2);
}
inline constexpr auto k_detour_repeated =
    op<"Reshape">(
        op<"Transpose">(
            op<"Reshape">(
                op<"Expand">(op<"Unsqueeze">(capture<"k_grouped">(k_source), maybe(any())), any()),
                any()))
            .attr<"perm">(ints(0, 2, 1)),
        any())
        .where("each key/value head repeated in a row, then k's last two dims transposed",
               repeated_detour_is_a_transpose);

inline constexpr auto k_transposed = any_of(
    op<"Transpose">(
        any_of(capture<"k_bnsh">(repeated<"k_grouped">(k_source)), capture<"k_bnsh">(k_source)))
        .attr<"perm">(ints(0, 1, 3, 2)),
    op<"Transpose">(capture<"k_bsnh">).attr<"perm">(ints(0, 2, 3, 1)), k_detour, k_detour_repeated,
    op<"Transpose">(heads_merged<"k_view">(capture<"k_bnsh">(k_source)))
        .attr<"perm">(ints(0, 2, 1)),
    op<"Transpose">(capture<"k_merged">).attr<"perm">(ints(0, 2, 1)), capture<"kt">);

// A scale factor the facts fold to one number: a constant, or computed from q's shape at run
// time as torch's SDPA decomposition does (Shape → Slice → Cast → Sqrt → Div → Sqrt). A tensor of
// several elements is not one; one whose value the facts do not reach is not proven one.
inline constexpr auto folded_scalar = [](const facts& f, value_id v) {
  if (f.real_scalar(v)) return truth::yes;
  const shape_fact& s = f.shape(v);
  if (!s.known) return truth::unknown;
  for (const sym& d : s.dims)
    if (const auto k = d.constant(); k && *k != 1) return truth::no;
  return truth::unknown;
};

// The scale is what the block applies, wherever it does: a factor on q (OPT and Whisper scale q
// before calling SDPA with scale 1), on kᵀ, on both (torch's SDPA decomposition: q·√s and kᵀ·√s),
// on the scores (hand-written F5-TTS exporters: MatMul(q, kᵀ) → [Cast] → Mul|Div), or none at all
// (T5; a block whose scale an earlier projection applied). The fused op's scale is their product,
// and 1 where there is none. Each factor is a constant or folded by the facts (GPT-2's TorchScript
// export divides by ConstantOfShape([]) + Pow(8, 0.5); torch's decomposition computes √s from q's
// shape at run time).
inline constexpr auto q_side = any_of(
    commutative(op<"Mul">(
        capture<"q">, capture<"q_factor">.proven_value("a scalar of known value", folded_scalar))),
    capture<"q">);
inline constexpr auto k_side = any_of(
    commutative(op<"Mul">(
        k_transposed, capture<"k_factor">.proven_value("a scalar of known value", folded_scalar))),
    k_transposed);
inline constexpr auto scores = op<"MatMul">(q_side, k_side).bind<"scores">();
// torch's decomposition in float16 may compute the softmax in float32: a Cast after the MatMul.
inline constexpr auto widened = optional<"Cast">(scores).bind<"up">();
inline constexpr auto logits = any_of(
    commutative(op<"Mul">(widened, constant_scalar<"scale">)),
    op<"Div">(widened, constant_scalar<"divisor">),
    commutative(op<"Mul">(
        widened, capture<"scale_folded">.proven_value("a scalar of known value", folded_scalar))),
    op<"Div">(widened,
              capture<"divisor_folded">.proven_value("a scalar of known value", folded_scalar)),
    widened);
// Gemma 2's logit soft-capping, tanh(s / c) · c on the scaled scores before the mask: matched so
// that the refusal can say what the block does, which neither fused op computes as the model does.
inline constexpr auto soft_capped =
    commutative(op<"Mul">(op<"Tanh">(any_of(
                              op<"Div">(logits, capture<"cap">.proven_value(
                                                    "a scalar of known value", folded_scalar)),
                              commutative(op<"Mul">(logits, capture<"cap_inverse">)))),
                          capture<"cap_out">))
        .bind<"softcap">();
inline constexpr auto scored = any_of(logits, soft_capped);
// What exporters add to the scores: a bias before the mask (Bloom's ALiBi, added by baddbmm to
// the 3-D scores), then the mask: an additive one (Where(bool, 0, −inf|finfo.min) or a model
// input), or a select as GPT-2's eager attention writes it (Where(causal, scores, finfo.min), then
// maybe the padding mask added). Their sum is the fused ops' attention bias when its shape is one
// they take; one added to the 3-D scores is regrouped to [B, N, …] on emit.
inline constexpr auto biased =
    optional_op(commutative(op<"Add">(scored, capture<"bias">)).bind<"biased">());
inline constexpr auto viewed = optional_op(heads_split<"scores_view">(biased));
inline constexpr auto selected = any_of(
    op<"Where">(capture<"keep">, transparent(viewed), constant_scalar<"fill">).bind<"select">(),
    op<"Where">(capture<"hide">, constant_scalar<"fill">, transparent(viewed)).bind<"select">());
inline constexpr auto masked = optional_op(
    commutative(op<"Add">(any_of(selected, viewed), capture<"mask">)).bind<"mask_add">());
inline constexpr auto softmax =
    op<"Softmax">(transparent(optional_op(heads_merged<"masked_view">(masked))))
        .attr<"axis">(last_axis)
        .bind<"softmax">();
// torch's SDPA decomposition zeroes the rows a mask hides entirely: Where(IsNaN(p), 0, p).
inline constexpr auto guarded =
    any_of(op<"Where">(op<"IsNaN">(capture<"p">(softmax)), constant_scalar<"nan_fill">.value(0.0),
                       capture<"p">),
           softmax);
// Eager decoders cast after Softmax to the type it already has, sometimes twice: no-ops skipped.
inline constexpr auto probs = optional<"Cast">(transparent(guarded)).bind<"down">();
inline constexpr auto core =
    op<"MatMul">(optional_op(heads_merged<"probs_view">(probs)),
                 any_of(heads_merged<"v_view">(capture<"v">(v_source)),
                        capture<"v">(repeated<"v_grouped">(v_source)), capture<"v">(v_source)))
        .bind<"pv">();
inline constexpr auto merged = op<"Reshape">(
    op<"Transpose">(optional_op(heads_split<"out_view">(core))).attr<"perm">(ints(0, 2, 1, 3)),
    any());

// The scale the block applies to QKᵀ: the product of its factors on q, kᵀ and the scores.
template <class M>
double scale_of(const graph& g, const M& m) {
  const facts& f = facts_of(g);
  double scale = 1.0;
  if (has<"q_factor">(m)) scale *= *f.real_scalar(get<"q_factor">(m));
  if (has<"k_factor">(m)) scale *= *f.real_scalar(get<"k_factor">(m));
  if (has<"scale">(m)) scale *= get<"scale">(m);
  if (has<"divisor">(m)) scale /= get<"divisor">(m);
  if (has<"scale_folded">(m)) scale *= *f.real_scalar(get<"scale_folded">(m));
  if (has<"divisor_folded">(m)) scale /= *f.real_scalar(get<"divisor_folded">(m));
  return scale;
}

// Where the block applies its scale, for the report: "on q and kᵀ", "on the scores", "none".
template <class M>
std::string scale_form(const M& m) {
  std::vector<const char*> on;
  if (has<"q_factor">(m)) on.push_back("q");
  if (has<"k_factor">(m)) on.push_back("kᵀ");
  if (has<"scale">(m) || has<"divisor">(m) || has<"scale_folded">(m) || has<"divisor_folded">(m))
    on.push_back("the scores");
  if (on.empty()) return "none";
  std::string out = "on";
  for (std::size_t i = 0; i < on.size(); ++i)
    out += std::string(i == 0 ? " " : i + 1 == on.size() ? " and " : ", ") + on[i];
  return out;
}

// kᵀ as the QKᵀ MatMul reads it.
template <class M>
value_id key_transposed(const graph& g, const M& m) {
  const node_id scores = get<"scores">(m);
  if (has<"k_factor">(m)) {
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

// Whether a MatMul within a few nodes upstream of x computes it (QKᵀ, in whatever form).
inline bool computed_from_a_product(const graph& g, value_id x, int depth = 6) {
  const node_id p = g.producer(x);
  if (p == no_id || depth == 0 || !g.domain(p).empty()) return false;
  if (g.op_type(p) == "MatMul") return true;
  for (value_id in : g.inputs(p))
    if (in != no_id && computed_from_a_product(g, in, depth - 1)) return true;
  return false;
}

// The Softmax whose output a MatMul reads as its first input through ops that keep its values (a
// Reshape, a Cast, the NaN guard's Where, an identity at inference), or no_id: where this rule's
// core begins, and so where a failed match may be a near miss.
inline node_id softmax_read_by(const graph& g, node_id n) {
  if (g.op_type(n) != "MatMul" || !g.domain(n).empty()) return no_id;
  node_id p = g.producer(g.input(n, 0));
  for (int step = 0; step < 5 && p != no_id && g.domain(p).empty(); ++step) {
    const std::string_view op = g.op_type(p);
    if (op == "Softmax") return p;
    if (op != "Reshape" && op != "Cast" && op != "Where" && op != "Identity" && op != "Dropout")
      return no_id;
    p = g.producer(g.input(p, op == "Where" ? 2 : 0));
  }
  return no_id;
}

// The ·V MatMul of an attention block, however the rest is spelled: it reads a Softmax of scores
// a MatMul computed. Such a block is never missed silently.
inline bool reads_attention_probabilities(const graph& g, node_id n) {
  const node_id softmax = softmax_read_by(g, n);
  return softmax != no_id && computed_from_a_product(g, g.input(softmax, 0));
}

// A select's fill added to the scores instead gives the same softmax where the sum is the fill
// again: −inf in any type; in float32 or bfloat16, a fill at most half the lowest float32 (torch's
// finfo.min) absorbs any score below 2^100 in magnitude. float16's finfo.min absorbs only scores
// below 16, so there only −inf is taken.
inline bool fill_absorbs_scores(double fill, dtype t) {
  if (fill == -std::numeric_limits<double>::infinity()) return true;
  return (t == dtype::float32 || t == dtype::bfloat16) &&
         fill <= 0.5 * double(std::numeric_limits<float>::lowest());
}

// Why the block's mask is not causality alone ("" when it is). Then the op hides the keys after
// each query itself and the mask's computation goes where nothing else reads it. Both ops put the
// diagonal top-left, as the mask does, and so does a decoder's bottom-right one when queries and
// keys are as many. A fill that absorbs the scores hides as −inf does in every row that keeps a
// key, and every causal row keeps its own.
template <class M>
std::string not_causal_because(const graph& g, const M& m) {
  using causal::side;
  if (has<"bias">(m)) return "the scores have a bias besides the mask";
  if (has<"select">(m) && has<"mask">(m)) return "a select and an added mask, summed";
  const facts& f = facts_of(g);
  const value_id q = query(g, m), v = values(g, m);
  if (f.rank(q) != 4u || f.rank(v) != 4u) return "q and v are not proven 4-D";
  const sym &s = *f.dim_of(q, 2), &l = *f.dim_of(v, 2);
  std::string refused;
  if (has<"select">(m)) {
    refused = has<"keep">(m) ? causal::not_triangular(g, get<"keep">(m), side::keep, s, l)
                             : causal::not_triangular(g, get<"hide">(m), side::hide, s, l);
  } else {
    value_id mask = get<"mask">(m);
    node_id p = g.producer(mask);
    for (; p != no_id && g.domain(p).empty() && g.op_type(p) == "Expand"; p = g.producer(mask))
      mask = g.input(p, 0);
    if (p == no_id || !g.domain(p).empty() || g.op_type(p) != "Where")
      return "the mask '" + std::string(g.name(mask)) + "' " + causal::origin(g, mask) +
             ", not Where(causal, 0, fill)";
    const auto shown = causal::uniform_value(g, g.input(p, 1)),
               other = causal::uniform_value(g, g.input(p, 2));
    const bool hide = other == 0.0 && shown.has_value();
    if (!hide && !(shown == 0.0 && other.has_value()))
      return g.describe(p) + " does not choose between 0 and one fill";
    const double fill = hide ? *shown : *other;
    if (!fill_absorbs_scores(fill, g.type(q)))
      return "the mask fills with " + pattern::number_text(fill) + ", which hides less than −inf";
    refused = causal::not_triangular(g, g.input(p, 0), hide ? side::hide : side::keep, s, l);
  }
  if (!refused.empty()) return refused;
  if (equal(s, l) != truth::yes)
    return "the query length " + f.text(s) + " and key length " + f.text(l) +
           " are not proven equal, where causality's diagonal is the same top-left and "
           "bottom-right";
  return {};
}

template <class M>
bool causal_alone(const graph& g, const M& m) {
  return (has<"select">(m) || has<"mask">(m)) && not_causal_because(g, m).empty();
}

// One term of what the block adds to the scaled scores: the parts broadcast together (a select's
// condition and fill, or one value) and the node that adds it (an Add, or the select's Where).
struct bias_term {
  std::vector<value_id> parts;
  node_id added_by = no_id;
};

// The block's terms: a select (as Where(keep, 0, fill)), a bias before the mask, the mask.
template <class M>
std::vector<bias_term> bias_terms(const graph& g, const M& m) {
  std::vector<bias_term> out;
  if (has<"select">(m)) {
    const node_id select = get<"select">(m);
    out.push_back({{g.input(select, 0), g.input(select, has<"keep">(m) ? 2 : 1)}, select});
  }
  if (has<"bias">(m)) out.push_back({{get<"bias">(m)}, get<"biased">(m)});
  if (has<"mask">(m)) out.push_back({{get<"mask">(m)}, get<"mask_add">(m)});
  return out;
}

// A term's dims, broadcast from its parts; empty where they are not proven.
inline std::optional<std::vector<sym>> term_dims(const facts& f, const bias_term& t) {
  std::optional<std::vector<sym>> dims{std::vector<sym>{}};
  for (value_id part : t.parts)
    if (f.rank(part) && dims)
      dims = fused::broadcast(*dims, f.shape(part).dims);
    else
      dims.reset();
  return dims;
}

// A term added to the 3-D scores of heads in the batch axis [B·N, S, L] with a leading dim of its
// own: the fused op reads it regrouped as the scores are, [B, N, …] (or [1, 1, …]). One of lower
// rank broadcasts from the right the same way in 3-D and in 4-D.
// `dims` are the term's (term_dims).
inline bool regrouped(const graph& g, const bias_term& t,
                      const std::optional<std::vector<sym>>& dims) {
  return facts_of(g).rank(g.output(t.added_by, 0)) == 3u && dims && dims->size() == 3;
}

// A regrouped term's dims: its leading dim must be 1 or q's batch·heads.
inline std::optional<std::vector<sym>> regrouped_dims(const facts& f, std::vector<sym> d,
                                                      value_id q) {
  const sym &b = *f.dim_of(q, 0), &n = *f.dim_of(q, 1);
  if (d[0].is_constant(1)) return std::vector<sym>{sym::constant(1), sym::constant(1), d[1], d[2]};
  if (equal(d[0], b * n) == truth::yes) return std::vector<sym>{b, n, d[1], d[2]};
  return std::nullopt;
}

// What the block adds to the scaled scores, as the fused ops' bias: the sum of its terms; none
// where it is `causal` alone, which the op applies itself.
template <class M>
fused::attention_call call_of(const graph& g, const M& m, bool causal) {
  const facts& f = facts_of(g);
  fused::attention_call c{
      .q = query(g, m), .kt = key_transposed(g, m), .v = values(g, m), .scale = scale_of(g, m)};
  if (has<"k_view">(m)) c.kt = get<"k_bnsh">(m), c.key_axis = 2;
  if (has<"k_merged">(m)) c.kt = unmerged(g, get<"k_merged">(m)), c.key_axis = 2;
  c.heads_paired = packed(g, m);
  const std::vector<bias_term> terms = bias_terms(g, m);
  if (terms.empty() || causal) return c;
  c.has_bias = true;
  c.bias_type = g.type(c.q);
  // The ·V MatMul reads as many probabilities per query as v has keys, so the model runs only
  // where each term's key axis broadcasts to v's key length: one the facts do not prove that
  // length is 1 or equal to it at run time, and expanding the sum there is what the Adds did.
  // Where the scores Softmax reads are proven to have q's rows, each term's query axis is 1 or
  // that length where the model runs (GPT-2's causal mask sliced to Min(n_positions, S) rows),
  // and is expanded the same way; so is a query axis of 1 where q's length is not proven 1 (a
  // mask of one row for every query: the ops broadcast only its batch and heads).
  const sym* keys = f.rank(c.v) == 4u ? f.dim_of(c.v, 2) : nullptr;
  const value_id x = g.input(get<"softmax">(m), 0);
  const sym* rows = f.rank(c.q) == 4u && f.rank(x) && *f.rank(x) >= 2u &&
                            f.same_dim(x, int(*f.rank(x)) - 2, c.q, 2) == truth::yes
                        ? f.dim_of(c.q, 2)
                        : nullptr;
  const auto spans = [](std::vector<sym>& d, std::size_t from_end, const sym* length,
                         bool one_too) {
    if (d.size() < from_end || length == nullptr) return false;
    sym& own = d[d.size() - from_end];
    if ((own.is_constant(1) && (!one_too || length->is_constant(1))) ||
        equal(own, *length) == truth::yes)
      return false;
    own = *length;
    return true;
  };
  std::optional<std::vector<sym>> dims{std::vector<sym>{}};
  for (const bias_term& t : terms) {
    if (t.parts.size() == 1 && g.type(t.parts[0]) != g.type(c.q)) c.bias_type = g.type(t.parts[0]);
    auto own = term_dims(f, t);
    if (regrouped(g, t, own) && f.rank(c.q) == 4u) own = regrouped_dims(f, *own, c.q);
    if (own && spans(*own, 1, keys, false)) c.bias_expanded_over_keys = true;
    if (own && spans(*own, 2, rows, true)) c.bias_expanded_over_queries = true;
    dims = own && dims ? fused::broadcast(*dims, *own) : std::nullopt;
    for (value_id part : t.parts)
      c.bias_text += (c.bias_text.empty() ? "" : " + ") + f.shape_text(part);
  }
  if (dims && !dims->empty() && keys && equal(dims->back(), *keys) != truth::yes) {
    if (dims->size() < 4) dims->insert(dims->begin(), 4 - dims->size(), sym::constant(1));
    dims->back() = *keys;
    c.bias_expanded_over_keys = true;
  }
  c.bias_dims = std::move(dims);
  return c;
}

// Heads in the batch axis: the 3-D products are the 4-D ones exactly when each MatMul multiplies
// operands of one rank (q with k, the probabilities with v, each merged from BNSH or not), and
// every regrouping of the scores, probabilities and output splits or merges q's own batch and heads
// (the pattern proved that each regroups two leading dims; which two is proven here).
template <class M>
rewrite::verdict heads_in_batch_refused(const graph& g, const M& m,
                                        std::initializer_list<node_id> more_views = {}) {
  using rewrite::verdict;
  const facts& f = facts_of(g);
  std::vector<node_id> views(more_views);
  if (has<"k_view">(m)) views.push_back(get<"k_view">(m));
  if (has<"v_view">(m)) views.push_back(get<"v_view">(m));
  for (const value_id read : {get<"q">(m), get<"v">(m)})
    if (const node_id merge = merge_of(g, read); merge != no_id) views.push_back(merge);
  if (has<"k_merged">(m))
    if (const node_id merge = merge_of(g, get<"k_merged">(m)); merge != no_id)
      views.push_back(merge);
  if (has<"scores_view">(m)) views.push_back(get<"scores_view">(m));
  if (has<"masked_view">(m)) views.push_back(get<"masked_view">(m));
  if (has<"probs_view">(m)) views.push_back(get<"probs_view">(m));
  if (views.empty()) return verdict::yes();
  for (const node_id product : {get<"scores">(m), get<"pv">(m)})
    if (f.rank(g.input(product, 0)) != f.rank(g.input(product, 1)))
      return verdict::no(g.describe(product) + " multiplies " + f.shape_text(g.input(product, 0)) +
                         " by " + f.shape_text(g.input(product, 1)) + ", of another rank");
  const value_id q = query(g, m);
  for (node_id view : views) {
    const value_id four = f.rank(g.input(view, 0)) == 4u ? g.input(view, 0) : g.output(view, 0);
    if (f.same_dim(four, 0, q, 0) != truth::yes || f.same_dim(four, 1, q, 1) != truth::yes)
      return verdict::no(g.describe(view) + " regroups " + f.shape_text(four) +
                         ", not proven to be the batch and heads of q " + f.shape_text(q));
  }
  return verdict::yes();
}

// Query heads folded into the query axis: the products are grouped attention where the fold's
// rows are k's and v's own heads (MatMul broadcasts heads, so [B, 1, G, H] against Nkv heads would
// be every query head against every key/value head) and every term added to the folded scores is
// one for all its heads and rows, as a single query's mask is.
template <class M>
rewrite::verdict packed_refused(const graph& g, const M& m) {
  using rewrite::verdict;
  if (!packed(g, m)) return verdict::yes();
  const facts& f = facts_of(g);
  const value_id folded = get<"q">(m), kt = key_transposed(g, m), v = values(g, m);
  if (f.rank(kt) != 4u || f.rank(v) != 4u || f.same_dim(folded, 1, kt, 1) != truth::yes ||
      f.same_dim(folded, 1, v, 1) != truth::yes)
    return verdict::no("q's heads are folded into its query axis as " + f.shape_text(folded) +
                       ", whose rows are not proven to be the key/value heads of kᵀ " +
                       f.shape_text(kt) + " and v " + f.shape_text(v));
  for (const bias_term& t : bias_terms(g, m)) {
    const auto dims = term_dims(f, t);
    const std::size_t r = dims ? dims->size() : 0;
    const bool one_for_all = dims && (r < 2 || (*dims)[r - 2].is_constant(1)) &&
                             (r < 3 || (*dims)[r - 3].is_constant(1));
    if (!one_for_all)
      return verdict::no("q's heads are folded into its query axis, and " +
                         g.describe(t.added_by) + " adds " +
                         (dims ? fused::dims_text(f, *dims) : std::string("a term of unproven dims")) +
                         ", not one row for all heads");
  }
  return verdict::yes();
}

// Why a soft-capped block stays as it is. MultiHeadAttention has no cap. Attention-23 has
// `softcap`, but where it applies relative to the mask changed: ONNX Runtime 1.23 caps after
// adding the mask (−inf becomes −c, and hidden keys get weight), later versions and the ONNX
// reference before it, as the model does; the fused model's meaning would depend on the runtime.
template <class M>
rewrite::verdict soft_capping_refused(const graph& g, const M& m, const attention_options& o) {
  const facts& f = facts_of(g);
  const auto cap = f.real_scalar(get<"cap_out">(m));
  const std::string c = cap ? pattern::number_text(*cap) : "c";
  const std::string what = "the scores are soft-capped before Softmax (tanh(s / " + c + ") · " + c +
                           ", Gemma 2's attention logit soft-capping): ";
  if (o.fused_target == fused::target::ort)
    return rewrite::verdict::no(what + "MultiHeadAttention has no soft-capping");
  return rewrite::verdict::no(what +
                              "Attention-23's softcap is applied after the mask by ONNX Runtime "
                              "1.23 and before it by later versions, so the fused model's "
                              "outputs would depend on the runtime");
}

// The checks across captures that a pattern cannot express; what the fused op itself needs is
// its contract's (fused::admits).
template <class M>
rewrite::verdict guard(const graph& g, const M& m, const attention_options& opts) {
  using rewrite::verdict;
  if (has<"softcap">(m)) return soft_capping_refused(g, m, opts);
  if (auto refused = heads_in_batch_refused(g, m); !refused) return refused;
  if (auto refused = packed_refused(g, m); !refused) return refused;
  const value_id q = query(g, m);
  const dtype t = g.type(q);
  const fused::attention_call c = call_of(g, m, causal_alone(g, m));
  if (auto refused = fused::admits(g, c, opts); !refused) return refused;
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
  const facts& f = facts_of(g);
  if (has<"select">(m) && !fill_absorbs_scores(get<"fill">(m), t))
    return verdict::no("the select fills masked scores with " +
                       pattern::number_text(get<"fill">(m)) + ", neither −inf nor " +
                       (t == dtype::float16 ? std::string("(float16) anything else")
                                            : std::string("at most half the lowest float32")) +
                       "; added as a bias it would not give the same softmax");
  // A scale, fill or mask of higher rank broadcasts the scores up: Softmax must see QKᵀ's shape,
  // or with heads in the batch axis [batch·heads, sequence, key length]. Their key axis is v's key
  // length wherever the model runs: the ·V MatMul reads it so.
  const value_id x = g.input(get<"softmax">(m), 0);
  const bool four = f.rank(x) == 4u;
  // Folded query heads: the scores have the fold's rows.
  const value_id qk = packed(g, m) ? get<"q">(m) : q;
  const bool rows =
      four ? f.same_dim(x, 0, qk, 0) == truth::yes && f.same_dim(x, 1, qk, 1) == truth::yes &&
                 f.same_dim(x, 2, qk, 2) == truth::yes
           : f.rank(x) == 3u && heads_in_batch(g, m) &&
                 equal(*f.dim_of(x, 0), *f.dim_of(q, 0) * *f.dim_of(q, 1)) == truth::yes &&
                 f.same_dim(x, 1, q, 2) == truth::yes;
  const int last = four ? 3 : 2;
  const bool keys = f.same_dim(x, last, c.kt, c.key_axis) == truth::yes ||
                    f.same_dim(c.v, 2, c.kt, c.key_axis) == truth::yes;
  if (!rows || !keys)
    return verdict::no("the scores Softmax reads " + f.shape_text(x) +
                       " are not proven to have QKᵀ's shape [batch, heads, sequence, key length] "
                       "for q " +
                       f.shape_text(qk) + (c.key_axis == 2 ? " and k " : " and kᵀ ") +
                       f.shape_text(c.kt));
  return verdict::yes();
}

// K in BNSH, however the pattern found it.
template <class M>
std::string key_bnsh(const graph& g, const M& m, rewrite::emitter& e) {
  if (has<"k_bnsh">(m)) return e.value(get<"k_bnsh">(m));
  if (has<"k_merged">(m)) return e.value(unmerged(g, get<"k_merged">(m)));
  if (has<"k_flat">(m)) return e.value(get<"k_flat">(m));
  if (has<"k_bsnh">(m))
    return e.op("Transpose", {e.value(get<"k_bsnh">(m))},
                {{"perm", std::vector<std::int64_t>{0, 2, 1, 3}}});
  return e.op("Transpose", {e.value(key_transposed(g, m))},
              {{"perm", std::vector<std::int64_t>{0, 1, 3, 2}}});
}

// One dim of a tensor as a one-element int64 tensor: a constant where the facts know it.
inline std::string dim_tensor(rewrite::emitter& e, const sym& d, const std::string& x, int axis) {
  if (auto k = d.constant()) return e.constant(dtype::int64, {1}, {double(*k)});
  return fused::run_time_dim(e, x, axis);
}

// The bias the fused op adds: the sum of the block's terms, a select as Where(keep, 0, fill) or
// Where(hide, fill, 0), a term of 3-D scores regrouped to 4-D; "" for none. `absorbed`: the op
// reads the cache's past and new keys apart.
template <class M>
std::string bias(const graph& g, const M& m, rewrite::emitter& e, const fused::attention_call& call,
                 bool absorbed) {
  const facts& f = facts_of(g);
  std::string out;
  for (const bias_term& t : bias_terms(g, m)) {
    std::string term;
    if (has<"select">(m) && t.added_by == get<"select">(m)) {
      const std::string zero = e.constant(g.type(query(g, m)), {}, {0.0});
      term = has<"keep">(m) ? e.op("Where", {e.value(t.parts[0]), zero, e.value(t.parts[1])})
                            : e.op("Where", {e.value(t.parts[0]), e.value(t.parts[1]), zero});
    } else {
      term = e.value(t.parts[0]);
    }
    if (const auto dims = term_dims(f, t); regrouped(g, t, dims)) {
      const std::vector<sym>& d = *dims;
      const std::string q = e.value(call.q), shape = e.op("Shape", {term});
      const auto lead = [&](int axis) {
        return d[0].is_constant(1) ? e.constant(dtype::int64, {1}, {1.0})
                                   : dim_tensor(e, *f.dim_of(call.q, axis), q, axis);
      };
      const auto own = [&](int axis) {
        if (auto k = d[std::size_t(axis)].constant())
          return e.constant(dtype::int64, {1}, {double(*k)});
        return e.op("Gather", {shape, e.constant(dtype::int64, {1}, {double(axis)})});
      };
      term = e.op("Reshape",
                  {term, e.op("Concat", {lead(0), lead(1), own(1), own(2)}, {{"axis", 0}})});
    }
    out = out.empty() ? term : e.op("Add", {out, term});
  }
  if (call.bias_expanded_over_keys || call.bias_expanded_over_queries) {
    const std::string one = e.constant(dtype::int64, {1}, {1.0});
    // With the cache moved into the op, v is the op's own present: past and new keys summed.
    const std::string keys =
        !call.bias_expanded_over_keys ? one
        : absorbed
            ? e.op("Add",
                   {dim_tensor(e, *f.dim_of(get<"v_past">(m), 2), e.value(get<"v_past">(m)), 2),
                    dim_tensor(e, *f.dim_of(get<"v_new">(m), 2), e.value(get<"v_new">(m)), 2)})
            : dim_tensor(e, *f.dim_of(call.v, 2), e.value(call.v), 2);
    const std::string rows = call.bias_expanded_over_queries
                                 ? dim_tensor(e, *f.dim_of(call.q, 2), e.value(call.q), 2)
                                 : one;
    out =
        e.op("Expand", {out, e.op("Concat", {e.constant(dtype::int64, {2}, {1.0, 1.0}), rows, keys},
                                  {{"axis", 0}})});
  }
  return out;
}

template <class M>
void note(const graph& g, const M& m, rewrite::emitter& e, bool causal) {
  const bool biased = has<"select">(m) || has<"mask">(m) || has<"bias">(m);
  e.note("scale", scale_of(g, m));
  e.note("scale_form", scale_form(m));
  e.note("casts_removed", int(get<"up">(m) != no_id) + int(get<"down">(m) != no_id));
  e.note("k_layout", has<"k_view">(m) || has<"k_merged">(m) ? "BNSH, heads merged into the batch"
                     : has<"k_bnsh">(m)                     ? "BNSH"
                     : has<"k_bsnh">(m)                     ? "BSNH"
                     : has<"k_flat">(m)                     ? "BNSH via a 3-D transpose"
                     : has<"kt">(m)                         ? "BNHS"
                                    : "BNSH via repeat_kv and a 3-D transpose");
  e.note("dtype", std::string(dtype_name(g.type(query(g, m)))));
  if (heads_in_batch(g, m))
    e.note("heads_in_batch", "3-D MatMuls on [batch·heads, sequence, head size]");
  if (packed(g, m))
    e.note("query_heads", "folded into the query axis, a row per key/value head: read unfolded");
  e.note("mask", causal                                                   ? "causal, the op's own"
                 : has<"bias">(m) && (has<"select">(m) || has<"mask">(m)) ? "bias and mask, summed"
                 : has<"bias">(m)                                         ? "bias"
                 : has<"select">(m) && has<"mask">(m) ? "select and attention bias, summed"
                 : has<"select">(m)                   ? "select, as attention bias"
                 : has<"mask">(m)                     ? "attention bias"
                                                      : "none");
  e.note("nan_guard", !has<"p">(m) ? "none"
                      : causal     ? "dropped: causality hides no row entirely"
                      : biased     ? "rows the bias hides entirely give 0"
                                   : "dropped: no bias can hide a row");
}

// A cache is a Concat along the sequence whose result the model returns (present); any other such
// Concat (SD3's joint text and image tokens) is k or v as the op reads it.
inline bool is_cache(const graph& g, node_id concat) {
  return concat != no_id && g.is_graph_output(g.output(concat, 0));
}

// ONNX Runtime's Attention checks a mask's heads against the key/value heads, where the spec
// broadcasts it over the query heads: a mask with a row per query head needs as many key/value
// heads, so the op reads the repeated ones.
inline bool mask_per_query_head(const fused::attention_call& c) {
  if (!c.has_bias || !c.bias_dims || c.bias_dims->size() < 3) return false;
  return !(*c.bias_dims)[c.bias_dims->size() - 3].is_constant(1);
}

// Why a decoder step's cache stays a Concat outside the fused op ("" when the op takes it): the
// op must read the concatenated k and v themselves (MultiHeadAttention reads repeated heads), and
// nothing but the replaced nodes may read present before the fused node, which computes it.
template <class M>
std::string cache_kept_because(const graph& g, const M& m, bool grouped) {
  const value_id k_read = grouped            ? grouped_keys(g, m)
                          : has<"k_bnsh">(m) ? get<"k_bnsh">(m)
                                             : get<"k_flat">(m);
  const value_id v_read = grouped ? grouped_values(g, m) : get<"v">(m);
  const node_id k_cache = get<"k_cache">(m), v_cache = get<"v_cache">(m);
  // Repeated heads first: a repeat_kv the pattern could not prove also hides v's cache from it.
  if (!grouped && (has<"k_grouped">(m) || has<"v_grouped">(m)))
    return "the op reads the repeated heads, not the cache";
  if (!grouped && packed(g, m))
    return "the op reads the key/value heads repeated for each query head, not the cache";
  if (has<"k_merged">(m) || (!has<"v_view">(m) && merge_of(g, get<"v">(m)) != no_id))
    return "the op reads the concatenated cache through a merge to 3-D that stays";
  if (!is_cache(g, k_cache) || !is_cache(g, v_cache))
    return "only one of key and value is a cache (concatenated and returned)";
  if (k_cache == v_cache) return "key and value are one Concat's output";
  if (g.output(k_cache, 0) != k_read || g.output(v_cache, 0) != v_read)
    return "the op reads the repeated heads, not the cache";
  const auto nodes = m.nodes();
  for (node_id cache : {k_cache, v_cache})
    for (const use& u : g.consumers(g.output(cache, 0)))
      if (std::find(nodes.begin(), nodes.end(), u.node) == nodes.end() &&
          g.topological_position(u.node) < g.topological_position(m.root()))
        return g.describe(u.node) + " reads '" + std::string(g.name(g.output(cache, 0))) +
               "' before the attention";
  return {};
}

// Key/value heads [B, Nkv, L, H] repeated in a row to q's N, as repeat_kv repeats them:
// Unsqueeze(2) → Expand(1, 1, N / Nkv, 1, 1) → Reshape(B, N, L, H).
inline std::string repeat_heads(const graph& g, rewrite::emitter& e, const std::string& x,
                                value_id q, const sym& kv_heads) {
  const facts& f = facts_of(g);
  const std::int64_t heads = *f.dim_of(q, 1)->constant(), groups = heads / *kv_heads.constant();
  const std::string axis = e.constant(dtype::int64, {1}, {2.0});
  const std::string u = g.opset("") >= 13
                            ? e.op("Unsqueeze", {x, axis})
                            : e.op("Unsqueeze", {x}, {{"axes", std::vector<std::int64_t>{2}}});
  const std::string repeated =
      e.op("Expand", {u, e.constant(dtype::int64, {5}, {1, 1, double(groups), 1, 1})});
  const std::string shape =
      e.op("Concat", {e.constant(dtype::int64, {3}, {0, double(heads), -1}),
                      dim_tensor(e, *f.dim_of(q, 3), e.value(q), 3)},
           {{"axis", 0}});
  return e.op("Reshape", {repeated, shape});
}

// The fused op; `merged` asks for the (B, S, N·H) output, else BNSH.
template <class M>
std::string attend(const graph& g, const M& m, rewrite::emitter& e, const attention_options& o,
                   bool merged) {
  const bool masked = has<"select">(m) || has<"mask">(m) || has<"bias">(m);
  const std::string not_causal = masked ? not_causal_because(g, m) : "no mask";
  const bool causal = not_causal.empty();
  note(g, m, e, causal);
  if (masked && !causal) e.note("causal", "no: " + not_causal);
  const facts& f = facts_of(g);
  const bool onnx = o.fused_target == fused::target::onnx;
  const value_id k_grouped = grouped_keys(g, m), v_grouped = grouped_values(g, m);
  const bool both_grouped = k_grouped != no_id && v_grouped != no_id;
  const bool has_cache = is_cache(g, get<"k_cache">(m)) || is_cache(g, get<"v_cache">(m));
  // Attention takes grouped key/value heads as they are, before repeat_kv; so does
  // GroupQueryAttention, always causal, where the block is causal too: a mask that is causality
  // alone, or one query, which causality shows every key (a decode step; its mask, if any, is
  // the op's bias).
  bool group_query = !onnx && both_grouped && (causal || f.dim_of(query(g, m), 2)->is_constant(1));
  const fused::attention_call call = call_of(g, m, causal);
  if (call.bias_expanded_over_keys)
    e.note("bias_keys", "expanded to v's key length, as the model's Add broadcast it");
  if (call.bias_expanded_over_queries)
    e.note("bias_queries", "expanded to q's length, as the model's Add broadcast it");
  const bool onnx_grouped = onnx && both_grouped && !mask_per_query_head(call);
  if (onnx && both_grouped && !onnx_grouped)
    e.note("kv_heads",
           "repeated: ONNX Runtime's Attention takes a mask per query head only for "
           "as many key/value heads");
  std::string kept =
      has_cache ? cache_kept_because(g, m, onnx_grouped || group_query) : std::string("no cache");
  std::int64_t group_query_kv_heads = 0;
  if (group_query) {
    const value_id k_new = kept.empty() ? get<"k_new">(m) : k_grouped;
    if (auto refused = fused::admits_group_query(f, query(g, m), k_new, kept.empty()); refused) {
      group_query_kv_heads = *f.dim_of(k_new, 1)->constant();
    } else {
      e.note("group_query", "no: " + refused.reason);
      group_query = false;
      if (has_cache) kept = cache_kept_because(g, m, false);
    }
  }
  const bool grouped = onnx_grouped || group_query;
  if (grouped) {
    const sym& kv_heads = *f.dim_of(k_grouped, 1);
    if (auto n = kv_heads.constant())
      e.note("kv_heads", *n);
    else
      e.note("kv_heads", f.text(kv_heads));
  }
  fused::operands in{.q = e.value(query(g, m)),
                     .k = grouped ? e.value(k_grouped) : key_bnsh(g, m, e),
                     .v = e.value(grouped ? v_grouped : values(g, m)),
                     .bias = "",
                     .merged_shape = merged ? e.value(g.input(m.root(), 1)) : "",
                     .zero_hidden_rows = has<"p">(m),
                     .causal = causal,
                     .group_query_kv_heads = group_query_kv_heads};
  // MultiHeadAttention takes one head count: folded query heads' keys and values repeated for it.
  if (!onnx && !grouped && packed(g, m)) {
    e.note("kv_heads", "repeated for MultiHeadAttention's one head count");
    in.k = repeat_heads(g, e, in.k, query(g, m), *f.dim_of(call.kt, 1));
    in.v = repeat_heads(g, e, in.v, query(g, m), *f.dim_of(call.kt, 1));
  }
  const bool absorbed = has_cache && kept.empty();
  if (!causal) in.bias = bias(g, m, e, call, absorbed);
  if (has_cache)
    e.note("kv_cache", absorbed ? "past and present in the fused op" : "Concat kept: " + kept);
  if (absorbed) {
    in.k = e.value(get<"k_new">(m)), in.past_k = e.value(get<"k_past">(m));
    in.v = e.value(get<"v_new">(m)), in.past_v = e.value(get<"v_past">(m));
  }
  const fused::attention_outputs out = fused::emit_attention(g, call, in, e, o, merged);
  if (absorbed) {
    e.replace(g.output(get<"k_cache">(m), 0), out.present_k);
    e.replace(g.output(get<"v_cache">(m), 0), out.present_v);
  }
  return out.y;
}

}  // namespace dit

struct dit_attention_merged {
  static constexpr std::string_view name = "dit-attention-merged";
  static constexpr int priority = 1;
  // Reshape(Transpose(x)) is every head merge, and a Reshape before it may be any: a near miss
  // once the MatMul's first input matched too.
  static constexpr std::size_t near_miss_depth = 4;
  static constexpr auto pattern = dit::merged;
  using options = attention_options;
  static bool resembles(const graph& g, node_id n) { return dit::softmax_upstream(g, n); }

  static rewrite::verdict guard(const graph& g, const auto& m, const options& o) {
    if (auto refused = dit::guard(g, m, o); !refused) return refused;
    // Folded, the product is [B, Nkv, G, H]: a Transpose and Reshape of it are no head merge.
    if (dit::packed(g, m))
      return rewrite::verdict::no("q's heads are folded into its query axis: the output is " +
                                  facts_of(g).shape_text(g.output(get<"pv">(m), 0)) +
                                  ", not [batch, heads, sequence, head size]");
    if (has<"out_view">(m))
      if (auto refused = dit::heads_in_batch_refused(g, m, {get<"out_view">(m)}); !refused)
        return refused;
    // MultiHeadAttention's output is (batch, sequence, heads·head size): the merge must be that.
    const facts& f = facts_of(g);
    const value_id q = dit::query(g, m), v = dit::values(g, m), merged = g.output(m.root(), 0);
    const sym* d = f.rank(merged) == 3u ? f.dim_of(merged, 0) : nullptr;
    if (d == nullptr || equal(*d, *f.dim_of(q, 0)) != truth::yes ||
        equal(*f.dim_of(merged, 1), *f.dim_of(q, 2)) != truth::yes ||
        equal(*f.dim_of(merged, 2), *f.dim_of(q, 1) * *f.dim_of(v, 3)) != truth::yes)
      return rewrite::verdict::no("the head merge " + f.shape_text(merged) +
                                  " is not proven to be (batch, sequence, heads·head size) of q " +
                                  f.shape_text(q));
    return rewrite::verdict::yes();
  }
  static void emit(const graph& g, const auto& m, rewrite::emitter& e, const options& o) {
    e.replace_root(dit::attend(g, m, e, o, true));
  }
};

struct dit_attention {
  static constexpr std::string_view name = "dit-attention";
  static constexpr auto pattern = dit::core;
  using options = attention_options;
  static bool resembles(const graph& g, node_id n) { return dit::softmax_read_by(g, n) != no_id; }
  static bool is_its_block(const graph& g, node_id n) {
    return dit::reads_attention_probabilities(g, n);
  }

  static rewrite::verdict guard(const graph& g, const auto& m, const options& o) {
    return dit::guard(g, m, o);
  }
  // With heads in the batch axis the block's output is [B·N, S, H]: the op's BNSH regrouped.
  static void emit(const graph& g, const auto& m, rewrite::emitter& e, const options& o) {
    std::string y = dit::attend(g, m, e, o, false);
    if (dit::packed(g, m)) {
      // Folded back as the model folded q, for its own unfolding that follows.
      const facts& f = facts_of(g);
      const value_id folded = get<"q">(m);
      y = e.op("Reshape", {y, e.op("Concat",
                                   {e.constant(dtype::int64, {1}, {0.0}),
                                    dit::dim_tensor(e, *f.dim_of(folded, 1), e.value(folded), 1),
                                    dit::dim_tensor(e, *f.dim_of(folded, 2), e.value(folded), 2),
                                    e.constant(dtype::int64, {1}, {-1.0})},
                                   {{"axis", 0}})});
    } else if (facts_of(g).rank(g.input(m.root(), 1)) == 3u) {
      const facts& f = facts_of(g);
      const value_id q = dit::query(g, m), v = dit::values(g, m);
      y = e.op("Reshape", {y, e.op("Concat",
                                   {e.constant(dtype::int64, {1}, {-1.0}),
                                    dit::dim_tensor(e, *f.dim_of(q, 2), e.value(q), 2),
                                    dit::dim_tensor(e, *f.dim_of(v, 3), e.value(v), 3)},
                                   {{"axis", 0}})});
    }
    e.replace_root(y);
  }
};

}  // namespace fusekit::rules
