// Two Slices in a row on different axes are one Slice of both:
//
//   x ── Slice(s₁, e₁, axes₁, steps₁) ── Slice(s₂, e₂, axes₂, steps₂) ── y
//   ==>   x ── Slice(s₁ s₂, e₁ e₂, axes₁ axes₂, steps₁ steps₂) ── y
//
// A Slice keeps x's rank and numbers its axes as x does, and a Slice on one axis leaves every
// other as it was: where no axis is sliced by both, the second's bounds read the same elements
// of x as of the first's output. Every start, end, axis and step is proven (a constant, or what
// the facts fold), axes omitted are the first ones, steps omitted are 1, and a negative axis
// counts from x's proven rank. The first may have other readers: it stays for them. What
// TorchScript and dynamo write for `x[:, 0::2, 0::2]` (Swin's and LeViT's patch merging, GPT-2's
// causal mask `bias[:, :, a:b, :c]`). Slices of the same axis are left as they are.
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

inline std::optional<std::vector<std::int64_t>> proven_ints(const graph& g, value_id v) {
  const content_fact& c = facts_of(g).content(v);
  if (!c.known || c.real) return std::nullopt;
  std::vector<std::int64_t> out;
  for (const auto& e : c.ints) {
    const auto k = e.constant();
    if (!k) return std::nullopt;
    out.push_back(*k);
  }
  return out;
}

inline std::optional<bounds> bounds_of(const graph& g, node_id slice) {
  if (g.op_type(slice) != "Slice" || !g.domain(slice).empty() || g.inputs(slice).size() < 3)
    return std::nullopt;
  bounds b;
  const auto starts = proven_ints(g, g.input(slice, 1)), ends = proven_ints(g, g.input(slice, 2));
  if (!starts || !ends || starts->size() != ends->size()) return std::nullopt;
  b.starts = *starts;
  b.ends = *ends;
  const std::size_t n = starts->size();
  for (std::size_t i = 0; i < n; ++i) b.axes.push_back(std::int64_t(i));
  b.steps.assign(n, 1);
  if (g.input(slice, 3) != no_id) {
    const auto axes = proven_ints(g, g.input(slice, 3));
    if (!axes || axes->size() != n) return std::nullopt;
    b.axes = *axes;
  }
  if (g.input(slice, 4) != no_id) {
    const auto steps = proven_ints(g, g.input(slice, 4));
    if (!steps || steps->size() != n) return std::nullopt;
    b.steps = *steps;
  }
  const auto rank = facts_of(g).rank(g.input(slice, 0));
  for (std::int64_t& axis : b.axes) {
    if (axis < 0 && rank) axis += std::int64_t(*rank);
    if (axis < 0 || (rank && axis >= std::int64_t(*rank))) return std::nullopt;
  }
  return b;
}

// Both Slices' bounds as one Slice's, where the second reads the first and no axis is sliced by
// both.
inline std::optional<bounds> merged(const graph& g, node_id second) {
  const value_id in = g.input(second, 0);
  const node_id first = in == no_id ? no_id : g.producer(in);
  if (first == no_id) return std::nullopt;
  auto a = bounds_of(g, first);
  const auto b = bounds_of(g, second);
  if (!a || !b) return std::nullopt;
  for (std::int64_t axis : b->axes)
    if (std::find(a->axes.begin(), a->axes.end(), axis) != a->axes.end()) return std::nullopt;
  a->starts.insert(a->starts.end(), b->starts.begin(), b->starts.end());
  a->ends.insert(a->ends.end(), b->ends.begin(), b->ends.end());
  a->axes.insert(a->axes.end(), b->axes.begin(), b->axes.end());
  a->steps.insert(a->steps.end(), b->steps.begin(), b->steps.end());
  return a;
}

// `values` as an int64 vector for the emitter, which writes numbers through a double: a bound
// past ±2⁶² (INT64_MAX for "to the end") is clamped to it, which every dim lies within.
inline std::vector<double> written(const std::vector<std::int64_t>& values) {
  constexpr std::int64_t far = std::int64_t(1) << 62;
  std::vector<double> out;
  for (std::int64_t v : values) out.push_back(double(std::clamp(v, -far, far)));
  return out;
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
          .where("of other axes than the Slice it reads",
                 [](const graph& g, node_id n) { return slices::merged(g, n).has_value(); });

  // Each Slice one axis of its own, from 0 to 1 step 1: the first axis 1, the second axis 2; an
  // omitted one is axis 0, which both omitted share.
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
    const auto vector = [&](const std::vector<std::int64_t>& v) {
      return e.constant(dtype::int64, {std::int64_t(v.size())}, slices::written(v));
    };
    e.replace_root(e.op("Slice", {e.value(get<"x">(m)), vector(b.starts), vector(b.ends),
                                  vector(b.axes), vector(b.steps)}));
  }
};

}  // namespace fusekit::rules
