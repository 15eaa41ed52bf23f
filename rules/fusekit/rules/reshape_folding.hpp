// A Reshape of a view is a Reshape of what the view read: the readers of the second then read one
// Reshape of x, and the view stays only for its other readers.
//
//   x ── Reshape | Flatten | Squeeze | Unsqueeze ── v ── Reshape(shape) ── y
//   ==>   x ── Reshape(shape) ── y
//
// Views keep the elements in their order and only name other dims, so y holds x's elements in
// x's order whatever v's dims were. The target depends on v in one place: an element 0, with
// allowzero 0, copies v's dim at its index. Each element of the target is therefore proven
// nonzero, or dim i of x proven v's dim i (then the copy is the same); a target of unknown
// length, or an element that may be 0 where the dims are not proven equal, is refused. What
// exporters write around a view they cannot see through (a head split of the merged heads a
// fusion wrote), and TorchScript's Flatten before a Reshape.
//
// A Reshape whose target is computed (reshape-target-folding) is given a constant one, wherever
// the facts prove what each element of the target gives:
//
//   x [B, S, 32] ── Shape ── Gather(0) ── Unsqueeze ──┐
//   x [B, S, 32] ── Shape ── Gather(1) ── Unsqueeze ── Concat(·, ·, 4, 8) ── Reshape(x, ·)
//   ==>   x ── Reshape(x, [0, 0, 4, 8])
//
// An element proven a number is written as it is; one proven x's dim at its index, with
// allowzero 0, as the 0 that copies it; at most one other as -1, where every other element is
// a positive number (a 0 that copies a dim of size 0 would leave -1 nothing to solve). The shape
// computation then goes where nothing else reads it: what TorchScript writes for every view of a
// dynamic batch or sequence, once per layer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fusekit/graph/facts.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"
#include "fusekit/rewrite/rule.hpp"
#include "selfcheck_inputs.hpp"

namespace fusekit::rules {
using namespace pattern;

struct reshape_folding {
  static constexpr std::string_view name = "reshape-folding";
  // Below every fusion, as the other folds are: a fusion that reads both takes them.
  static constexpr int priority = -1;
  static constexpr auto x = capture<"x">;
  static constexpr auto view = [](auto node) { return node.template bind<"view">().multi_use(); };
  static constexpr auto pattern =
      op<"Reshape">(any_of(view(op<"Reshape">(x, capture<"inner">)), view(op<"Flatten">(x)),
                           view(op<"Unsqueeze">(x, capture<"axes">)),
                           view(op<"Squeeze">(x, maybe(capture<"squeezed">)))),
                    capture<"shape">);
  static constexpr auto sources =
      pattern::sources(source<"inner">(written<selfcheck_inputs::dims_of_x>),
                       source<"axes">(written<selfcheck_inputs::int64_vector<0>>),
                       source<"squeezed">(written<selfcheck_inputs::int64_vector<0>>),
                       source<"shape">(written<selfcheck_inputs::int64_vector<-1>>));

  static bool resembles(const graph&, node_id) { return false; }

  static rewrite::verdict guard(const graph& g, const auto& m) {
    const facts& f = facts_of(g);
    const node_id root = m.root();
    if (g.attribute_int(root, "allowzero").value_or(0) != 0) return rewrite::verdict::yes();
    const value_id shape = g.input(root, 1), v = g.output(get<"view">(m), 0);
    const value_id in = g.input(get<"view">(m), 0);
    const content_fact& c = f.content(shape);
    std::optional<std::int64_t> length;
    if (c.known && !c.real)
      length = std::int64_t(c.ints.size());
    else if (const sym* d = f.dim_of(shape, 0); d && f.rank(shape) == 1)
      length = d->constant();
    if (!length)
      return rewrite::verdict::no("the length of the target shape of " + g.describe(root) +
                                  " is not proven");
    for (int i = 0; i < int(*length); ++i) {
      const bool nonzero = c.known && !c.real && c.ints[std::size_t(i)].constant() &&
                           *c.ints[std::size_t(i)].constant() != 0;
      if (nonzero || f.same_dim(in, i, v, i) == truth::yes) continue;
      return rewrite::verdict::no(
          "element " + std::to_string(i) + " of the target shape of " + g.describe(root) +
          " may be 0, which copies dim " + std::to_string(i) + " of '" + std::string(g.name(v)) +
          "', not proven dim " + std::to_string(i) + " of '" + std::string(g.name(in)) + "'");
    }
    return rewrite::verdict::yes();
  }

  static void emit(const graph&, const auto& m, rewrite::emitter& e) {
    e.replace_root(e.copy(m.root(), {e.value(get<"x">(m)), e.value(get<"shape">(m))}));
  }
};

inline bool computed(const graph& g, value_id v) { return g.constant_tensor(v) == nullptr; }

struct reshape_target_folding {
  static constexpr std::string_view name = "reshape-target-folding";
  static constexpr int priority = -1;

  // The constant target, where one states every element: a proven number as it is, x's dim at
  // its index as 0, one other element as -1 where every other is a positive number.
  static std::optional<std::vector<std::int64_t>> target(const graph& g, node_id root) {
    const facts& f = facts_of(g);
    const content_fact& c = f.content(g.input(root, 1));
    if (!c.known || c.real) return std::nullopt;
    const bool copies = g.attribute_int(root, "allowzero").value_or(0) == 0;
    const shape_fact& x = f.shape(g.input(root, 0));
    std::vector<std::int64_t> out;
    std::optional<std::size_t> solved;  // the element that is -1
    bool introduced = false;            // where the model's target had no -1
    for (std::size_t i = 0; i < c.ints.size(); ++i) {
      if (const auto k = c.ints[i].constant()) {
        // Two -1 are a Reshape the model could not run: no fold.
        if (*k == -1 && std::exchange(solved, i)) return std::nullopt;
        out.push_back(*k);
      } else if (copies && x.known && i < x.rank() && equal(c.ints[i], x.dims[i]) == truth::yes) {
        out.push_back(0);
      } else if (solved) {
        return std::nullopt;
      } else {
        solved = i;
        introduced = true;
        out.push_back(-1);
      }
    }
    if (introduced)
      for (std::size_t i = 0; i < out.size(); ++i)
        if (i != *solved && out[i] <= 0) return std::nullopt;
    return out;
  }

  // No near miss, as for the eliminations: most computed targets hold dims no constant states.
  static constexpr auto pattern =
      op<"Reshape">(capture<"x">, capture<"shape">.where("computed, not a constant", computed))
          .where("of a target a constant states",
                 [](const graph& g, node_id n) { return target(g, n).has_value(); });
  // A Shape of x: each element x's dim at its index, which the facts prove however x's dims are.
  static constexpr auto sources = pattern::sources(source<"shape">(op<"Shape">(capture<"x">)));

  static bool resembles(const graph&, node_id) { return false; }

  static void emit(const graph& g, const auto& m, rewrite::emitter& e) {
    const std::vector<std::int64_t> shape = *target(g, m.root());
    e.replace_root(e.copy(m.root(), {e.value(get<"x">(m)), e.ints(shape)}));
  }
};

}  // namespace fusekit::rules
