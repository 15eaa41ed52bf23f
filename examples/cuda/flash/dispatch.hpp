// From a fused node of a fusekit-rewritten model to the problem the kernels run: element type,
// heads, head size, scale, causal, and each tensor's strides, for both fusion targets:
//
//   com.microsoft MultiHeadAttention  q [B, S, N·H]; k, v [B, L, N·H] or BNSH [B, N, L, H];
//                                     num_heads, scale (0 or absent: 1/√H), unidirectional
//   ai.onnx Attention (opset 23)      q, k, v BNSH, or 3-D [B, S, N·H] with q_num_heads and
//                                     kv_num_heads; scale (absent: 1/√H), is_causal
//   com.microsoft GroupQueryAttention q [B, S, N·H]; k, v [B, S, Nkv·H]; num_heads,
//                                     kv_num_heads, scale; always causal. Its seqlens_k and
//                                     total_sequence_length are taken as every row's full
//                                     length, which is what fusekit's rules write there.
//
// Where the node's K is Transpose(perm 0,1,3,2) of a BNHS tensor (what the attention rules emit for
// F5-TTS's pre-transposed K), the kernel reads that tensor directly and the Transpose is not run.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "flash/problem.hpp"
#include "fusekit/graph/graph.hpp"

namespace flash {

// Sizes for symbolic dims, by name: {"S", 1024}.
using dim_bindings = std::map<std::string, std::int64_t, std::less<>>;

struct fused_tensor {
  std::string name;
  std::vector<std::int64_t> dims;
};

struct fused_attention {
  fusekit::node_id node = fusekit::no_id;
  std::string description;  // "MultiHeadAttention 'attn_0'"
  std::string refusal;      // why no kernel runs it; empty when `p` is the node's problem
  problem p;
  // What the kernel reads and writes, as the model names them. k may be the BNHS tensor the
  // node's K was transposed from.
  fused_tensor q, k, v, o;

  bool runnable() const { return refusal.empty(); }
};

namespace detail {

struct refused {
  std::string why;
};

// A value's sizes, -1 where unknown, with the first unknown one explained.
struct sizes {
  std::vector<std::int64_t> dims;
  std::string unknown;

  // K and V share batch, heads and keys (all but the last dim, in either layout):
  // a size one of them lacks is the other's.
  void complete_from(const sizes& other) {
    if (other.dims.size() != dims.size()) return;
    for (std::size_t i = 0; i + 1 < dims.size(); ++i)
      if (dims[i] < 0) dims[i] = other.dims[i];
  }
  std::vector<std::int64_t> require() const {
    for (std::int64_t d : dims)
      if (d < 0) throw refused{unknown};
    return dims;
  }
};

// The value's sizes: as declared (value_info, as ONNX shape inference writes it) where static,
// else from fusekit's facts with the symbols bound by `bindings`.
inline sizes sizes_of(const fusekit::graph& g, fusekit::value_id v, const dim_bindings& bindings,
                      std::string_view role) {
  const fusekit::facts& f = fusekit::facts_of(g);
  const fusekit::shape_fact& shape = f.shape(v);
  const fusekit::tensor_shape& declared = g.shape(v);
  if (!shape.known && !declared.known) throw refused{std::string(role) + " has no known shape"};
  const std::size_t rank = declared.known ? declared.rank() : shape.rank();
  sizes out{std::vector<std::int64_t>(rank, -1), {}};
  for (std::size_t i = 0; i < rank; ++i) {
    if (declared.known && declared.dims[i].is_static()) {
      out.dims[i] = declared.dims[i].size;
      continue;
    }
    if (!shape.known || shape.rank() != rank) continue;
    const fusekit::sym& d = shape.dims[i];
    if (auto c = d.constant()) {
      out.dims[i] = *c;
      continue;
    }
    std::int64_t total = 0;
    std::string missing = d.known() ? "" : f.text(d);
    for (const fusekit::sym::term& t : d.terms()) {
      std::int64_t x = t.coefficient;
      for (const fusekit::sym::factor& factor : t.factors) {
        const std::string name = f.text(fusekit::sym::atom(factor.atom));
        const auto it = bindings.find(name);
        if (it == bindings.end()) {
          missing = name;
          break;
        }
        for (int k = 0; k < factor.power; ++k) x *= it->second;
      }
      total += x;
    }
    if (missing.empty() && total % d.denominator() == 0) {
      out.dims[i] = total / d.denominator();
    } else if (out.unknown.empty()) {
      out.unknown = std::string(role) + " " + f.shape_text(v) + ": dim '" + missing +
                    "' has no size (bind it: --dim " + missing + "=N)";
    }
  }
  if (out.unknown.empty())
    out.unknown = std::string(role) + " " + f.shape_text(v) + " is not static";
  return out;
}

inline element element_of(const fusekit::graph& g, fusekit::value_id q) {
  switch (g.type(q)) {
    case fusekit::dtype::float16:
      return element::f16;
    case fusekit::dtype::bfloat16:
      return element::bf16;
    case fusekit::dtype::float32:
      return element::f32;
    default:
      throw refused{"element type " + std::string(fusekit::dtype_name(g.type(q)))};
  }
}

inline void require_absent(const fusekit::graph& g, fusekit::node_id n, std::size_t from,
                           std::string_view what) {
  for (std::size_t slot = from; slot < g.inputs(n).size(); ++slot)
    if (g.input(n, slot) != fusekit::no_id)
      throw refused{std::string(what) + " (input " + std::to_string(slot) + ")"};
}

// A [B, heads, L, H] or [B, L, heads·H] tensor: its strides and head count.
struct view {
  strides s;
  std::int64_t batch, heads, seq, dim;
};

inline view view_of(const std::vector<std::int64_t>& d, std::int64_t heads_if_3d,
                    std::string_view role) {
  if (d.size() == 4) return {bnsh(d[1], d[2], d[3]), d[0], d[1], d[2], d[3]};
  if (d.size() == 3) {
    if (heads_if_3d <= 0 || d[2] % heads_if_3d != 0)
      throw refused{std::string(role) + ": " + std::to_string(d[2]) + " is not " +
                    std::to_string(heads_if_3d) + " heads"};
    const std::int64_t dim = d[2] / heads_if_3d;
    return {bsnh(heads_if_3d, d[1], dim), d[0], heads_if_3d, d[1], dim};
  }
  throw refused{std::string(role) + " has rank " + std::to_string(d.size()) + " (3 or 4 taken)"};
}

// K read through its producer when that is Transpose(0, 1, 3, 2) of a BNHS tensor.
inline std::optional<fusekit::value_id> transposed_source(const fusekit::graph& g,
                                                          fusekit::value_id k) {
  const fusekit::node_id t = g.producer(k);
  if (t == fusekit::no_id || g.op_type(t) != "Transpose" || !g.domain(t).empty())
    return std::nullopt;
  const auto perm = g.attribute_ints(t, "perm");
  if (!perm || perm->size() != 4 || (*perm)[0] != 0 || (*perm)[1] != 1 || (*perm)[2] != 3 ||
      (*perm)[3] != 2)
    return std::nullopt;
  return g.input(t, 0);
}

struct node_shape {
  std::int64_t q_heads_3d = 0, kv_heads_3d = 0;
};

inline void map_tensors(const fusekit::graph& g, fusekit::node_id n, const dim_bindings& b,
                        node_shape heads, fused_attention& out) {
  const fusekit::value_id q = g.input(n, 0), k = g.input(n, 1), v = g.input(n, 2);
  if (q == fusekit::no_id || k == fusekit::no_id || v == fusekit::no_id)
    throw refused{"packed or missing Q/K/V inputs"};
  problem& p = out.p;
  p.type = element_of(g, q);
  if (g.type(k) != g.type(q) || g.type(v) != g.type(q))
    throw refused{"Q, K and V differ in element type"};
  sizes k_sizes = sizes_of(g, k, b, "k"), v_sizes = sizes_of(g, v, b, "v");
  k_sizes.complete_from(v_sizes);
  v_sizes.complete_from(k_sizes);
  out.q = {std::string(g.name(q)), sizes_of(g, q, b, "q").require()};
  out.v = {std::string(g.name(v)), v_sizes.require()};
  const std::vector<std::int64_t> k_dims = k_sizes.require();
  const view qv = view_of(out.q.dims, heads.q_heads_3d, "q");
  const view kv = view_of(k_dims, heads.kv_heads_3d, "k");
  const view vv = view_of(out.v.dims, heads.kv_heads_3d, "v");
  if (kv.dim != qv.dim || vv.dim != qv.dim)
    throw refused{"head sizes differ: q " + std::to_string(qv.dim) + ", k " +
                  std::to_string(kv.dim) + ", v " + std::to_string(vv.dim)};
  if (kv.batch != qv.batch || vv.batch != qv.batch || kv.heads != vv.heads || kv.seq != vv.seq)
    throw refused{"K and V do not match Q's batch or each other's shape"};
  p.batch = int(qv.batch);
  p.heads = int(qv.heads);
  p.kv_heads = int(kv.heads);
  p.seq_q = int(qv.seq);
  p.seq_kv = int(kv.seq);
  p.head_dim = int(qv.dim);
  p.q = qv.s;
  p.v = vv.s;
  p.k = kv.s;
  out.k = {std::string(g.name(k)), k_dims};
  if (k_dims.size() == 4)
    if (const auto source = transposed_source(g, k)) {
      p.k = bnhs(kv.heads, kv.seq, kv.dim);
      out.k = {std::string(g.name(*source)), {kv.batch, kv.heads, kv.dim, kv.seq}};
    }
  // The output has q's layout.
  const fusekit::value_id o = g.output(n, 0);
  p.o = p.q;
  out.o = {std::string(g.name(o)), out.q.dims};
  if (p.kv_heads <= 0 || p.heads % p.kv_heads != 0)
    throw refused{std::to_string(p.heads) + " query heads, " + std::to_string(p.kv_heads) +
                  " K/V heads"};
}

inline float scale_or_default(std::optional<float> scale, int head_dim) {
  return scale && *scale != 0.f ? *scale : 1.f / std::sqrt(float(head_dim));
}

}  // namespace detail

// The problem of fused node `n`, or why it has none here.
inline fused_attention map_fused_node(const fusekit::graph& g, fusekit::node_id n,
                                      const dim_bindings& bindings = {}) {
  fused_attention out;
  out.node = n;
  out.description = g.describe(n);
  try {
    if (g.domain(n) == "com.microsoft" && g.op_type(n) == "MultiHeadAttention") {
      detail::require_absent(g, n, 3, "bias, masks and past K/V are not supported");
      const std::int64_t heads = g.attribute_int(n, "num_heads").value_or(0);
      if (heads <= 0) throw detail::refused{"num_heads is missing"};
      detail::map_tensors(g, n, bindings, {heads, heads}, out);
      if (out.p.heads != heads || out.p.kv_heads != heads)
        throw detail::refused{"num_heads " + std::to_string(heads) + " contradicts K/V's heads"};
      out.p.scale = detail::scale_or_default(g.attribute_float(n, "scale"), out.p.head_dim);
      out.p.causal = g.attribute_int(n, "unidirectional").value_or(0) != 0;
    } else if (g.domain(n).empty() && g.op_type(n) == "Attention") {
      detail::require_absent(g, n, 3, "attn_mask and past K/V are not supported");
      for (std::size_t slot = 1; slot < g.outputs(n).size(); ++slot)
        if (g.output(n, slot) != fusekit::no_id)
          throw detail::refused{"present K/V and qk_matmul_output outputs are not produced"};
      if (g.attribute_float(n, "softcap").value_or(0.f) != 0.f)
        throw detail::refused{"softcap is not supported"};
      detail::map_tensors(g, n, bindings,
                          {g.attribute_int(n, "q_num_heads").value_or(0),
                           g.attribute_int(n, "kv_num_heads").value_or(0)},
                          out);
      out.p.scale = detail::scale_or_default(g.attribute_float(n, "scale"), out.p.head_dim);
      out.p.causal = g.attribute_int(n, "is_causal").value_or(0) != 0;
    } else if (g.domain(n) == "com.microsoft" && g.op_type(n) == "GroupQueryAttention") {
      for (std::size_t slot : {3u, 4u})
        if (g.input(n, slot) != fusekit::no_id)
          throw detail::refused{"past K/V are not supported (input " + std::to_string(slot) + ")"};
      detail::require_absent(g, n, 7,
                             "rotary caches, position ids, bias and head sinks are not "
                             "supported");
      if (g.attribute_int(n, "do_rotary").value_or(0) != 0 ||
          g.attribute_int(n, "local_window_size").value_or(-1) != -1 ||
          g.attribute_float(n, "softcap").value_or(0.f) != 0.f ||
          // ONNX Runtime's default is -1, and only 1 turns it on.
          g.attribute_int(n, "smooth_softmax").value_or(0) == 1)
        throw detail::refused{
            "rotary, local windows, softcap and smooth softmax are not supported"};
      detail::map_tensors(g, n, bindings,
                          {g.attribute_int(n, "num_heads").value_or(0),
                           g.attribute_int(n, "kv_num_heads").value_or(0)},
                          out);
      out.p.scale = detail::scale_or_default(g.attribute_float(n, "scale"), out.p.head_dim);
      out.p.causal = true;
    } else {
      throw detail::refused{"not a fused attention node"};
    }
    if (!(out.p.scale > 0.f) || !std::isfinite(out.p.scale))
      throw detail::refused{"scale " + std::to_string(out.p.scale) + " is not positive"};
  } catch (const detail::refused& r) {
    out.refusal = r.why;
  }
  return out;
}

inline bool is_fused_attention(const fusekit::graph& g, fusekit::node_id n) {
  return (g.domain(n) == "com.microsoft" &&
          (g.op_type(n) == "MultiHeadAttention" || g.op_type(n) == "GroupQueryAttention")) ||
         (g.domain(n).empty() && g.op_type(n) == "Attention");
}

// Every fused attention node of the main graph, in topological order.
inline std::vector<fused_attention> fused_attention_nodes(const fusekit::graph& g,
                                                          const dim_bindings& bindings = {}) {
  std::vector<fused_attention> out;
  for (fusekit::node_id n : g.topological_order())
    if (is_fused_attention(g, n)) out.push_back(map_fused_node(g, n, bindings));
  return out;
}

}  // namespace flash
