// Scaled dot-product attention as torch's exporters write it, for diffusion transformers (F5-TTS,
// SD3, Flux) and decoders (GPT-2, LLaMA, Qwen2) alike.
//
//   before                                          after, target ort
//   q ────────────── [×|÷ c] ┐                      q ─ Transpose(0,2,1,3) ─ Reshape(B,S,D) ─┐
//   [repeat_kv] kᵀ ─ [×|÷ c] MatMul                 k (BNSH, heads repeated) ─────────────────┤
//                              │ [Casts]*           v (BNSH, heads repeated) ─────────────────┤
//                            [Mul | Div (scalar)]   bias: mask [+ Where(keep, 0, fill)] ──────┤
//                            [Where(keep, ·, fill)]                com.microsoft.MultiHeadAttention
//                            [+ mask]                                (num_heads, scale) → (B,S,D)
//                            Softmax (last axis)
//                            [Where(IsNaN(p), 0, p)]  after, target onnx (opset ≥ 23)
//                              │ [Casts]*           Attention(q, k, v, bias; scale) on BNSH
//                              tensors,
//   [repeat_kv] v ────────── MatMul                 k and v with their own (grouped) heads
//                            [Transpose(0,2,1,3)
//                             → Reshape(B,S,D)]     NaN guard: output rows the bias hides entirely
//                                                   are zeroed, as the guard zeroes them
//   * Casts between floating-point types may sit between any two steps and on v: the block's
//     precision, which the op computes in (fused_ops.hpp); what the block returned is cast back
//   a mask that is causality alone (Trilu, a constant lower triangle) and as many queries as
//   keys: no bias; MultiHeadAttention unidirectional, Attention is_causal
//   grouped heads, target ort, causal (that mask, or one query): GroupQueryAttention on the
//   grouped k and v, (B,S,D) each; soft-capped scores, tanh(s / c) · c after the scale: its
//   softcap c, and there alone
//   a decode step whose present a node that stays reads before the attention (not a Shape that
//   only sizes repeat_kv's views, which goes with the block): the Concat stays for it,
//   GroupQueryAttention reads past and new apart all the same
//   target ort reads q, k and v as the (B,L,D) values their heads were split from, where each
//   is Transpose(0,2,1,3) of such a split (k and v both or neither): no transposes before the op
//
//   decode step: k = Concat(past_k, new_k) ─┬─ present_k (graph output)
//                                           └─ kᵀ …     → the op reads new_k and past_k and writes
//                (v alike)                                present_k (and v's) itself
//   one query's heads folded: q [B,N,1,H] → Reshape [B,Nkv,G,H] → MatMul with k, v of Nkv heads
//                              → Reshape [B,N,1,H]   → the op reads q unfolded, k and v grouped
//   windows in the batch (Swin's shifted windows): scores [B·W,N,S,S] → Reshape [B,W,N,S,S]
//                              → + mask [1,W,1,S,S] → Reshape [B·W,N,S,S] → the op's bias: the
//                                mask merged to [W,1,S,S], expanded over B first where B is not 1
//
// Two rules share the pattern: scaled-dot-product-attention-head-merge also absorbs the trailing
// head merge (Transpose + Reshape to (B,S,D)), which MultiHeadAttention's 3-D output makes free;
// it runs first, and scaled-dot-product-attention takes the blocks without one. What the fused
// ops accept is their contract's, in fused_ops.hpp.
//
// This header is the pattern drawn above, top to bottom, then its guard, its emit and the two
// rules. The parts particular to a family of models each have their own header:
//   scale.hpp           the scale's factors on q, kᵀ or the scores, and their product
//   key_layouts.hpp     kᵀ's forms: transposes, the dynamo detour, pre-transposed K, repeat_kv's
//                       grouped heads
//   heads_in_batch.hpp  the bmm form, heads merged into the batch axis (Bloom, older eager
//                       BART, Whisper, OPT, CLIP)
//   windows_in_batch.hpp  the scores split into windows around the mask (Swin's shifted
//                       windows), and the split and merge of the bmm form's scores alike
//   bias_terms.hpp      selects, masks and biases added to the scores; whether the mask is
//                       causality alone (proven by causal.hpp); the soft cap's one c
//   decoder_cache.hpp   a decode step's Concat(past, new) cache, and joined streams that are
//                       no cache (SD3's text and image tokens)
//   folded_query_heads.hpp  a grouped decode step's query heads folded into the query axis
//                       (transformers 5 outside dynamo)
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attention_probabilities.hpp"
#include "bias_terms.hpp"
#include "decoder_cache.hpp"
#include "fused_ops.hpp"
#include "fusekit/graph/facts.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"
#include "fusekit/rewrite/rule.hpp"
#include "heads_in_batch.hpp"
#include "key_layouts.hpp"
#include "options.hpp"
#include "scale.hpp"
#include "windows_in_batch.hpp"

namespace fusekit::rules {

namespace sdpa {

using namespace pattern;

// The scale is what the block applies, wherever it does: a factor on q (OPT and Whisper scale q
// before calling SDPA with scale 1), on kᵀ, on both (torch's SDPA decomposition: q·√s and kᵀ·√s),
// a divisor of q or kᵀ (DeBERTa: kᵀ / √(3·H) in v2, q / √(3·H) in v1), on the scores
// (hand-written F5-TTS exporters: MatMul(q, kᵀ) → [Cast] → Mul|Div), or none at all (T5; a block
// whose scale an earlier projection applied). The fused op's scale is their product, a divisor
// counting as its reciprocal, and 1 where there is none. Each factor is a constant or folded by the
// facts (GPT-2's TorchScript export divides by ConstantOfShape([]) + Pow(8, 0.5); torch's
// decomposition computes √s from q's shape at run time).
inline constexpr auto q_side = any_of(
    commutative(op<"Mul">(
        capture<"q">, capture<"q_factor">.proven_value("a scalar of known value", folded_scalar))),
    op<"Div">(capture<"q">,
              capture<"q_divisor">.proven_value("a scalar of known value", folded_scalar)),
    capture<"q">);
inline constexpr auto k_side =
    any_of(commutative(op<"Mul">(
               through_casts(k_transposed),
               capture<"k_factor">.proven_value("a scalar of known value", folded_scalar))),
           op<"Div">(through_casts(k_transposed),
                     capture<"k_divisor">.proven_value("a scalar of known value", folded_scalar)),
           k_transposed);
// Casts between the block's steps are its precision, which the guard reads whole (fused_ops.hpp's
// policy), not ops at fixed places: torch's decomposition in float16 widens the scores for the
// softmax; a converter that keeps some steps in float32 leaves a round trip between each two of
// them and casts at every border of what it kept.
inline constexpr auto scores =
    op<"MatMul">(through_casts(q_side), through_casts(k_side)).bind<"scores">();
inline constexpr auto widened = through_casts(scores);
inline constexpr auto logits = any_of(
    commutative(op<"Mul">(widened, constant_scalar<"scale">)),
    op<"Div">(widened, constant_scalar<"divisor">),
    commutative(op<"Mul">(
        widened, capture<"scale_folded">.proven_value("a scalar of known value", folded_scalar))),
    op<"Div">(widened,
              capture<"divisor_folded">.proven_value("a scalar of known value", folded_scalar)),
    widened);
// Gemma 2's logit soft-capping, tanh(s / c) · c on the scaled scores before the mask, which only
// GroupQueryAttention computes (soft_capping_refused says where).
inline constexpr auto soft_capped =
    commutative(
        op<"Mul">(
            through_casts(op<"Tanh">(through_casts(any_of(
                op<"Div">(through_casts(logits),
                          capture<"cap">.proven_value("a scalar of known value", folded_scalar)),
                commutative(op<"Mul">(through_casts(logits), capture<"cap_inverse">)))))),
            capture<"cap_out">))
        .bind<"softcap">();
// What the guard proves of the cap and the pattern cannot say: the factor after the tanh is the
// divisor within, or the inverse of the factor within (soft_capping_refused). The check writes
// them so.
struct cap_inverse_written {
  static auto write(auto& w) { return w.initializer(w.type(), {}, {2.0}); }
};
struct cap_out_written {
  static auto write(auto& w) {
    return w.initializer(w.type(), {},
                         {w.written("cap") ? w.scalar("cap") : 1 / w.scalar("cap_inverse")});
  }
};
// The select's fill as exporters write it, where the guard takes it (fill_absorbs_scores):
// torch's finfo.min where that absorbs the scores, else −inf.
struct fill_written {
  static auto write(auto& w) {
    const double lowest = std::numeric_limits<float>::lowest();
    return w.initializer(
        w.type(), {},
        {fill_absorbs_scores(lowest, w.type()) ? lowest
                                               : -std::numeric_limits<double>::infinity()});
  }
};
// A select's condition as a model input, or causality as exporters write it: a constant true
// exactly where key j ≤ query i (keep), or j > i (hide), over the scores' last two dims. Soft-
// capped scores fuse only so (GroupQueryAttention takes causal blocks alone).
template <bool Keep>
struct causal_written {
  static constexpr std::string_view text = Keep ? "causal, j ≤ i" : "causal, j > i";
  static auto write(auto& w) {
    const auto queries = w.proven_dim("q", -2), keys = w.proven_dim("kt_value", -1);
    // q or kᵀ of fewer dims: no attention, and no triangle to write.
    if (!queries || !keys) return w.input(dtype::boolean, {});
    std::vector<double> visible;
    for (std::int64_t i = 0; i < *queries; ++i)
      for (std::int64_t j = 0; j < *keys; ++j) visible.push_back((j <= i) == Keep ? 1 : 0);
    return w.initializer(dtype::boolean, {*queries, *keys}, visible);
  }
};
// K as the guard reads it in a layout other than q's: q's dims with two axes exchanged (counted
// from the last), as many keys as queries; pre-transposed [B, N, H, L] exchanges the last two,
// BSNH heads and sequence. Where k is written before q (a factor on kᵀ alone), the dims the leaf
// search gives it, exchanged so.
template <int A, int B>
struct k_as_q_exchanged {
  static auto write(auto& w) {
    const auto of_q = w.written("q") ? w.dims("q") : std::nullopt;
    std::vector<std::int64_t> dims = of_q ? *of_q : w.leaf_shape();
    const auto rank = std::int64_t(dims.size());
    if (rank >= -A && rank >= -B)
      std::swap(dims[std::size_t(rank + A)], dims[std::size_t(rank + B)]);
    return w.input(w.type(), dims);
  }
};
inline constexpr auto read_beyond =
    merges_read + sources(source<"kt">(written<k_as_q_exchanged<-2, -1>>),
                          source<"k_bsnh">(written<k_as_q_exchanged<-3, -2>>),
                          source<"cap_inverse">(written<cap_inverse_written>),
                          source<"cap_out">(written<cap_out_written>),
                          source<"fill">(written<fill_written>),
                          source<"keep">(any_of(written<causal_written<true>>, any())),
                          source<"hide">(any_of(written<causal_written<false>>, any())));
inline constexpr auto scored = any_of(logits, soft_capped);
// What exporters add to the scores: a bias before the mask (Bloom's ALiBi, added by baddbmm to
// the 3-D scores), then the mask: an additive one (Where(bool, 0, −inf|finfo.min) or a model
// input), or a select as GPT-2's eager attention writes it (Where(causal, scores, finfo.min), then
// maybe the padding mask added). Their sum is the fused ops' attention bias when its shape is one
// they take; one added to the 3-D scores is regrouped to [B, N, …] on emit.
inline constexpr auto biased =
    optional_op(commutative(op<"Add">(through_casts(scored), capture<"bias">)).bind<"biased">());
inline constexpr auto viewed = optional_op(first_axis_split<"scores_view">(through_casts(biased)));
inline constexpr auto selected = any_of(
    op<"Where">(capture<"keep">, through_casts(viewed), constant_scalar<"fill">).bind<"select">(),
    op<"Where">(capture<"hide">, constant_scalar<"fill">, through_casts(viewed)).bind<"select">());
inline constexpr auto masked =
    optional_op(commutative(op<"Add">(through_casts(any_of(selected, viewed)), capture<"mask">))
                    .bind<"mask_add">());
inline constexpr auto softmax =
    op<"Softmax">(through_casts(optional_op(first_axes_merged<"masked_view">(masked))))
        .attr<"axis">(last_axis)
        .bind<"softmax">();
// torch's SDPA decomposition zeroes the rows a mask hides entirely: Where(IsNaN(p), 0, p).
inline constexpr auto guarded =
    any_of(op<"Where">(op<"IsNaN">(capture<"p">(through_casts(softmax))),
                       constant_scalar<"nan_fill">.value(0.0), capture<"p">),
           softmax);
inline constexpr auto probs = through_casts(guarded);
inline constexpr auto core =
    op<"MatMul">(through_casts(optional_op(heads_merged<"probs_view">(probs))),
                 through_casts(any_of(heads_merged<"v_view">(capture<"v">(v_source)),
                                      capture<"v">(repeated<"v_grouped">(v_source)),
                                      capture<"v">(v_source))))
        .bind<"pv">();
inline constexpr auto merged =
    op<"Reshape">(op<"Transpose">(through_casts(optional_op(heads_split<"out_view">(core))))
                      .attr<"perm">(ints(0, 2, 1, 3)),
                  any());

// What the guards accept only together, which no search one choice at a time reaches: the rules'
// examples for selfcheck (fusekit/pattern/examples.hpp).
// GroupQueryAttention's block: k and v repeated for q's heads alike, no cache (under ort the
// only op soft-capped scores fuse into).
inline constexpr pattern::example grouped_query_block{.with = {"k_grouped", "v_grouped"},
                                                      .without = {"k_cache", "v_cache"}};
// The dynamo exporter's repeat_kv merged into kᵀ's detour, beside v repeated alike.
inline constexpr pattern::example repeated_detour_block{.with = {"k_grouped", "v_grouped"},
                                                        .without = {"k_bnsh", "k_flat"}};
// BART's heads in the batch axis: the scores split for the mask and merged back for Softmax.
inline constexpr pattern::example heads_in_batch_block{
    .with = {"q_merge", "k_merged", "scores_view", "masked_view", "v_merge"},
    .without = {"v_view", "v_grouped", "v_cache"}};
// And the product split again for the head merge.
inline constexpr pattern::example heads_in_batch_merged_block = [] {
  pattern::example e = heads_in_batch_block;
  e.with[5] = "out_view";
  return e;
}();

// Whether a Softmax feeds the anchor's data path within a few nodes: what makes a failed match
// at this anchor a near miss worth a reason, rather than an unrelated MatMul or Reshape.
inline bool softmax_upstream(const graph& g, node_id n) {
  for (int step = 0; step < 12 && n != no_id; ++step) {
    if (g.op_type(n) == "Softmax" && g.domain(n).empty()) return true;
    n = g.producer(g.input(n, 0));
  }
  return false;
}

// Whether target ort computes the block with GroupQueryAttention: on the model's grouped key/value
// heads (before repeat_kv), causal as the op always is. `candidate`: the block is one it could
// take, so that `declined` (why it does not) is worth the report. `kept`: why the cache stays a
// Concat ("" where the op writes present); `reads_past`: the op reads the past and the new keys
// apart all the same, where the Concat stays only for nodes that read present before the op
// (its own present then goes unread).
struct group_query_choice {
  std::int64_t kv_heads = 0;
  bool candidate = false;
  std::string declined{};
  std::string kept{};
  bool reads_past = false;
};
template <class M>
group_query_choice group_query_of(const graph& g, const M& m, const attention_options& o,
                                  const fused::attention_call& call, bool causal) {
  const facts& f = facts_of(g);
  const value_id q = query(g, m);
  const value_id k_grouped = grouped_keys(g, m), v_grouped = grouped_values(g, m);
  if (o.fused_target != fused::target::ort) return {.declined = "the target is onnx"};
  if (k_grouped == no_id || v_grouped == no_id)
    return {.declined = "k and v are not key/value heads the model repeats for q's heads"};
  // A mask that is causality alone, or one query, which causality shows every key (a decode
  // step; its mask, if any, is the op's bias).
  if (!causal && !f.dim_of(q, 2)->is_constant(1))
    return {.declined =
                "the mask is not causality alone, and q " + f.shape_text(q) + " is not one query"};
  group_query_choice c{.candidate = true};
  const bool has_cache = is_cache(g, get<"k_cache">(m)) || is_cache(g, get<"v_cache">(m));
  c.kept = cache_kept_because(g, m, true, call.type);
  c.reads_past = has_cache && cache_kept_because(g, m, true, call.type, false).empty();
  const value_id k_new = c.reads_past ? get<"k_new">(m) : k_grouped;
  const value_id v_new = c.reads_past ? get<"v_new">(m) : v_grouped;
  const bool biased = !causal && (has<"select">(m) || has<"mask">(m) || has<"bias">(m));
  if (auto refused = fused::admits_group_query(f, {.q = q,
                                                   .k_new = k_new,
                                                   .v_new = v_new,
                                                   .has_past = c.reads_past,
                                                   .type = call.type,
                                                   .biased = biased,
                                                   .runs_on = o.runs_on});
      !refused) {
    // Where the cache stays outside, the op's new keys are the whole cache: why it stays.
    c.declined = refused.reason;
    if (has_cache && !c.reads_past) c.declined += " (the cache stays a Concat: " + c.kept + ")";
    return c;
  }
  c.kv_heads = *f.dim_of(k_new, 1)->constant();
  return c;
}

// The cap of soft-capped scores, which only GroupQueryAttention applies (its `softcap`, after the
// scale and before the mask, as the model does); 0 where the block has none. Attention-23 has
// `softcap` too, but where it applies relative to the mask changed: ONNX Runtime 1.23 caps after
// adding the mask (−inf becomes −c, and hidden keys get weight), later versions and the ONNX
// reference before it; the fused model's meaning would depend on the runtime.
template <class M>
rewrite::verdict soft_capping_refused(const graph& g, const M& m, const attention_options& o,
                                      const fused::attention_call& call) {
  if (!has<"softcap">(m)) return rewrite::verdict::yes();
  const soft_cap cap = soft_cap_of(g, m);
  if (!cap.refused.empty()) return rewrite::verdict::no(cap.refused);
  const std::string what = "the scores are soft-capped before Softmax (tanh(s / " +
                           pattern::number_text(cap.cap) + ") · " + pattern::number_text(cap.cap) +
                           ", Gemma 2's attention logit "
                           "soft-capping): ";
  if (o.fused_target == fused::target::onnx)
    return rewrite::verdict::no_with_these_options(
        what +
        "Attention-23's softcap is applied after the mask by ONNX Runtime "
        "1.23 and before it by later versions, so the fused model's "
        "outputs would depend on the runtime");
  const group_query_choice c = group_query_of(g, m, o, call, causal_alone(g, m));
  if (c.kv_heads == 0)
    return rewrite::verdict::no(what +
                                "of the ops only GroupQueryAttention caps, and it does not "
                                "take this block: " +
                                c.declined);
  return rewrite::verdict::yes();
}

// The checks across captures that a pattern cannot express; what the fused op itself needs is
// its contract's (fused::admits).
template <class M>
rewrite::verdict guard(const graph& g, const M& m, const attention_options& opts) {
  using rewrite::verdict;
  if (auto refused = heads_in_batch_refused(g, m); !refused) return refused;
  if (auto refused = packed_refused(g, m); !refused) return refused;
  const value_id q = query(g, m);
  // ONNX multiplies operands of one type; a model that does not is no attention to compute.
  for (const node_id product : {get<"scores">(m), get<"pv">(m)})
    if (const dtype a = g.type(g.input(product, 0)), b = g.type(g.input(product, 1));
        a != b && a != dtype::undefined && b != dtype::undefined)
      return verdict::no(g.describe(product) + " multiplies " +
                         std::string(dtype_name(g.type(g.input(product, 0)))) + " by " +
                         std::string(dtype_name(g.type(g.input(product, 1)))) +
                         ", which ONNX does not define");
  // A Cast of the block is a precision, between floating-point types; one to an integer or a
  // float8 type quantises, which neither op computes. The Cast into such a type is named first.
  for (const bool into : {true, false})
    for (const node_id n : m.nodes())
      if (g.domain(n).empty() && g.op_type(n) == "Cast")
        if (const dtype from = g.type(g.input(n, 0)), to = g.type(g.output(n, 0));
            !is_float(into ? to : from))
          return verdict::no(g.describe(n) + " casts " + std::string(dtype_name(from)) + " to " +
                             std::string(dtype_name(to)) +
                             ", which no fused op computes in: only float16, bfloat16, float32 "
                             "and float64 are a precision");
  const fused::attention_call c = call_of(g, m, causal_alone(g, m));
  if (c.type == dtype::undefined) {
    const auto types = [&](node_id product) {
      return std::string(dtype_name(g.type(g.input(product, 0))));
    };
    return verdict::no("QKᵀ reads " + types(get<"scores">(m)) + " and ·V " + types(get<"pv">(m)) +
                       ": neither type holds the other exactly, to compute both in");
  }
  if (auto refused = fused::admits(g, c, opts); !refused) return refused;
  if (auto refused = soft_capping_refused(g, m, opts, c); !refused) return refused;
  // Casts are the model's precision, read by the policy (fused_ops.hpp): the op keeps the
  // softmax and the steps before it in float32, so one run wider than that would become narrower.
  const node_id softmax = get<"softmax">(m);
  if (const dtype s = g.type(g.output(softmax, 0)); !fused::holds_exactly(dtype::float32, s))
    return verdict::no(g.describe(softmax) + " runs in " + std::string(dtype_name(s)) +
                       ", wider than the float32 the fused op computes the softmax in");
  if (const node_id wider = fused::step_wider_than(g, m.nodes(), c.type); wider != no_id)
    return verdict::no(g.describe(wider) + " runs in " +
                       std::string(dtype_name(g.type(g.output(wider, 0)))) +
                       ", wider than the fused op computes it in");
  const facts& f = facts_of(g);
  // The op adds the select's fill in its own type, where the fill must absorb the scores.
  const dtype t = c.type;
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

// `t`: the type the op computes in.
template <class M>
void note(const graph& g, const M& m, rewrite::emitter& e, bool causal, dtype t) {
  const bool biased = has<"select">(m) || has<"mask">(m) || has<"bias">(m);
  e.note("scale", scale_of(g, m));
  e.note("scale_form", scale_form(m));
  int casts = 0, narrowings = 0;
  for (const node_id n : m.nodes())
    if (g.domain(n).empty() && g.op_type(n) == "Cast") {
      ++casts;
      narrowings += fused::narrows(t, g.type(g.output(n, 0)));
    }
  e.note("casts_removed", casts);
  e.note("narrowings_removed", narrowings);
  e.note("k_layout", has<"k_view">(m) || has<"k_merged">(m) ? "BNSH, heads merged into the batch"
                     : has<"k_bnsh">(m)                     ? "BNSH"
                     : has<"k_bsnh">(m)                     ? "BSNH"
                     : has<"k_flat">(m)                     ? "BNSH via a 3-D transpose"
                     : has<"kt">(m)                         ? "BNHS"
                                    : "BNSH via repeat_kv and a 3-D transpose");
  e.note("dtype", std::string(dtype_name(g.type(query(g, m)))));
  if (heads_in_batch(g, m))
    e.note("heads_in_batch", "3-D MatMuls on [batch·heads, sequence, head size]");
  if (has<"scores_view">(m) && facts_of(g).rank(g.input(get<"scores_view">(m), 0)) == 4u)
    e.note("windows_in_batch",
           "the scores viewed as [batch, windows, …] for a mask per window: the mask merged "
           "with the batch, as the scores are again");
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

// The fused op; `merged` asks for the (B, S, N·H) output, else BNSH.
template <class M>
std::string attend(const graph& g, const M& m, rewrite::emitter& e, const attention_options& o,
                   bool merged) {
  const bool masked = has<"select">(m) || has<"mask">(m) || has<"bias">(m);
  const std::string not_causal = masked ? not_causal_because(g, m) : "no mask";
  const bool causal = not_causal.empty();
  const fused::attention_call call = call_of(g, m, causal);
  note(g, m, e, causal, call.type);
  if (masked && !causal) e.note("causal", "no: " + not_causal);
  const facts& f = facts_of(g);
  const bool onnx = o.fused_target == fused::target::onnx;
  const value_id k_grouped = grouped_keys(g, m), v_grouped = grouped_values(g, m);
  const bool both_grouped = k_grouped != no_id && v_grouped != no_id;
  const bool has_cache = is_cache(g, get<"k_cache">(m)) || is_cache(g, get<"v_cache">(m));
  // Attention takes grouped key/value heads as they are, before repeat_kv; so does
  // GroupQueryAttention where it computes the block.
  const group_query_choice choice = group_query_of(g, m, o, call, causal);
  const bool group_query = choice.kv_heads > 0;
  if (choice.candidate && !group_query) e.note("group_query", "no: " + choice.declined);
  if (call.bias_expanded_over_keys)
    e.note("bias_keys", "expanded to v's key length, as the model's Add broadcast it");
  if (call.bias_expanded_over_queries)
    e.note("bias_queries", "expanded to q's length, as the model's Add broadcast it");
  const bool onnx_grouped = onnx && both_grouped && !mask_per_query_head(call);
  if (onnx && both_grouped && !onnx_grouped)
    e.note("kv_heads",
           "repeated: ONNX Runtime's Attention takes a mask per query head only for "
           "as many key/value heads");
  std::string kept = group_query ? choice.kept : cache_kept_because(g, m, onnx_grouped, call.type);
  const std::int64_t group_query_kv_heads = choice.kv_heads;
  const bool grouped = onnx_grouped || group_query;
  // One key/value head broadcast by the MatMuls, expanded to q's heads: MultiHeadAttention takes
  // one head count, and ONNX Runtime's Attention a mask per query head only for as many
  // key/value heads.
  const bool broadcast_head = !grouped && !packed(g, m) && fused::shares_one_kv_head(f, call) &&
                              (!onnx || mask_per_query_head(call));
  if (has_cache && kept.empty() && !group_query) {
    if (!onnx && fused::own_value_head_size(f, query(g, m), values(g, m)))
      kept = "MultiHeadAttention writes the present value in the key's head size, not v's " +
             f.shape_text(values(g, m));
    else if (broadcast_head)
      kept = "the op reads the one key/value head expanded to q's heads, not the cache";
  }
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
                     .group_query_kv_heads = group_query_kv_heads,
                     .softcap = has<"softcap">(m) ? soft_cap_of(g, m).cap : 0.0};
  if (in.softcap > 0) e.note("softcap", in.softcap);
  // MultiHeadAttention takes one head count: folded query heads' keys and values repeated for it.
  if (!onnx && !grouped && packed(g, m)) {
    e.note("kv_heads", "repeated for MultiHeadAttention's one head count");
    in.k = repeat_heads(g, e, in.k, query(g, m), *f.dim_of(call.kt, 1));
    in.v = repeat_heads(g, e, in.v, query(g, m), *f.dim_of(call.kt, 1));
  }
  if (broadcast_head) {
    e.note("kv_heads", onnx ? "1, expanded: ONNX Runtime's Attention takes a mask per query head "
                              "only for as many key/value heads"
                            : "1, expanded for MultiHeadAttention's one head count");
    const std::string heads = e.ints({1, fused::heads_of(f, call, o), 1, 1});
    in.k = e.op("Expand", {in.k, heads});
    in.v = e.op("Expand", {in.v, heads});
  }
  // Operands of a narrower type widen to the op's on the way in (exact; fused_ops.hpp's policy).
  int casts_added = 0;
  const auto widened = [&](std::string x, value_id read) {
    if (g.type(read) == call.type) return x;
    ++casts_added;
    return e.op("Cast", {x}, {{"to", call.type}});
  };
  in.q = widened(in.q, query(g, m));
  in.k = widened(in.k, grouped ? k_grouped : call.kt);
  in.v = widened(in.v, grouped ? v_grouped : values(g, m));
  const bool absorbed = has_cache && kept.empty();
  const bool apart = absorbed || (group_query && choice.reads_past);
  // The [B, L, N·H] values the model made q, k and v from, where the op can read them as they
  // are: of the op's type (nothing widened), and the operands the op reads, not repeated or
  // expanded here.
  if (!onnx && !broadcast_head && (grouped || !packed(g, m))) {
    const auto three_d = [&](value_id x) {
      return x != no_id && g.type(x) == call.type ? e.value(x) : std::string();
    };
    in.q_bsd = three_d(fused::three_d_of(g, query(g, m)));
    const value_id k = apart     ? fused::three_d_of(g, get<"k_new">(m))
                       : grouped ? fused::three_d_of(g, k_grouped)
                                 : key_three_d(g, m);
    const value_id v = fused::three_d_of(g, apart     ? get<"v_new">(m)
                                            : grouped ? v_grouped
                                                      : values(g, m));
    in.k_bsd = three_d(k);
    in.v_bsd = three_d(v);
  }
  if (!causal) {
    in.bias = bias(g, m, e, call, absorbed);
    for (const bias_term& t : bias_terms(g, m)) casts_added += term_type(g, t) != call.type;
  }
  if (has_cache)
    e.note("kv_cache", absorbed ? "past and present in the fused op"
                       : apart  ? "the op reads past and new keys apart; Concat kept: " + kept
                                : "Concat kept: " + kept);
  if (apart) {
    in.k = e.value(get<"k_new">(m)), in.past_k = e.value(get<"k_past">(m));
    in.v = e.value(get<"v_new">(m)), in.past_v = e.value(get<"v_past">(m));
  }
  const fused::attention_outputs out = fused::emit_attention(g, call, in, e, o, merged);
  if (absorbed) {
    e.replace(g.output(get<"k_cache">(m), 0), out.present_k);
    e.replace(g.output(get<"v_cache">(m), 0), out.present_v);
  }
  // Read outside in the type the block returned.
  std::string y = out.y;
  if (const dtype returned = g.type(g.output(m.root(), 0)); returned != call.type) {
    ++casts_added;
    y = e.op("Cast", {y}, {{"to", returned}});
  }
  e.note("compute_type", std::string(dtype_name(call.type)));
  e.note("casts_added", casts_added);
  return y;
}

}  // namespace sdpa

struct scaled_dot_product_attention_head_merge {
  static constexpr std::string_view name = "scaled-dot-product-attention-head-merge";
  static constexpr int priority = 1;
  // Reshape(Transpose(x)) is every head merge, and a Reshape before it may be any: a near miss
  // once the MatMul's first input matched too.
  static constexpr std::size_t near_miss_depth = 4;
  static constexpr auto pattern = sdpa::merged;
  static constexpr auto sources = sdpa::read_beyond;
  // What the guard accepts only together, which no search one choice at a time reaches.
  static constexpr auto examples = pattern::examples(
      sdpa::grouped_query_block, sdpa::heads_in_batch_merged_block, sdpa::repeated_detour_block);
  using options = attention_options;
  static bool resembles(const graph& g, node_id n) { return sdpa::softmax_upstream(g, n); }

  static rewrite::verdict guard(const graph& g, const auto& m, const options& o) {
    if (auto refused = sdpa::guard(g, m, o); !refused) return refused;
    // Folded, the product is [B, Nkv, G, H]: a Transpose and Reshape of it are no head merge.
    if (sdpa::packed(g, m))
      return rewrite::verdict::no("q's heads are folded into its query axis: the output is " +
                                  facts_of(g).shape_text(g.output(get<"pv">(m), 0)) +
                                  ", not [batch, heads, sequence, head size]");
    if (has<"out_view">(m))
      if (auto refused = sdpa::heads_in_batch_refused(g, m, {get<"out_view">(m)}); !refused)
        return refused;
    // MultiHeadAttention's output is (batch, sequence, heads·head size): the merge must be that.
    const facts& f = facts_of(g);
    const value_id q = sdpa::query(g, m), v = sdpa::values(g, m), merged = g.output(m.root(), 0);
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
    e.replace_root(sdpa::attend(g, m, e, o, true));
  }
};

struct scaled_dot_product_attention {
  static constexpr std::string_view name = "scaled-dot-product-attention";
  static constexpr auto pattern = sdpa::core;
  static constexpr auto sources = sdpa::read_beyond;
  static constexpr auto examples = pattern::examples(
      sdpa::grouped_query_block, sdpa::heads_in_batch_block, sdpa::repeated_detour_block);
  using options = attention_options;
  static bool resembles(const graph& g, node_id n) { return sdpa::softmax_read_by(g, n) != no_id; }
  static bool is_its_block(const graph& g, node_id n) {
    return sdpa::reads_attention_probabilities(g, n);
  }

  static rewrite::verdict guard(const graph& g, const auto& m, const options& o) {
    return sdpa::guard(g, m, o);
  }
  // With heads in the batch axis the block's output is [B·N, S, H]: the op's BNSH regrouped.
  static void emit(const graph& g, const auto& m, rewrite::emitter& e, const options& o) {
    std::string y = sdpa::attend(g, m, e, o, false);
    if (sdpa::packed(g, m)) {
      // Folded back as the model folded q, for its own unfolding that follows.
      const facts& f = facts_of(g);
      const value_id folded = get<"q">(m);
      y = e.op(
          "Reshape",
          {y, e.op("Concat",
                   {e.ints({0}), sdpa::dim_tensor(e, *f.dim_of(folded, 1), e.value(folded), 1),
                    sdpa::dim_tensor(e, *f.dim_of(folded, 2), e.value(folded), 2), e.ints({-1})},
                   {{"axis", 0}})});
    } else if (facts_of(g).rank(g.input(m.root(), 1)) == 3u) {
      const facts& f = facts_of(g);
      const value_id q = sdpa::query(g, m), v = sdpa::values(g, m);
      y = e.op("Reshape",
               {y, e.op("Concat",
                        {e.ints({-1}), sdpa::dim_tensor(e, *f.dim_of(q, 2), e.value(q), 2),
                         sdpa::dim_tensor(e, *f.dim_of(v, 3), e.value(v), 3)},
                        {{"axis", 0}})});
    }
    e.replace_root(y);
  }
};

}  // namespace fusekit::rules
