// Proving a mask causal: true exactly where key j ≤ query i over its last two dims [S, L], as
// the exporters build it for SDPA's is_causal and GPT-2's eager attention.
//
//   TorchScript SDPA      Where(Equal(Trilu(Expand(1, [S, L]), upper=0), 0), −inf, 0)
//   dynamo SDPA           Where(Not(Trilu(ones, upper=0)), −inf, zeros)
//   GPT-2 eager, dynamo   a constant lower triangle sliced to [1, 1, S, L]
//
// What a rule may then do with it (the op's own causal form) is the rule's to decide; here only
// the mask's meaning is proven, and where it is not, the reason says which node or element
// broke the proof. Masks built by comparing positions (Range, LessOrEqual) are not proven: their
// positions come from the model's inputs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "fusekit/graph/facts.hpp"
#include "fusekit/graph/tensor.hpp"
#include "fusekit/io/error.hpp"
#include "fusekit/pattern/context.hpp"
#include "fusekit/pattern/matchers.hpp"

namespace fusekit::rules::causal {

// Which part of the triangle a boolean mask is true on: the visible keys (j ≤ i) or the hidden
// ones (j > i).
enum class side { keep, hide };

inline side flipped(side s) { return s == side::keep ? side::hide : side::keep; }

// The one value every element of v holds, where that is proven: a constant, ConstantOfShape,
// Expand of one, a Cast to bool of one.
inline std::optional<double> uniform_value(const graph& g, value_id v) {
  if (const onnx::TensorProto* t = g.constant_tensor(v)) {
    using rule = pattern::tensor_rule;
    if (element_count(*t) <= 0 || pattern::detail::check_tensor_rule(g, *t, rule::all_equal).what !=
                                      pattern::detail::tensor_rule_failure::kind::none)
      return std::nullopt;
    return tensor_values(*t, g.directory()).as_double(0);
  }
  const node_id p = g.producer(v);
  if (p == no_id || !g.domain(p).empty()) return std::nullopt;
  const std::string_view op = g.op_type(p);
  if (op == "ConstantOfShape") {
    const onnx::AttributeProto* value = g.attribute(p, "value").attribute;
    if (value == nullptr || !value->has_t()) return 0.0;
    if (element_count(value->t()) != 1 ||
        !reads_as_numbers(static_cast<dtype>(value->t().data_type())))
      return std::nullopt;
    // The index checks initializers and Constant nodes, not this attribute: data the reader
    // refuses proves nothing, and the mask stays the op's bias.
    try {
      return tensor_values(value->t(), g.directory()).as_double(0);
    } catch (const error&) {
      return std::nullopt;
    }
  }
  if (op == "Expand" || op == "Identity") return uniform_value(g, g.input(p, 0));
  if (op == "Cast" && g.type(v) == dtype::boolean)
    if (auto x = uniform_value(g, g.input(p, 0))) return *x != 0 ? 1.0 : 0.0;
  return std::nullopt;
}

namespace detail {

inline std::string quoted(const graph& g, value_id v) { return pattern::quoted(g.name(v)); }

// v spans the mask's [S, L] in its last two dims: a broadcast 1 there would repeat one row or key.
inline std::string spans(const graph& g, value_id v, const sym& s, const sym& l) {
  const facts& f = facts_of(g);
  const auto r = f.rank(v);
  if (r && *r >= 2 && equal(*f.dim_of(v, -2), s) == truth::yes &&
      equal(*f.dim_of(v, -1), l) == truth::yes)
    return {};
  return quoted(g, v) + " " + f.shape_text(v) + " is not proven to span [" + f.text(s) + ", " +
         f.text(l) + "] in its last two dims";
}

// A constant triangle, element by element; the first element that breaks it is the reason.
inline std::string constant_triangle(const graph& g, value_id v, const onnx::TensorProto& t,
                                     side want) {
  using rule = pattern::tensor_rule;
  using failure = pattern::detail::tensor_rule_failure;
  const failure f = pattern::detail::check_tensor_rule(
      g, t,
      want == side::keep ? rule::lower_triangular_ones : rule::strictly_upper_triangular_ones);
  if (f.what == failure::kind::none) return {};
  if (f.what != failure::kind::element)
    return "the constant " + quoted(g, v) + " is not a numeric matrix";
  const std::int64_t cols = t.dims(t.dims_size() - 1), rows = t.dims(t.dims_size() - 2);
  const std::int64_t i = (f.element / cols) % rows, j = f.element % cols;
  const bool shown = j > i;  // above the diagonal the broken element shows a hidden key
  return "the constant " + quoted(g, v) + (shown ? " shows" : " hides") + " key " +
         std::to_string(j) + " to query " + std::to_string(i) + ", which causality " +
         (shown ? "hides" : "shows");
}

}  // namespace detail

// Where a mask's values come from, past the ops that only move them ("comes from And 'x'
// through Slice, Unsqueeze"): what a reader needs to see why the mask is not causal alone.
inline std::string origin(const graph& g, value_id v) {
  std::string through;
  node_id p = g.producer(v);
  for (; p != no_id && g.domain(p).empty(); p = g.producer(v)) {
    const std::string_view op = g.op_type(p);
    if (op != "Slice" && op != "Unsqueeze" && op != "Squeeze" && op != "Reshape" &&
        op != "Expand" && op != "Transpose" && op != "Cast" && op != "Identity")
      break;
    through = std::string(op) + (through.empty() ? "" : ", ") + through;
    v = g.input(p, 0);
  }
  if (p != no_id)
    return "comes from " + g.describe(p) + (through.empty() ? "" : " through " + through);
  const std::string what = g.constant_tensor(v) ? "constant" : "input of the model";
  if (through.empty()) return "is " + std::string(g.constant_tensor(v) ? "a " : "an ") + what;
  return "comes from the " + what + " " + detail::quoted(g, v) + " through " + through;
}

// Why v, as booleans over its last two dims [s, l], is not true exactly on the `want` side of
// the causal diagonal; "" when it is proven.
inline std::string not_triangular(const graph& g, value_id v, side want, const sym& s,
                                  const sym& l) {
  using detail::quoted;
  if (const onnx::TensorProto* t = g.constant_tensor(v)) {
    if (auto no = detail::spans(g, v, s, l); !no.empty()) return no;
    return detail::constant_triangle(g, v, *t, want);
  }
  const node_id p = g.producer(v);
  const std::string_view op = p != no_id && g.domain(p).empty() ? g.op_type(p) : std::string_view{};
  if (op == "Identity" || op == "Expand" || (op == "Cast" && g.type(v) == dtype::boolean))
    return not_triangular(g, g.input(p, 0), want, s, l);
  if (op == "Not") return not_triangular(g, g.input(p, 0), flipped(want), s, l);
  if (op == "Equal") {
    for (int zero : {1, 0})
      if (uniform_value(g, g.input(p, zero)) == 0.0)
        return not_triangular(g, g.input(p, 1 - zero), flipped(want), s, l);
    return g.describe(p) + " compares with something other than 0";
  }
  if (op == "Trilu") {
    if (auto no = detail::spans(g, v, s, l); !no.empty()) return no;
    const std::int64_t upper = g.attribute_int(p, "upper").value_or(1);
    const value_id offset = g.input(p, 1);
    const std::optional<double> k =
        offset == no_id ? std::optional(0.0) : facts_of(g).real_scalar(offset);
    if (!k) return g.describe(p) + "'s diagonal offset k is not a proven number";
    const auto ones = uniform_value(g, g.input(p, 0));
    if (!ones || *ones == 0)
      return g.describe(p) + " reads " + quoted(g, g.input(p, 0)) +
             ", not proven nonzero everywhere";
    // Trilu keeps j ≤ i + k (lower) or j ≥ i + k (upper): j ≤ i, or j > i as j ≥ i + 1.
    const bool causal = want == side::keep ? upper == 0 && *k == 0 : upper != 0 && *k == 1;
    if (!causal)
      return g.describe(p) + " (upper " + std::to_string(upper) + ", k " +
             pattern::number_text(*k) + ") " + (want == side::keep ? "keeps" : "hides") +
             " a triangle other than the causal one";
    return {};
  }
  return quoted(g, v) + " " + origin(g, v) + ", which fusekit does not prove causal";
}

}  // namespace fusekit::rules::causal
