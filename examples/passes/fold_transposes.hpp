// Two Transposes in a row are one, or none where they undo each other: the readers of the second
// then read x itself, with no node in between.
//
//   x ── Transpose(p) ── Transpose(q) ── y   ==>   x ── Transpose(p∘q) ── y,  or  x ── y
//
// The first may have other readers: it stays for them. A perm left to its default (the axes
// reversed) needs the rank proven.
#pragma once

#include "fusekit/graph/permutation.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"
#include "fusekit/rewrite/rule.hpp"

namespace passes {
using namespace fusekit::pattern;

struct fold_transposes {
  static constexpr std::string_view name = "fold-transposes";
  static constexpr auto pattern =
      op<"Transpose">(op<"Transpose">(capture<"x">).bind<"first">().multi_use());

  static fusekit::rewrite::verdict guard(const fusekit::graph& g, const auto& m) {
    if (fusekit::transpose_perm(g, get<"first">(m))) return fusekit::rewrite::verdict::yes();
    return fusekit::rewrite::verdict::no(g.describe(get<"first">(m)) +
                                         " has no perm and its input no proven rank");
  }

  static void emit(const fusekit::graph& g, const auto& m, fusekit::rewrite::emitter& e) {
    const auto perm = fusekit::compose(*fusekit::transpose_perm(g, get<"first">(m)),
                                       *fusekit::transpose_perm(g, m.root()));
    e.replace_root(fusekit::is_identity(perm)
                       ? e.value(get<"x">(m))
                       : e.copy(m.root(), {e.value(get<"x">(m))}, {{"perm", perm}}));
  }
};

}  // namespace passes
