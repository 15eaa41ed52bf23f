// A Concat of a Concat along the same axis is one Concat of all their inputs:
//
//   Concat(axis k)(Concat(axis k)(y₁ … yₙ), b) ── z   ==>   Concat(axis k)(y₁ … yₙ, b) ── z
//   Concat(axis k)(a, Concat(axis k)(y₁ … yₙ)) ── z   ==>   Concat(axis k)(a, y₁ … yₙ) ── z
//
// Joining along one axis is associative: the inner's inputs take its place in the outer's, in
// their order. The axes are the same where both attributes are, or where they name one axis of
// the proven rank (-1 and 3 of a 4-D z). The inner may not have other readers (it would stay, and
// nothing would be saved). What exporters write for a rotation's halves joined, then joined to the
// rest of the head (Mochi, Helios), and for DeepSeek's rotated and plain parts of each head. A
// Concat of more than two inputs whose inner is not first or last is left as it is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fusekit/graph/facts.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"
#include "selfcheck_inputs.hpp"

namespace fusekit::rules {
using namespace pattern;

namespace concats {

// Whether input `Slot` of the Concat n is a Concat along n's axis.
template <std::size_t Slot>
bool joins_along_the_same_axis(const graph& g, node_id n) {
  const value_id in = g.input(n, Slot);
  const node_id inner = in == no_id ? no_id : g.producer(in);
  if (inner == no_id || g.op_type(inner) != "Concat" || !g.domain(inner).empty()) return false;
  const auto outer_axis = g.attribute_int(n, "axis"), inner_axis = g.attribute_int(inner, "axis");
  if (!outer_axis || !inner_axis) return false;
  if (*outer_axis == *inner_axis) return true;
  const auto rank = facts_of(g).rank(g.output(n, 0));
  if (!rank) return false;
  const auto normal = [&](std::int64_t axis) {
    return axis < 0 ? axis + std::int64_t(*rank) : axis;
  };
  return normal(*outer_axis) == normal(*inner_axis);
}

}  // namespace concats

struct concat_folding {
  static constexpr std::string_view name = "concat-folding";
  static constexpr int priority = -1;
  static constexpr auto inner = op<"Concat">(all<"ys">);
  static constexpr auto pattern = any_of(
      op<"Concat">(inner, capture<"b">)
          .where("along the axis of its input 0's Concat", concats::joins_along_the_same_axis<0>),
      op<"Concat">(capture<"a">, inner)
          .where("along the axis of its input 1's Concat", concats::joins_along_the_same_axis<1>));

  // The other input a vector, as selfcheck writes the inner's.
  static constexpr auto sources =
      pattern::sources(source<"a">(written<selfcheck_inputs::vector_of<3>>),
                       source<"b">(written<selfcheck_inputs::vector_of<3>>));

  static bool resembles(const graph&, node_id) { return false; }

  static void emit(const graph&, const auto& m, rewrite::emitter& e) {
    std::vector<std::string> inputs;
    if (has<"a">(m)) inputs.push_back(e.value(get<"a">(m)));
    for (value_id y : get<"ys">(m)) inputs.push_back(e.value(y));
    if (has<"b">(m)) inputs.push_back(e.value(get<"b">(m)));
    e.replace_root(e.copy(m.root(), std::move(inputs)));
  }
};

}  // namespace fusekit::rules
