// The facts' rules of ONNX's generator ops (onnx/defs/generator): Constant, Range,
// ConstantOfShape.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "fusekit/graph/facts/rule_context.hpp"

namespace fusekit::facts_detail {

// A Constant's tensor, as an initializer's.
inline void infer_constant(rule_context& cx, node_id n) {
  if (const onnx::TensorProto* t = cx.g.constant_tensor(cx.out(n))) {
    shape_fact s{true, {}};
    for (std::int64_t d : t->dims()) s.dims.push_back(sym::constant(d));
    cx.set(n, 0, std::move(s), cx.read(*t));
  }
}

inline void infer_range(rule_context& cx, node_id n) {
  const content_fact& start = cx.in_content(n, 0);
  const content_fact& limit = cx.in_content(n, 1);
  const content_fact& delta = cx.in_content(n, 2);
  if (!start.known || !limit.known || !delta.known || start.size() != 1 || limit.size() != 1 ||
      delta.size() != 1 || start.real || limit.real || delta.real)
    return cx.set(n, 0, cx.opaque(n, 0, 1));
  // Range(0, L, 1) has L elements, whatever L is (none when L is a number below 0).
  if (start.ints[0].is_constant(0) && delta.ints[0].is_constant(1) && limit.ints[0].known() &&
      !is_negative_constant(limit.ints[0])) {
    content_fact c;
    if (const auto l = limit.ints[0].constant();
        l && *l >= 0 && std::size_t(*l) <= facts::max_elements) {
      c = {true, false, {}, {}};
      for (std::int64_t i = 0; i < *l; ++i) c.ints.push_back(sym::constant(i));
    }
    return cx.set(n, 0, {true, {limit.ints[0]}}, std::move(c));
  }
  // Range(P, P + k, d) has ⌈k / d⌉ elements (none below 0) whatever P is: a decoder step's
  // positions, from the past length to the past length plus its new tokens.
  const sym span = limit.ints[0] - start.ints[0];
  const auto k = span.constant(), d = delta.ints[0].constant();
  if (start.ints[0].known() && limit.ints[0].known() && k && d && *d != 0) {
    // Written so that no span or step near the int64 limits overflows.
    const std::int64_t count =
        *d > 0 ? (*k > 0 ? (*k - 1) / *d + 1 : 0) : (*k < 0 ? (*k + 1) / *d + 1 : 0);
    content_fact c;
    if (std::size_t(count) <= facts::max_elements) {
      c = {true, false, {}, {}};
      for (std::int64_t i = 0; i < count; ++i)
        c.ints.push_back(start.ints[0] + sym::constant(i * *d));
    }
    return cx.set(n, 0, {true, {sym::constant(count)}}, std::move(c));
  }
  cx.set(n, 0, cx.opaque(n, 0, 1));
}

inline void infer_constant_of_shape(rule_context& cx, node_id n) {
  const content_fact& target = cx.in_content(n, 0);
  if (!target.known || target.real) return;
  shape_fact s{true, {}};
  for (std::size_t i = 0; i < target.ints.size(); ++i) {
    if (is_negative_constant(target.ints[i])) return cx.cannot_run();  // no dim is negative
    s.dims.push_back(target.ints[i].known() ? target.ints[i] : cx.fresh(cx.out(n), i));
  }
  content_fact c;
  std::size_t size = 1;
  bool small = true;
  for (const sym& d : s.dims) {
    const auto k = d.constant();
    if (!k || std::uint64_t(*k) > facts::max_elements ||
        (size *= std::size_t(*k)) > facts::max_elements)
      small = false;
    if (!small) break;
  }
  if (small) {
    const onnx::AttributeProto* value = cx.g.attribute(n, "value").attribute;
    const content_fact fill = value != nullptr && value->has_t()
                                  ? cx.read(value->t())
                                  : content_fact{true, true, {}, {0.0}};
    if (fill.known && fill.size() == 1) {
      c = {true, fill.real, {}, {}};
      if (fill.real)
        c.reals.assign(size, fill.reals[0]);
      else
        c.ints.assign(size, fill.ints[0]);
    }
  }
  cx.set(n, 0, std::move(s), std::move(c));
}

// This family's rules, and which answers op (none when the family has no rule for it).
enum class generator_rule : std::uint8_t { none, constant, range, constant_of_shape };
inline generator_rule generator_rule_for(std::string_view op) {
  if (op == "Constant") return generator_rule::constant;
  if (op == "Range") return generator_rule::range;
  if (op == "ConstantOfShape") return generator_rule::constant_of_shape;
  return generator_rule::none;
}
inline void run_generator_rule(rule_context& cx, node_id n, generator_rule rule) {
  switch (rule) {
    case generator_rule::none:
      return;
    case generator_rule::constant:
      return infer_constant(cx, n);
    case generator_rule::range:
      return infer_range(cx, n);
    case generator_rule::constant_of_shape:
      return infer_constant_of_shape(cx, n);
  }
}

}  // namespace fusekit::facts_detail
