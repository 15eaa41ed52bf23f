// What attention rules need to know about tensors the model does not annotate: rank and head
// count, read from shapes when declared, else from the Reshape/Transpose chain that made them.
#pragma once

#include <cstdint>
#include <optional>

#include "fusekit/graph/graph.hpp"

namespace fusekit::rules {

namespace detail {

// Ops whose output has the shape of their (broadcast) inputs: walking through them keeps the
// layout (RoPE's Mul/Add/Neg, casts, scalings).
inline bool keeps_layout(const graph& g, node_id n) {
  static constexpr std::string_view ops[] = {"Add",      "Sub",  "Mul",  "Div",  "Neg",    "Cast",
                                             "Identity", "Sqrt", "Relu", "Tanh", "Sigmoid"};
  if (!g.domain(n).empty()) return false;
  for (std::string_view op : ops)
    if (g.op_type(n) == op) return true;
  return false;
}

inline std::optional<std::vector<std::int64_t>> constant_ints(const graph& g, value_id v) {
  const onnx::TensorProto* t = v == no_id ? nullptr : g.constant_tensor(v);
  if (t == nullptr) return std::nullopt;
  const tensor_values values(*t, g.file().parent_path());
  if (!values.is_numeric()) return std::nullopt;
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < values.size(); ++i) out.push_back(values.as_int64(i));
  return out;
}

}  // namespace detail

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
    if (const auto shape = detail::constant_ints(g, g.input(n, 1))) return shape->size();
    return std::nullopt;
  }
  if (!detail::keeps_layout(g, n)) return std::nullopt;
  std::optional<std::size_t> rank;
  for (value_id in : g.inputs(n))
    if (const auto r = rank_of(g, in, depth + 1)) rank = std::max(rank.value_or(0), *r);
  return rank;
}

// Heads of a [B, N, S, H] tensor: dim 1 when declared, else N from the head-split
// Transpose(0,2,1,3)(Reshape(x, [.., .., N, H])) that made it.
inline std::optional<std::int64_t> heads_of(const graph& g, value_id v, int depth = 0) {
  if (v == no_id || depth > 16) return std::nullopt;
  const auto& shape = g.shape(v);
  if (shape.known && shape.rank() == 4 && shape.dims[1].is_static()) return shape.dims[1].size;
  const node_id n = g.producer(v);
  if (n == no_id) return std::nullopt;
  if (g.op_type(n) == "Transpose") {
    const auto perm = g.attribute_ints(n, "perm");
    if (!perm || perm->size() != 4) return std::nullopt;
    const value_id in = g.input(n, 0);
    const node_id split = g.producer(in);
    // Output dim 1 is input dim perm[1]: the head count when the input is [B, S, N, H].
    if ((*perm)[1] == 2 && split != no_id && g.op_type(split) == "Reshape")
      if (const auto dims = detail::constant_ints(g, g.input(split, 1));
          dims && dims->size() == 4 && (*dims)[2] > 0)
        return (*dims)[2];
    if ((*perm)[1] == 1) return heads_of(g, in, depth + 1);
    return std::nullopt;
  }
  if (!detail::keeps_layout(g, n)) return std::nullopt;
  for (value_id in : g.inputs(n))
    if (const auto h = heads_of(g, in, depth + 1)) return h;
  return std::nullopt;
}

}  // namespace fusekit::rules
