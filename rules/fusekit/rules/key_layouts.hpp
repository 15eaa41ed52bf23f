// Kᵀ as the scaled dot-product attention rules find it: transposed from BNSH or BSNH, through the
// dynamo exporter's 3-D detour, merged into the batch axis, pre-transposed (any [B, N, H, L]
// tensor), or built from grouped key/value heads by repeat_kv; and K in BNSH again for the op.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "decoder_cache.hpp"
#include "fused_ops.hpp"
#include "fusekit/graph/facts.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"
#include "heads_in_batch.hpp"

namespace fusekit::rules::sdpa {

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

inline constexpr auto k_transposed = capture<"kt_value">(any_of(
    op<"Transpose">(
        any_of(capture<"k_bnsh">(repeated<"k_grouped">(k_source)), capture<"k_bnsh">(k_source)))
        .attr<"perm">(ints(0, 1, 3, 2)),
    op<"Transpose">(capture<"k_bsnh">).attr<"perm">(ints(0, 2, 3, 1)), k_detour, k_detour_repeated,
    op<"Transpose">(heads_merged<"k_view">(capture<"k_bnsh">(k_source)))
        .attr<"perm">(ints(0, 2, 1)),
    op<"Transpose">(capture<"k_merged">).attr<"perm">(ints(0, 2, 1)), capture<"kt">));

// kᵀ as the QKᵀ MatMul reads it, before a scale factor and the block's Casts.
template <class M>
value_id key_transposed(const M& m) {
  return get<"kt_value">(m);
}

// ONNX Runtime's Attention checks a mask's heads against the key/value heads, where the spec
// broadcasts it over the query heads: a mask with a row per query head needs as many key/value
// heads, so the op reads the repeated ones.
inline bool mask_per_query_head(const fused::attention_call& c) {
  if (!c.has_bias || !c.bias_dims || c.bias_dims->size() < 3) return false;
  return !(*c.bias_dims)[c.bias_dims->size() - 3].is_constant(1);
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
  return e.op("Transpose", {e.value(key_transposed(m))},
              {{"perm", std::vector<std::int64_t>{0, 1, 3, 2}}});
}

// k's [B, L, N·H] form where the model splits k's heads from one (fused::three_d_of), else no_id.
template <class M>
value_id key_three_d(const graph& g, const M& m) {
  if (has<"k_bnsh">(m)) return fused::three_d_of(g, get<"k_bnsh">(m));
  if (has<"k_merged">(m)) return fused::three_d_of(g, unmerged(g, get<"k_merged">(m)));
  if (has<"k_flat">(m)) return fused::three_d_of(g, get<"k_flat">(m));
  if (has<"k_bsnh">(m)) return fused::heads_split_from(g, get<"k_bsnh">(m));
  return no_id;
}

// Key/value heads [B, Nkv, L, H] repeated in a row to q's N, as repeat_kv repeats them, for
// MultiHeadAttention's one head count: Unsqueeze(2) → Expand(1, 1, N / Nkv, 1, 1) →
// Reshape(B, N, L, H).
inline std::string repeat_heads(const graph& g, rewrite::emitter& e, const std::string& x,
                                value_id q, const sym& kv_heads) {
  const facts& f = facts_of(g);
  const std::int64_t heads = *f.dim_of(q, 1)->constant(), groups = heads / *kv_heads.constant();
  const std::string u = fused::unsqueezed(g, e, x, {2});
  const std::string repeated = e.op("Expand", {u, e.ints({1, 1, groups, 1, 1})});
  const std::string shape =
      e.op("Concat", {e.ints({0, heads, -1}), dim_tensor(e, *f.dim_of(q, 3), e.value(q), 3)},
           {{"axis", 0}});
  return e.op("Reshape", {repeated, shape});
}

}  // namespace fusekit::rules::sdpa
