// A Concat of a Concat along the same axis is one Concat of all their inputs:
//
//   Concat(axis k)(a₁ … aᵢ, Concat(axis k)(y₁ … yₙ), b₁ … bⱼ) ── z
//     ==>   Concat(axis k)(a₁ … aᵢ, y₁ … yₙ, b₁ … bⱼ) ── z
//
// Joining along one axis is associative: the inner's inputs take its place in the outer's, in
// their order, wherever it stands. The axes are the same where both attributes are, or where they
// name one axis of the proven rank (-1 and 3 of a 4-D z). The inner may not have other readers (it
// would stay, and nothing would be saved). What exporters write for a rotation's halves joined,
// then joined to the rest of the head (Mochi, Helios), and for DeepSeek's rotated and plain parts
// of each head. Of several inner Concats, one folds per pass, the first that holds.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fusekit/graph/facts.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"

namespace fusekit::rules {
using namespace pattern;

namespace concats {

// Whether a reader of the Concat n's output is a Concat along n's axis: the one reader it has
// where the match holds (a reader outside it is the use check's to name).
inline bool joined_along_its_axis(const graph& g, node_id n) {
  const auto inner_axis = g.attribute_int(n, "axis");
  const auto rank = facts_of(g).rank(g.output(n, 0));
  if (!inner_axis) return false;
  const auto normal = [&](std::int64_t axis) {
    return axis < 0 && rank ? axis + std::int64_t(*rank) : axis;
  };
  const auto uses = g.consumers(g.output(n, 0));
  return std::any_of(uses.begin(), uses.end(), [&](const use& u) {
    if (u.is_implicit() || g.op_type(u.node) != "Concat" || !g.domain(u.node).empty()) return false;
    const auto outer_axis = g.attribute_int(u.node, "axis");
    return outer_axis &&
           (*outer_axis == *inner_axis || (rank && normal(*outer_axis) == normal(*inner_axis)));
  });
}

}  // namespace concats

struct concat_folding {
  static constexpr std::string_view name = "concat-folding";
  static constexpr int priority = -1;
  static constexpr auto pattern =
      op<"Concat">(around<"before", "after">(op<"Concat">(all<"ys">).where(
          "joined again along its own axis", concats::joined_along_its_axis)));

  static bool resembles(const graph&, node_id) { return false; }

  static void emit(const graph&, const auto& m, rewrite::emitter& e) {
    std::vector<std::string> inputs;
    for (value_id a : get<"before">(m)) inputs.push_back(e.value(a));
    for (value_id y : get<"ys">(m)) inputs.push_back(e.value(y));
    for (value_id b : get<"after">(m)) inputs.push_back(e.value(b));
    e.replace_root(e.copy(m.root(), std::move(inputs)));
  }
};

}  // namespace fusekit::rules
