// Two scalar factors in a row are one:
//
//   x ── Mul(a) | Div(a) ── Mul(b) | Div(b) ── y   ==>   x ── Mul(f) ── y,  f = a^±1 · b^±1
//   x ── Div(a) ── Div(b) ── y                    ==>   x ── Div(a · b) ── y
//
// Each factor is a constant of one element, of x's float type; the one written is as well, its
// rank the larger of theirs (all dims 1), so that it broadcasts x to the dims both did. f is
// computed in float64 and rounded once to x's type, where the chain rounded twice: y differs by
// that rounding, as any runtime that reassociates does. The first may not have other readers
// (it would stay, and the fold would save nothing), and the second is read by no Tanh: the
// attention rules read tanh(s / c) · c as a soft cap of c, which a scale folded into the Div
// would hide (Gemma 2 scales its scores, then divides them by the cap). What exporters leave of
// a timestep scaled twice (AuraFlow's 1000·t after a factor) and of T5's relative-position
// buckets.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"

namespace fusekit::rules {
using namespace pattern;

namespace factors {

// Whether a Tanh reads n's output: tanh(s / c) · c is a soft cap, whose c the attention rules
// read as one number with the Mul after the Tanh, and name in their reasons.
inline bool read_by_tanh(const graph& g, node_id n) {
  for (const use& u : g.consumers(g.output(n, 0)))
    if (g.op_type(u.node) == "Tanh") return true;
  return false;
}
inline constexpr auto no_cap = [](const graph& g, node_id n) { return !read_by_tanh(g, n); };

// x by a one-element constant `Factor`: a Mul in either operand order, or a Div of x.
template <fixed_string Factor, class X>
constexpr auto scaled(X x) {
  return any_of(commutative(op<"Mul">(x, constant_scalar<Factor>)),
                op<"Div">(x, constant_scalar<Factor>));
}
// The same, read by no Tanh.
template <fixed_string Factor, class X>
constexpr auto scaled_uncapped(X x) {
  return any_of(commutative(op<"Mul">(x, constant_scalar<Factor>)).where("read by no Tanh", no_cap),
                op<"Div">(x, constant_scalar<Factor>).where("read by no Tanh", no_cap));
}

// The operand of n that is not `other`: n's factor.
inline value_id factor_of(const graph& g, node_id n, value_id other) {
  return g.input(n, 0) == other ? g.input(n, 1) : g.input(n, 0);
}

}  // namespace factors

struct factor_folding {
  static constexpr std::string_view name = "factor-folding";
  static constexpr int priority = -1;
  static constexpr auto x =
      capture<"x">.dtype<dtype::float32, dtype::float16, dtype::float64, dtype::bfloat16>();
  static constexpr auto pattern =
      factors::scaled_uncapped<"b">(capture<"scaled">(factors::scaled<"a">(x)));

  static bool resembles(const graph&, node_id) { return false; }

  static void emit(const graph& g, const auto& m, rewrite::emitter& e) {
    const value_id v = get<"scaled">(m);
    const node_id first = g.producer(v), second = m.root();
    const bool divides_first = g.op_type(first) == "Div",
               divides_second = g.op_type(second) == "Div";
    const double a = get<"a">(m), b = get<"b">(m);
    const auto rank = [&](value_id c) { return g.constant_tensor(c)->dims_size(); };
    const int r = std::max(rank(factors::factor_of(g, first, get<"x">(m))),
                           rank(factors::factor_of(g, second, v)));
    const std::string x = e.value(get<"x">(m));
    const dtype type = g.type(get<"x">(m));
    const std::vector<std::int64_t> ones(std::size_t(r), 1);
    if (divides_first && divides_second) {
      e.replace_root(e.op("Div", {x, e.constant(type, ones, {a * b})}));
      return;
    }
    const double f = (divides_first ? 1 / a : a) * (divides_second ? 1 / b : b);
    e.replace_root(e.op("Mul", {x, e.constant(type, ones, {f})}));
  }
};

}  // namespace fusekit::rules
