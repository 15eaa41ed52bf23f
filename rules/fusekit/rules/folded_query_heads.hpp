// Query heads folded into the query axis, the scaled dot-product attention rules' form of a
// grouped decode step as transformers 5 writes it outside dynamo: q [B, N, 1, H] → Reshape
// [B, Nkv, G, H], multiplied with k and v of Nkv heads, and the product unfolded back. q is read
// unfolded, and k and v as the grouped heads the fused ops take.
#pragma once

#include "fusekit/graph/facts.hpp"
#include "fusekit/pattern/pattern.hpp"

namespace fusekit::rules::sdpa {

using namespace pattern;

// With one query the fold keeps every element where row-major order puts it, query head n at
// (n / G, n % G): the products are grouped attention of q [B, N, 1, H], query head n reading
// key/value head n / G, as the fused ops' grouped heads do (that the fold's Nkv is k's and v's
// is the guard's to prove: packed_refused).
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

}  // namespace fusekit::rules::sdpa
