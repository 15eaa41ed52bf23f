// Two Unsqueezes in a row are one, inserting every axis both insert, numbered as the output
// numbers them: the readers of the second then read one Unsqueeze of x.
//
//   x [A, B] ── Unsqueeze(0) ── [1, A, B] ── Unsqueeze(3) ── y [1, A, B, 1]
//   ==>   x ── Unsqueeze(0, 3) ── y
//
// The second's axes count in y's rank, the first's in its own output's; those positions of y
// that the second did not insert are the first's output, in order. Both sets of axes are
// constants (the opset 13 form, axes an input) and x's rank is proven; the first may have other
// readers, and stays for them. What TorchScript writes for `x[None, :, None]` and for a mask
// broadcast to [batch, 1, 1, keys] one axis at a time.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fusekit/graph/facts.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"
#include "fusekit/rewrite/rule.hpp"
#include "selfcheck_inputs.hpp"

namespace fusekit::rules {
using namespace pattern;

namespace unsqueezes {

// The axes input of an Unsqueeze as the facts hold them, each in [0, rank); none where an
// element is unproven, out of range or repeated.
inline std::optional<std::vector<std::int64_t>> axes(const graph& g, node_id n, std::int64_t rank) {
  auto out = facts_of(g).ints(g.input(n, 1));
  if (!out) return std::nullopt;
  for (std::int64_t& k : *out) {
    if (k < -rank || k >= rank) return std::nullopt;
    if (k < 0) k += rank;
  }
  std::sort(out->begin(), out->end());
  if (std::adjacent_find(out->begin(), out->end()) != out->end()) return std::nullopt;
  return out;
}

// The axes of y that the first and the second Unsqueeze insert, for x of rank r.
struct inserted {
  std::vector<std::int64_t> first, second;
};
inline std::optional<inserted> of(const graph& g, node_id first, node_id second) {
  const auto rank = facts_of(g).rank(g.input(first, 0));
  if (!rank) return std::nullopt;
  const auto n1 = facts_of(g).content(g.input(first, 1)).ints.size();
  const auto n2 = facts_of(g).content(g.input(second, 1)).ints.size();
  auto a = axes(g, first, std::int64_t(*rank + n1));
  auto b = axes(g, second, std::int64_t(*rank + n1 + n2));
  if (!a || !b) return std::nullopt;
  return inserted{std::move(*a), std::move(*b)};
}

// Every axis of y either inserts: the second's as they are, the first's at the positions of y
// the second left, which hold the first's output in order.
inline std::vector<std::int64_t> combined(const inserted& axes, std::int64_t output_rank) {
  std::vector<std::int64_t> out = axes.second;
  std::int64_t position = 0;  // in the first's output
  for (std::int64_t i = 0; i < output_rank; ++i) {
    if (std::binary_search(axes.second.begin(), axes.second.end(), i)) continue;
    if (std::binary_search(axes.first.begin(), axes.first.end(), position)) out.push_back(i);
    ++position;
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Whether n, a Squeeze of an Unsqueeze or an Unsqueeze of a Squeeze, puts back or takes away the
// very axes the other took or put: both axes proven and the same within the Squeeze's input's
// rank, which the Unsqueeze's output has too.
inline bool undoes_its_input(const graph& g, node_id n) {
  const value_id in = g.input(n, 0);
  const node_id inner = in == no_id ? no_id : g.producer(in);
  if (inner == no_id || g.inputs(inner).size() < 2 || g.inputs(n).size() < 2) return false;
  const node_id squeeze = g.op_type(n) == "Squeeze" ? n : inner;
  const auto rank = facts_of(g).rank(g.input(squeeze, 0));
  if (!rank) return false;
  const auto a = axes(g, inner, std::int64_t(*rank)), b = axes(g, n, std::int64_t(*rank));
  return a && b && *a == *b;
}

}  // namespace unsqueezes

struct unsqueeze_folding {
  static constexpr std::string_view name = "unsqueeze-folding";
  // Below every fusion, as the other folds are: a fusion that reads both takes them.
  static constexpr int priority = -1;
  static constexpr auto pattern = op<"Unsqueeze">(
      op<"Unsqueeze">(capture<"x">, capture<"first_axes">).bind<"first">().multi_use(),
      capture<"axes">);
  static constexpr auto sources =
      pattern::sources(source<"first_axes">(written<selfcheck_inputs::int64_vector<0>>),
                       source<"axes">(written<selfcheck_inputs::int64_vector<-1>>));

  static bool resembles(const graph&, node_id) { return false; }

  static rewrite::verdict guard(const graph& g, const auto& m) {
    if (!facts_of(g).rank(get<"x">(m)))
      return rewrite::verdict::no("the rank of '" + std::string(g.name(get<"x">(m))) +
                                  "' is not proven");
    if (!unsqueezes::of(g, get<"first">(m), m.root()))
      return rewrite::verdict::no("the axes of " + g.describe(get<"first">(m)) + " or " +
                                  g.describe(m.root()) +
                                  " are not proven distinct numbers within its output's rank");
    return rewrite::verdict::yes();
  }

  static void emit(const graph& g, const auto& m, rewrite::emitter& e) {
    const auto axes = *unsqueezes::of(g, get<"first">(m), m.root());
    const std::int64_t rank =
        std::int64_t(*facts_of(g).rank(get<"x">(m)) + axes.first.size() + axes.second.size());
    const std::vector<std::int64_t> all = unsqueezes::combined(axes, rank);
    e.replace_root(e.copy(m.root(), {e.value(get<"x">(m)), e.ints(all)}));
  }
};

// An Unsqueeze that puts back the axes a Squeeze took, or a Squeeze of the axes an Unsqueeze put
// in, is x itself: its readers read x, with no node in between.
//
//   x ── Squeeze(A) ── Unsqueeze(A) ── y ── readers   ==>   x ── readers
//   x ── Unsqueeze(A) ── Squeeze(A) ── y ── readers   ==>   x ── readers
//
// A counted within the Squeeze's input's proven rank on both sides (opset 13 on, the axes an
// input); the first may have other readers, and stays for them. What exporters write for a
// per-token scale squeezed and broadcast back (F5-TTS's and Flux's float16 exports).
struct squeeze_unsqueeze_elimination {
  static constexpr std::string_view name = "squeeze-unsqueeze-elimination";
  static constexpr int priority = -1;
  static constexpr auto pattern =
      any_of(op<"Unsqueeze">(op<"Squeeze">(capture<"x">, capture<"inner_axes">).multi_use(),
                             capture<"axes">)
                 .forwardable()
                 .where("of the axes the Squeeze took", unsqueezes::undoes_its_input),
             op<"Squeeze">(op<"Unsqueeze">(capture<"x">, capture<"inner_axes">).multi_use(),
                           capture<"axes">)
                 .forwardable()
                 .where("of the axes the Unsqueeze put in", unsqueezes::undoes_its_input));
  // x's last axis 1, which both take away or put back.
  struct last_axis_of_one {
    static auto write(auto& w) { return w.input(w.type(), {2, 3, 1}); }
  };
  static constexpr auto sources =
      pattern::sources(source<"x">(written<last_axis_of_one>),
                       source<"inner_axes">(written<selfcheck_inputs::int64_vector<-1>>),
                       source<"axes">(written<selfcheck_inputs::int64_vector<-1>>));

  static bool resembles(const graph&, node_id) { return false; }

  static void emit(const graph&, const auto& m, rewrite::emitter& e) {
    e.replace_root(e.value(get<"x">(m)));
  }
};

}  // namespace fusekit::rules
