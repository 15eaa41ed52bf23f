// The facts' rules of ONNX's neural-network ops (onnx/defs/nn): Conv and the pools, Flatten, the
// ops whose output 0 has their input's shape (Dropout, the normalizations, RotaryEmbedding), and
// Attention. ONNX Runtime's contributed kin of these (com.microsoft: the skip and simplified layer
// normalizations, MultiHeadAttention) share their rules here, where the ONNX op's rule is.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "fusekit/graph/facts/rule_context.hpp"

namespace fusekit::facts_detail {

// Conv and the pools slide a window over the spatial axes: out = ⌊(in + pads − dilation·(k−1)
// − 1) / stride⌋ + 1, "SAME" padding ⌈in / stride⌉. A symbolic size stays symbolic where the
// stride is 1 (no rounding); other strides on a symbolic size leave the dim to ONNX's rule.
inline void infer_window(rule_context& cx, node_id n, std::string_view op) {
  const shape_fact& x = cx.in_shape(n, 0);
  if (!x.known || x.rank() < 3) return;
  const std::size_t spatial = x.rank() - 2;
  std::vector<std::int64_t> kernel;
  if (auto k = cx.g.attribute_ints(n, "kernel_shape")) kernel.assign(k->begin(), k->end());
  sym channels = x.dims[1];
  if (op == "Conv") {
    const shape_fact& w = cx.in_shape(n, 1);
    if (!w.known || w.rank() != x.rank()) return;
    channels = w.dims[0];
    if (kernel.empty())
      for (std::size_t i = 0; i < spatial; ++i) {
        const auto k = w.dims[2 + i].constant();
        if (!k) return;
        kernel.push_back(*k);
      }
  }
  // One value per spatial axis (two for pads), the default where the attribute is absent.
  auto per_axis = [&](std::string_view attribute, std::size_t count, std::int64_t fallback) {
    const auto a = cx.g.attribute_ints(n, attribute);
    return !a ? std::vector<std::int64_t>(count, fallback)
              : std::vector<std::int64_t>(a->begin(), a->end());
  };
  const auto strides = per_axis("strides", spatial, 1);
  const auto dilations = per_axis("dilations", spatial, 1);
  const auto pads = per_axis("pads", 2 * spatial, 0);
  if (kernel.size() != spatial || strides.size() != spatial || dilations.size() != spatial ||
      pads.size() != 2 * spatial)
    return cx.cannot_run();
  const std::string_view auto_pad = cx.g.attribute_string(n, "auto_pad").value_or("NOTSET");
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (!same && auto_pad != "NOTSET" && auto_pad != "VALID") return cx.cannot_run();
  if (cx.g.attribute_int(n, "ceil_mode").value_or(0) != 0) return;
  shape_fact s{true, {x.dims[0], channels}};
  for (std::size_t i = 0; i < spatial; ++i) {
    const sym& d = x.dims[2 + i];
    const std::int64_t stride = strides[i];
    // A window of at least one element, stepped forward, padded outward, or the model cannot run.
    if (stride < 1 || dilations[i] < 1 || kernel[i] < 1 || pads[i] < 0 || pads[i + spatial] < 0)
      return cx.cannot_run();
    // The pads less what a window spans past its first element: the last window starts at
    // in − 1 + padded, and the output holds that over the stride, plus one. No sum overflows.
    std::int64_t reach = 0, padding = 0, padded = 0;
    if (__builtin_mul_overflow(dilations[i], kernel[i] - 1, &reach) ||
        (auto_pad == "NOTSET" && __builtin_add_overflow(pads[i], pads[i + spatial], &padding)) ||
        __builtin_sub_overflow(padding, reach, &padded))
      return cx.cannot_run();
    if (const auto k = d.constant()) {
      std::int64_t span = 0;  // below 0, not even one window fits
      if (__builtin_add_overflow(*k - 1, padded, &span) || (!same && span < 0))
        return cx.cannot_run();
      s.dims.push_back(
          sym::constant(same ? (*k == 0 ? 0 : (*k - 1) / stride + 1) : span / stride + 1));
    } else if (stride == 1) {
      s.dims.push_back(same ? d : d + sym::constant(padded));
    } else {
      s.dims.push_back(cx.fresh(cx.out(n), 2 + i));
    }
  }
  cx.set(n, 0, std::move(s));
}

inline void infer_flatten(rule_context& cx, node_id n) {
  const shape_fact& x = cx.in_shape(n, 0);
  if (!x.known) return;
  std::int64_t axis = cx.g.attribute_int(n, "axis").value_or(1);
  if (axis < 0) axis += std::int64_t(x.rank());
  if (axis < 0 || axis > std::int64_t(x.rank())) return;
  const auto split = x.dims.begin() + axis;
  cx.set(n, 0, {true, {product({x.dims.begin(), split}), product({split, x.dims.end()})}});
}

// Output 0 of the fused attention ops: the query's batch and sequence, the value's head size.
// ONNX's Attention (opset 23) of 4-D inputs, and ONNX Runtime's MultiHeadAttention (com.microsoft)
// of a 3-D query, the value 3-D or split into heads, and GroupQueryAttention.
inline void infer_attention(rule_context& cx, node_id n, std::string_view op) {
  const shape_fact& q = cx.in_shape(n, 0);
  const shape_fact& v = cx.in_shape(n, 2);
  if (!q.known || !v.known) return;
  if (op == "MultiHeadAttention" && q.rank() == 3) {
    if (v.rank() == 3) return cx.set(n, 0, {true, {q.dims[0], q.dims[1], v.dims[2]}});
    if (v.rank() == 4) return cx.set(n, 0, {true, {q.dims[0], q.dims[1], v.dims[1] * v.dims[3]}});
  }
  if (op == "Attention" && q.rank() == 4 && v.rank() == 4)
    return cx.set(n, 0, {true, {q.dims[0], q.dims[1], q.dims[2], v.dims[3]}});
  // With k and v its own inputs (not packed into q), its output is q's shape: one head size.
  if (op == "GroupQueryAttention" && q.rank() == 3 && v.rank() == 3) return cx.set(n, 0, q);
}

// This family's rules, and which answers op (none when the family has no rule for it).
enum class nn_rule : std::uint8_t { none, same_shape, skip_norm, window, flatten, attention };
inline nn_rule nn_rule_for(std::string_view op) {
  if (in(op, {"Dropout", "LayerNormalization", "RMSNormalization", "SimplifiedLayerNormalization",
              "RotaryEmbedding", "BiasGelu"}))
    return nn_rule::same_shape;
  if (in(op, {"SkipLayerNormalization", "SkipSimplifiedLayerNormalization"}))
    return nn_rule::skip_norm;
  if (in(op, {"Conv", "MaxPool", "AveragePool", "LpPool"})) return nn_rule::window;
  if (op == "Flatten") return nn_rule::flatten;
  if (op == "MultiHeadAttention" || op == "Attention" || op == "GroupQueryAttention")
    return nn_rule::attention;
  return nn_rule::none;
}
inline void run_nn_rule(rule_context& cx, node_id n, nn_rule rule) {
  switch (rule) {
    case nn_rule::none:
      return;
    case nn_rule::same_shape:
      return cx.set(n, 0, cx.in_shape(n, 0));
    case nn_rule::skip_norm:
      // Output 3 is the sum the op normalised (input + skip + bias, of input's shape): the
      // residual stream every later layer reads.
      if (cx.g.outputs(n).size() > 3 && cx.g.output(n, 3) != no_id) cx.set(n, 3, cx.in_shape(n, 0));
      return cx.set(n, 0, cx.in_shape(n, 0));
    case nn_rule::window:
      return infer_window(cx, n, cx.g.op_type(n));
    case nn_rule::flatten:
      return infer_flatten(cx, n);
    case nn_rule::attention:
      return infer_attention(cx, n, cx.g.op_type(n));
  }
}

}  // namespace fusekit::facts_detail
