// Where else the dims of a value can be read, for a node that reads only them (Shape, Size).
//
// A fusion removes the nodes it matched; a Shape or Size outside the match that reads one of their
// outputs needs nothing of it but its dims. Those are proven by the facts to be numbers (the reader
// becomes a constant), or each a number or a dim of one value the match reads from outside, which
// stays (the reader then reads that value and picks its dims in order, the numbers between them),
// or such a dim plus a number: a decode step's keys, the past and one new, are past + 1 long.
// Anything else leaves the reader where it is, and the value it reads with it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "fusekit/graph/facts.hpp"
#include "fusekit/graph/graph.hpp"

namespace fusekit {

struct shape_source {
  static constexpr std::size_t max_rank = 8;
  value_id from = no_id;  // no_id: the dims are numbers, in `dims`
  std::size_t rank = 0;
  std::array<std::int64_t, max_rank> dims{};  // the numbers, when `from` is no_id
  // dim i of the value is dim order[i] of `from` plus offset[i], or where order[i] is -1 the
  // number dims[i]
  std::array<std::int64_t, max_rank> order{};
  std::array<std::int64_t, max_rank> offset{};
  bool mixed() const {
    for (std::size_t i = 0; from != no_id && i < rank; ++i)
      if (order[i] < 0 || offset[i] != 0) return true;
    return false;
  }
};

// A node that reads only the dims of its input 0: ai.onnx Shape and Size.
inline bool reads_only_dims(const graph& g, node_id n) {
  const std::string_view op = g.op_type(n);
  return g.domain(n).empty() && (op == "Shape" || op == "Size");
}

// Where `reader` (a Shape or Size) can read the dims of x once the nodes that `is_matched` names
// are gone: numbers, or a value some matched node reads from outside the match (`each_matched`
// calls its argument with every matched node) that is computed before `reader` and whose dims are
// x's in some order, each plus a number where no dim is x's own. Allocates only to subtract a
// dim of several terms from another.
template <class IsMatched, class EachMatched>
std::optional<shape_source> shape_source_of(const graph& g, value_id x, node_id reader,
                                            const IsMatched& is_matched,
                                            const EachMatched& each_matched) {
  const facts& f = facts_of(g);
  const shape_fact& s = f.shape(x);
  if (!s.known || s.rank() > shape_source::max_rank) return std::nullopt;
  shape_source out;
  out.rank = s.rank();
  bool numbers = true;
  for (std::size_t i = 0; i < s.rank(); ++i) {
    const auto k = s.dims[i].constant();
    numbers = numbers && k.has_value();
    if (k) out.dims[i] = *k;
  }
  if (numbers) return out;
  std::optional<shape_source> found;
  // The inputs of x's own producer first: the value it reorders, most often. A value holding all
  // of x's dims first, then one holding those that are no numbers.
  auto try_inputs_of = [&](node_id m, bool numbers_between) {
    for (value_id y : g.inputs(m)) {
      const auto y_rank = f.rank(y);
      if (found || y == no_id || !y_rank || *y_rank > shape_source::max_rank ||
          (!numbers_between && *y_rank != s.rank()))
        continue;
      const node_id p = g.producer(y);
      if (p != no_id &&
          (is_matched(p) || g.topological_position(p) > g.topological_position(reader)))
        continue;
      // Each dim of x to a dim of y proven equal to it, each of y's used once; or a number; or
      // (numbers between) a dim of y plus a number.
      std::array<bool, shape_source::max_rank> used{};
      shape_source candidate = out;
      bool all = true;
      for (std::size_t i = 0; i < s.rank() && all; ++i) {
        all = false;
        for (std::size_t j = 0; j < *y_rank && !all; ++j)
          if (!used[j] && equal(s.dims[i], *f.dim_of(y, int(j))) == truth::yes) {
            used[j] = true;
            candidate.order[i] = std::int64_t(j);
            all = true;
          }
        if (!all && numbers_between && s.dims[i].constant()) {
          candidate.order[i] = -1;
          all = true;
        }
        for (std::size_t j = 0; j < *y_rank && !all && numbers_between; ++j) {
          const sym& d = *f.dim_of(y, int(j));
          if (used[j] || d.constant() || s.dims[i].term_count() < 2) continue;
          if (const auto k = (s.dims[i] - d).constant()) {
            used[j] = true;
            candidate.order[i] = std::int64_t(j);
            candidate.offset[i] = *k;
            all = true;
          }
        }
      }
      if (!all) continue;
      candidate.from = y;
      found = candidate;
    }
  };
  for (const bool numbers_between : {false, true}) {
    auto visit = [&](node_id m) { try_inputs_of(m, numbers_between); };
    if (const node_id p = g.producer(x); p != no_id && is_matched(p)) visit(p);
    each_matched(visit);
  }
  return found;
}

}  // namespace fusekit
