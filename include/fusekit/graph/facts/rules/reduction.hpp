// The facts' rules of ONNX's reduction ops (onnx/defs/reduction): every Reduce*.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "fusekit/graph/facts/rule_context.hpp"

namespace fusekit::facts_detail {

// Reduce*: the reduced axes become 1 (keepdims) or go; axes from the input (ReduceSum from
// opset 13, the others from 18) or the attribute; none given reduces all, unless told not to.
inline void infer_reduce(rule_context& cx, node_id n) {
  const shape_fact& x = cx.in_shape(n, 0);
  if (!x.known) return;
  const bool keep = cx.g.attribute_int(n, "keepdims").value_or(1) != 0;
  const auto axes = cx.ints_of(n, 1, "axes");
  if (!axes && cx.g.input(n, 1) != no_id) return;  // axes computed at run time
  // Axes not given are axes empty: every axis, or none with noop_with_empty_axes.
  const bool no_axes = !axes || axes->empty();
  if (no_axes && cx.g.attribute_int(n, "noop_with_empty_axes").value_or(0) != 0)
    return cx.set(n, 0, x);
  std::vector<bool> reduced(x.rank(), no_axes);
  if (axes)
    for (std::int64_t a : *axes) {
      const auto i = axis_index(a, x.rank());
      if (!i) return;
      reduced[*i] = true;
    }
  shape_fact s{true, {}};
  for (std::size_t i = 0; i < x.rank(); ++i) {
    if (!reduced[i])
      s.dims.push_back(x.dims[i]);
    else if (keep)
      s.dims.push_back(sym::constant(1));
  }
  cx.set(n, 0, std::move(s));
}

// This family's rules, and which answers op (none when the family has no rule for it).
enum class reduction_rule : std::uint8_t { none, reduce };
inline reduction_rule reduction_rule_for(std::string_view op) {
  return op.starts_with("Reduce") ? reduction_rule::reduce : reduction_rule::none;
}
inline void run_reduction_rule(rule_context& cx, node_id n, reduction_rule rule) {
  if (rule == reduction_rule::reduce) infer_reduce(cx, n);
}

}  // namespace fusekit::facts_detail
