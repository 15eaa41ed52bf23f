// The rank of values the model does not annotate, read from the ops that made them: enough for
// rules (and last_axis) to work on exports without value_info, without full shape inference.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "fusekit/graph/graph.hpp"
#include "fusekit/graph/tensor.hpp"

namespace fusekit {

// Ops whose output has the shape of their (broadcast) inputs: walking through them keeps the
// layout (RoPE's Mul/Add/Neg, casts, scalings).
inline bool keeps_layout(const graph& g, node_id n) {
  static constexpr std::string_view ops[] = {"Add",  "Sub",     "Mul",     "Div",
                                             "Neg",  "Cast",    "Sqrt",    "Relu",
                                             "Tanh", "Sigmoid", "Softmax", "Identity"};
  if (!g.domain(n).empty()) return false;
  for (std::string_view op : ops)
    if (g.op_type(n) == op) return true;
  return false;
}

inline std::optional<std::vector<std::int64_t>> constant_ints(const graph& g, value_id v) {
  const onnx::TensorProto* t = v == no_id ? nullptr : g.constant_tensor(v);
  if (t == nullptr) return std::nullopt;
  const tensor_values values(*t, g.directory());
  if (!values.is_numeric()) return std::nullopt;
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < values.size(); ++i) out.push_back(values.as_int64(i));
  return out;
}

// The rank of `v`: declared, or implied by the Transpose/Reshape that produced it.
inline std::optional<std::size_t> rank_of(const graph& g, value_id v, int depth = 0) {
  if (v == no_id || depth > 16) return std::nullopt;
  if (g.shape(v).known) return g.shape(v).rank();
  const node_id n = g.producer(v);
  if (n == no_id) return std::nullopt;
  if (g.op_type(n) == "Transpose") {
    if (const auto perm = g.attribute_ints(n, "perm")) return perm->size();
    return rank_of(g, g.input(n, 0), depth + 1);
  }
  if (g.op_type(n) == "Reshape") {
    if (const auto shape = constant_ints(g, g.input(n, 1))) return shape->size();
    return std::nullopt;
  }
  // Slicing and concatenating keep the rank of the data; the other inputs are 1-D indices.
  if ((g.op_type(n) == "Slice" || g.op_type(n) == "Concat") && g.domain(n).empty())
    return rank_of(g, g.input(n, 0), depth + 1);
  // Matrix products broadcast their batch dimensions: the output has the larger rank.
  const bool product = g.op_type(n) == "MatMul" && g.domain(n).empty();
  if (!product && !keeps_layout(g, n)) return std::nullopt;
  std::size_t rank = 0;
  for (value_id in : g.inputs(n)) {
    const auto r = rank_of(g, in, depth + 1);
    if (!r) return std::nullopt;                 // an unknown input could have the larger rank
    if (product && *r < 2) return std::nullopt;  // a vector operand drops a dimension
    rank = std::max(rank, *r);
  }
  return rank;
}

}  // namespace fusekit
