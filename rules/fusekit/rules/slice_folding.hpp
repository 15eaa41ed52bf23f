// Two Slices in a row are one Slice:
//
//   x ── Slice(s₁, e₁, axes₁, steps₁) ── Slice(s₂, e₂, axes₂, steps₂) ── y
//   ==>   x ── Slice(s₁ s₂, e₁ e₂, axes₁ axes₂, steps₁ steps₂) ── y       (other axes)
//   ==>   x ── Slice(s₁ + s₂·t₁, …, t₁·t₂) ── y                            (one axis)
//
// A Slice keeps x's rank and numbers its axes as x does, and a Slice on one axis leaves every
// other as it was: where no axis is sliced by both, the second's bounds read the same elements
// of x as of the first's output. On an axis both slice, with steps of 1 or more and x's dim there
// proven a number, the first takes elements s₁ + k·t₁ (k < n₁, its start and count clamped to the
// dim as ONNX does) and the second of those the k = s₂ + j·t₂ (j < n₂): elements s₁ + s₂·t₁ +
// j·t₁·t₂ of x, n₂ of them, one Slice. Every start, end, axis and step is proven (a constant, or
// what the facts fold), axes omitted are the first ones, steps omitted are 1, and a negative axis
// counts from x's proven rank. The first may have other readers: it stays for them. What
// TorchScript and dynamo write for `x[:, 0::2, 0::2]` (Swin's and LeViT's patch merging, GPT-2's
// causal mask `bias[:, :, a:b, :c]`) and for a slice of a slice of one axis. Negative steps on an
// axis both slice are left as they are.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "fusekit/graph/facts.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"
#include "selfcheck_inputs.hpp"

namespace fusekit::rules {
using namespace pattern;

namespace slices {

// A Slice's inputs 1 to 4 as numbers, axes and steps filled in, axes in [0, rank).
struct bounds {
  std::vector<std::int64_t> starts, ends, axes, steps;
};

inline std::optional<bounds> bounds_of(const graph& g, node_id slice) {
  if (g.op_type(slice) != "Slice" || !g.domain(slice).empty() || g.inputs(slice).size() < 3)
    return std::nullopt;
  const facts& f = facts_of(g);
  bounds b;
  const auto starts = f.ints(g.input(slice, 1)), ends = f.ints(g.input(slice, 2));
  if (!starts || !ends || starts->size() != ends->size()) return std::nullopt;
  b.starts = *starts;
  b.ends = *ends;
  const std::size_t n = starts->size();
  for (std::size_t i = 0; i < n; ++i) b.axes.push_back(std::int64_t(i));
  b.steps.assign(n, 1);
  if (g.input(slice, 3) != no_id) {
    const auto axes = f.ints(g.input(slice, 3));
    if (!axes || axes->size() != n) return std::nullopt;
    b.axes = *axes;
  }
  if (g.input(slice, 4) != no_id) {
    const auto steps = f.ints(g.input(slice, 4));
    if (!steps || steps->size() != n) return std::nullopt;
    b.steps = *steps;
  }
  const auto rank = f.rank(g.input(slice, 0));
  for (std::int64_t& axis : b.axes) {
    if (axis < 0 && rank) axis += std::int64_t(*rank);
    if (axis < 0 || (rank && axis >= std::int64_t(*rank))) return std::nullopt;
  }
  return b;
}

// Where a Slice of step t ≥ 1 starts in a dim d, and how many elements it takes: ONNX's clamping.
struct run {
  std::int64_t start, count;
};
inline run clamped(std::int64_t start, std::int64_t end, std::int64_t step, std::int64_t d) {
  const auto in_dim = [d](std::int64_t i) {
    return std::clamp(i < 0 ? i + d : i, std::int64_t{0}, d);
  };
  const std::int64_t s = in_dim(start), e = in_dim(end);
  return {s, e > s ? (e - s - 1) / step + 1 : 0};
}

// One axis's start, end and step.
struct range {
  std::int64_t start, end, step;
};

// `second` of the elements `first` takes of a dim d, as one range of it; both steps 1 or more.
inline range composed(range first, range second, std::int64_t d) {
  const run outer = clamped(first.start, first.end, first.step, d);
  const run inner = clamped(second.start, second.end, second.step, outer.count);
  if (inner.count == 0) return {0, 0, 1};
  // Every element lies in x's dim, so that neither product overflows: start + (count − 1)·step
  // < d, the step read only where count > 1.
  const std::int64_t start = outer.start + inner.start * first.step;
  const std::int64_t step = inner.count > 1 ? first.step * second.step : 1;
  return {start, start + (inner.count - 1) * step + 1, step};
}

// Both Slices' bounds as one Slice's, where the second reads the first: the axes only one slices
// as they were, an axis both slice with steps of 1 or more over a proven dim as one run.
inline std::optional<bounds> merged(const graph& g, node_id second) {
  const value_id in = g.input(second, 0);
  const node_id first = in == no_id ? no_id : g.producer(in);
  if (first == no_id) return std::nullopt;
  auto a = bounds_of(g, first);
  const auto b = bounds_of(g, second);
  if (!a || !b) return std::nullopt;
  for (std::size_t j = 0; j < b->axes.size(); ++j) {
    const auto at = std::find(a->axes.begin(), a->axes.end(), b->axes[j]);
    if (at == a->axes.end()) {
      a->starts.push_back(b->starts[j]);
      a->ends.push_back(b->ends[j]);
      a->axes.push_back(b->axes[j]);
      a->steps.push_back(b->steps[j]);
      continue;
    }
    const std::size_t i = std::size_t(at - a->axes.begin());
    const sym* dim = facts_of(g).dim_of(g.input(first, 0), int(b->axes[j]));
    const auto d = dim ? dim->constant() : std::nullopt;
    const std::int64_t t1 = a->steps[i], t2 = b->steps[j];
    if (!d || t1 < 1 || t2 < 1) return std::nullopt;
    const auto [start, end, step] =
        composed({a->starts[i], a->ends[i], t1}, {b->starts[j], b->ends[j], t2}, *d);
    a->starts[i] = start;
    a->ends[i] = end;
    a->steps[i] = step;
  }
  return a;
}

}  // namespace slices

struct slice_folding {
  static constexpr std::string_view name = "slice-folding";
  static constexpr int priority = -1;
  static constexpr auto pattern =
      op<"Slice">(op<"Slice">(capture<"x">, capture<"s1">, capture<"e1">, maybe(capture<"a1">),
                              maybe(capture<"t1">))
                      .multi_use(),
                  capture<"s2">, capture<"e2">, maybe(capture<"a2">), maybe(capture<"t2">))
          .where(
              "one Slice with the Slice it reads (other axes, or steps of 1 or more along a "
              "proven dim)",
              [](const graph& g, node_id n) { return slices::merged(g, n).has_value(); });

  // Each Slice one axis of its own, from 0 to 1 step 1: the first axis 1, the second axis 2; an
  // omitted one is axis 0, which both omitted share: one range of it.
  static constexpr auto sources =
      pattern::sources(source<"s1">(written<selfcheck_inputs::int64_vector<0>>),
                       source<"e1">(written<selfcheck_inputs::int64_vector<1>>),
                       source<"a1">(written<selfcheck_inputs::int64_vector<1>>),
                       source<"t1">(written<selfcheck_inputs::int64_vector<1>>),
                       source<"s2">(written<selfcheck_inputs::int64_vector<0>>),
                       source<"e2">(written<selfcheck_inputs::int64_vector<1>>),
                       source<"a2">(written<selfcheck_inputs::int64_vector<2>>),
                       source<"t2">(written<selfcheck_inputs::int64_vector<1>>));

  static bool resembles(const graph&, node_id) { return false; }

  static void emit(const graph& g, const auto& m, rewrite::emitter& e) {
    const slices::bounds b = *slices::merged(g, m.root());
    e.replace_root(e.op("Slice", {e.value(get<"x">(m)), e.ints(b.starts), e.ints(b.ends),
                                  e.ints(b.axes), e.ints(b.steps)}));
  }
};

}  // namespace fusekit::rules
