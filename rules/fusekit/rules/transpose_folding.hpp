// Two Transposes in a row are one, or none where they undo each other: the readers of the second
// then read x itself, with no node in between.
//
//   x ── Transpose(p) ── Transpose(q) ── y   ==>   x ── Transpose(p∘q) ── y,  or  x ── y
//
// The first may have other readers: it stays for them. A perm left to its default (the axes
// reversed) needs the rank proven. What a fusion leaves where its op takes a layout the model had
// transposed away (LeViT's q, k and v, split in [batch, sequence, heads, size] and transposed to
// BNSH, taken back by MultiHeadAttention), and what exporters write around views.
#pragma once

#include "fusekit/graph/permutation.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"
#include "fusekit/rewrite/rule.hpp"

namespace fusekit::rules {
using namespace pattern;

struct transpose_folding {
  static constexpr std::string_view name = "transpose-folding";
  // Below every fusion, as the other folds are: a fusion that reads both takes them.
  static constexpr int priority = -1;
  static constexpr auto pattern =
      op<"Transpose">(op<"Transpose">(capture<"x">).bind<"first">().multi_use());

  static bool resembles(const graph&, node_id) { return false; }
  static rewrite::verdict guard(const graph& g, const auto& m) {
    const auto first = transpose_perm(g, get<"first">(m)), second = transpose_perm(g, m.root());
    const auto unread = [&](node_id n) {
      return rewrite::verdict::no(g.describe(n) + " has no perm and its input no proven rank");
    };
    if (!first) return unread(get<"first">(m));
    if (!second) return unread(m.root());
    if (first->size() != second->size())
      return rewrite::verdict::no(g.describe(m.root()) + " permutes " +
                                  std::to_string(second->size()) + " axes of the " +
                                  std::to_string(first->size()) + " its input has");
    return rewrite::verdict::yes();
  }

  static void emit(const graph& g, const auto& m, rewrite::emitter& e) {
    const auto perm = compose(*transpose_perm(g, get<"first">(m)), *transpose_perm(g, m.root()));
    e.replace_root(is_identity(perm) ? e.value(get<"x">(m))
                                     : e.copy(m.root(), {e.value(get<"x">(m))}, {{"perm", perm}}));
  }
};

}  // namespace fusekit::rules
