// Heads in the batch axis, the scaled dot-product attention rules' bmm form (Bloom's baddbmm;
// older transformers' eager BART, Whisper, OPT, CLIP): the Reshapes that merge batch and heads
// into one axis or split them back, q, k and v read through those merges, and the guard's proof
// that every such regrouping is of q's own batch and heads.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "folded_query_heads.hpp"
#include "fused_ops.hpp"
#include "fusekit/graph/facts.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"
#include "fusekit/rewrite/rule.hpp"

namespace fusekit::rules::sdpa {

using namespace pattern;

// Heads in the batch axis: attention written with bmm (Bloom's baddbmm; older transformers' eager
// BART, Whisper, OPT, CLIP) merges q, k and v from BNSH to [B·N, S, H], multiplies in 3-D, and may
// split the scores back to [B, N, S, L] around the mask and merge them again. A Reshape that only
// merges the two leading dims of a 4-D tensor, or only splits the first of a 3-D one, keeps every
// element where row-major order puts it; that each regroups q's own batch and heads is the
// guard's to prove (heads_in_batch_refused).
inline bool merges_first_two_axes(const facts& f, value_id wide, value_id narrow) {
  const auto r = f.rank(narrow);
  if (!r || *r < 2u || f.rank(wide) != *r + 1 ||
      equal(*f.dim_of(narrow, 0), *f.dim_of(wide, 0) * *f.dim_of(wide, 1)) != truth::yes)
    return false;
  for (int axis = 1; axis < int(*r); ++axis)
    if (f.same_dim(narrow, axis, wide, axis + 1) != truth::yes) return false;
  return true;
}
inline bool merges_leading_dims(const facts& f, value_id four, value_id three) {
  return f.rank(three) == 3u && merges_first_two_axes(f, four, three);
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
// What the guard reads beyond the pattern (the rules' sources, for selfcheck): q and v as given,
// or merged from BNSH by a Reshape outside the match; k_merged merged so always (as given it
// would be no k the op can read). The merges of q and v are bound, for the rules' examples.
inline constexpr auto merged_outside =
    op<"Reshape">(any(), any())
        .where("batch and heads merged into one axis", merges_batch_and_heads);
inline constexpr auto merges_read =
    sources(source<"q">(any_of(any(), merged_outside.bind<"q_merge">())),
            source<"k_merged">(merged_outside),
            source<"v">(any_of(any(), merged_outside.bind<"v_merge">())));

// q unfolded where its heads are folded into the query axis (folded_query_heads.hpp).
template <class M>
value_id query(const graph& g, const M& m) {
  const value_id q = get<"q">(m);
  const node_id packing = packing_of(g, q);
  return packing != no_id ? g.input(packing, 0) : unmerged(g, q);
}
template <class M>
value_id values(const graph& g, const M& m) {
  return unmerged(g, get<"v">(m));
}
template <class M>
bool heads_in_batch(const graph& g, const M& m) {
  return merge_of(g, get<"q">(m)) != no_id;
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

// One dim of a tensor as a one-element int64 tensor: a constant where the facts know it.
inline std::string dim_tensor(rewrite::emitter& e, const sym& d, const std::string& x, int axis) {
  if (auto k = d.constant()) return e.ints({*k});
  return fused::run_time_dim(e, x, axis);
}

}  // namespace fusekit::rules::sdpa
