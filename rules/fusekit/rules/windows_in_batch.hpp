// Windows in the batch axis, Swin's shifted windows (torchvision's and transformers' Swin): the
// windows of every image are one batch, the scores [B·W, N, S, S]; a shifted block views them as
// [B, W, N, S, S], adds a mask per window [1, W, 1, S, S], and views the sum back to [B·W, …] for
// Softmax. Read so, the mask is one more term of the fused op's bias, merged as the scores are:
// [W, 1, S, S] where B is 1, expanded over [B, W] first where it repeats for every image.
//
// The views are the bmm form's too (heads_in_batch.hpp), 3-D scores split into batch and heads:
// in both, one Reshape splits the scores' first axis in two and another merges the two back,
// every other dim kept, which keeps each element where row-major order put it. That the merged
// axes are q's own batch and heads is heads_in_batch_refused's to prove.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fused_ops.hpp"
#include "fusekit/graph/facts.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"
#include "heads_in_batch.hpp"

namespace fusekit::rules::sdpa {

using namespace pattern;

// The scores are 3-D (heads in the batch) or 4-D (windows in the batch).
inline bool splits_first_axis(const graph& g, node_id reshape) {
  const facts& f = facts_of(g);
  const value_id scores = g.input(reshape, 0);
  return (f.rank(scores) == 3u || f.rank(scores) == 4u) &&
         merges_first_two_axes(f, g.output(reshape, 0), scores);
}
inline bool merges_first_axes(const graph& g, node_id reshape) {
  const facts& f = facts_of(g);
  const value_id scores = g.output(reshape, 0);
  return (f.rank(scores) == 3u || f.rank(scores) == 4u) &&
         merges_first_two_axes(f, g.input(reshape, 0), scores);
}
template <fixed_string View, class P>
constexpr auto first_axis_split(P p) {
  return op<"Reshape">(p, any())
      .where("the first axis split in two", splits_first_axis)
      .template bind<View>();
}
template <fixed_string View, class P>
constexpr auto first_axes_merged(P p) {
  return op<"Reshape">(p, any())
      .where("the first two axes merged into one", merges_first_axes)
      .template bind<View>();
}

// A term added to the scores split into windows: `sum`, the 5-D value it is added into, has
// [B, W] for its first two axes, and the Reshape after proves B·W is q's batch. A term of rank 3
// or less broadcasts over [N, S, L] alike in 5-D and 4-D, and needs no regrouping.
inline bool windowed(const facts& f, value_id sum, const std::optional<std::vector<sym>>& dims) {
  return f.rank(sum) == 5u && dims && dims->size() >= 4;
}

// A windowed term as the op reads it: [B·W or 1, heads or 1, S or 1, L or 1]. One over neither B
// nor W merges to [1, …]; one that broadcasts over either (one mask for every image) is expanded
// over both first, which needs each length at run time: a constant, the term's own, or q's batch
// over the other's. Empty where neither is to be had.
struct windowed_term {
  std::vector<sym> dims;     // the term's own dims, 5-D
  std::vector<sym> op_dims;  // as the op reads it, 4-D
  bool expanded = false;
};
inline bool window_axis_readable(const facts& f, const std::vector<sym>& own, value_id sum,
                                 int axis) {
  const sym& w = *f.dim_of(sum, axis);
  return w.constant().has_value() || equal(own[std::size_t(axis)], w) == truth::yes;
}
inline std::optional<windowed_term> windowed_dims(const facts& f, std::vector<sym> own,
                                                  value_id sum, value_id q) {
  own.insert(own.begin(), 5 - own.size(), sym::constant(1));
  windowed_term t{.dims = own, .op_dims = {sym::constant(1), own[2], own[3], own[4]}};
  if (own[0].is_constant(1) && own[1].is_constant(1)) return t;
  t.op_dims[0] = *f.dim_of(q, 0);
  t.expanded = equal(own[0], *f.dim_of(sum, 0)) != truth::yes ||
               equal(own[1], *f.dim_of(sum, 1)) != truth::yes;
  if (t.expanded && !window_axis_readable(f, own, sum, 0) && !window_axis_readable(f, own, sum, 1))
    return std::nullopt;
  return t;
}

// The windowed term `term` (of dims `own`) merged as the op reads it (windowed_dims).
inline std::string windows_merged(const graph& g, rewrite::emitter& e, std::string term,
                                  const std::vector<sym>& own, value_id sum, value_id q) {
  const facts& f = facts_of(g);
  const windowed_term t = *windowed_dims(f, own, sum, q);
  if (own.size() < 5) {
    std::vector<std::int64_t> front(5 - own.size());
    for (std::size_t i = 0; i < front.size(); ++i) front[i] = std::int64_t(i);
    term = fused::unsqueezed(g, e, term, front);
  }
  const std::string batch = dim_tensor(e, *f.dim_of(q, 0), e.value(q), 0);
  if (t.expanded) {
    const auto length = [&](int axis) {
      if (auto k = f.dim_of(sum, axis)->constant()) return e.ints({*k});
      return window_axis_readable(f, t.dims, sum, axis) ? fused::run_time_dim(e, term, axis)
                                                        : std::string();
    };
    std::string images = length(0), windows = length(1);
    if (images.empty()) images = e.op("Div", {batch, windows});
    if (windows.empty()) windows = e.op("Div", {batch, images});
    term =
        e.op("Expand", {term, e.op("Concat", {images, windows, e.ints({1, 1, 1})}, {{"axis", 0}})});
  }
  const auto kept = [&](int axis) {
    if (auto k = t.dims[std::size_t(axis)].constant()) return e.ints({*k});
    return fused::run_time_dim(e, term, axis);
  };
  const std::string lead = t.op_dims[0].is_constant(1) ? e.ints({1}) : batch;
  return e.op("Reshape", {term, e.op("Concat", {lead, kept(2), kept(3), kept(4)}, {{"axis", 0}})});
}

}  // namespace fusekit::rules::sdpa
