// What attention rules need to know about tensors the model does not annotate: rank and head
// count, read from shapes when declared, else from the Reshape/Transpose chain that made them.
#pragma once

#include <cstdint>
#include <optional>

#include "fusekit/graph/graph.hpp"
#include "fusekit/graph/rank.hpp"

namespace fusekit::rules {

using fusekit::constant_ints;
using fusekit::keeps_layout;
using fusekit::rank_of;

// Heads of a [B, N, S, H] tensor: dim 1 when declared, else N from the head-split
// Transpose(0,2,1,3)(Reshape(x, [.., .., N, H])) that made it.
inline std::optional<std::int64_t> heads_of(const graph& g, value_id v, int depth = 0) {
  if (v == no_id || depth > 16) return std::nullopt;
  const auto& shape = g.shape(v);
  if (shape.known && shape.rank() == 4 && shape.dims[1].is_static()) return shape.dims[1].size;
  const node_id n = g.producer(v);
  if (n == no_id) return std::nullopt;
  if (g.op_type(n) == "Transpose") {
    const auto perm = g.attribute_ints(n, "perm");
    if (!perm || perm->size() != 4) return std::nullopt;
    const value_id in = g.input(n, 0);
    const node_id split = g.producer(in);
    // Output dim 1 is input dim perm[1]: the head count when the input is [B, S, N, H].
    if ((*perm)[1] == 2 && split != no_id && g.op_type(split) == "Reshape")
      if (const auto dims = constant_ints(g, g.input(split, 1));
          dims && dims->size() == 4 && (*dims)[2] > 0)
        return (*dims)[2];
    if ((*perm)[1] == 1) return heads_of(g, in, depth + 1);
    return std::nullopt;
  }
  if (!keeps_layout(g, n)) return std::nullopt;
  // Through element-wise ops: the inputs' head counts, a broadcast 1 aside, must agree.
  std::optional<std::int64_t> heads;
  for (value_id in : g.inputs(n)) {
    const auto h = heads_of(g, in, depth + 1);
    if (!h || *h == 1) continue;
    if (heads && *heads != *h) return std::nullopt;
    heads = h;
  }
  return heads;
}

// Whether dimension i of a and b is declared different, or may broadcast (a declared 1 against
// anything else): MatMul allows that, the fused attention ops do not.
inline bool dims_may_differ(const graph& g, value_id a, value_id b, std::size_t i) {
  const auto& sa = g.shape(a);
  const auto& sb = g.shape(b);
  if (!sa.known || !sb.known || sa.rank() <= i || sb.rank() <= i) return false;
  const dim& x = sa.dims[i];
  const dim& y = sb.dims[i];
  if (x.is_static() && y.is_static()) return x.size != y.size;
  if (x.is_symbolic() && y.is_symbolic()) return x.symbol != y.symbol;
  return (x.is_static() && x.size == 1) || (y.is_static() && y.size == 1);
}

}  // namespace fusekit::rules
