// The fused attention ops the rules emit, each with its contract written once beside its emitter:
// what a rule must prove before it may emit the op. Every rule's guard asks `admits`; every emit
// goes through `emit_attention`. What the ONNX checker holds each emitted node to (its inputs,
// attributes and types: ONNX Runtime's own registration of the op) is
// graph/contributed_op_schemas.hpp's, below the rules so that every model is checked with it.
//
// clang-format off
//                 com.microsoft MultiHeadAttention        ai.onnx Attention (opset ≥ 23)
//                 (--target ort)                           (--target onnx)
//   dtype         float32, float16                         float32, float16, bfloat16
//   q, k, v       q (B,S,N·H), k and v (B,N,L,H)           q (B,Nq,S,H), k (B,Nkv,L,H),
//                                                          v (B,Nkv,L,Hv)
//   heads         one count for q, k and v (grouped ones   Nq a multiple of Nkv
//                 the model pairs itself: repeated; one
//                 the MatMuls broadcast: expanded)
//   head size     one for q and k; v's may differ where k  v's may differ
//                 and v go in 3-D (B,L,N·H) and no past
//                 (present is written in k's head size)
//   bias          attention_bias (B|1, N|1, S, L)          attn_mask, the same shapes
//   causal        unidirectional (S = L only)              is_causal (S = L only)
//   scale         a float32 attribute: positive, finite, not rounded to 0
//
//                 com.microsoft GroupQueryAttention (--target ort, grouped heads, causal only)
//   q, k, v       q (B,S,N·H), k and v (B,S,Nkv·H): as many new keys as queries
//   causal        always, the diagonal bottom-right (a past's keys all shown)
//   past          (B,Nkv,P,H); ONNX Runtime 1.23 then wants one batch row or one query
//   bias          attention_bias, as MultiHeadAttention's
//   head size     a multiple of 8 (ONNX Runtime 1.23)
//   softcap       c · tanh(s / c) on the scaled scores, before the bias and causality
//   CUDA          no attention bias (ONNX Runtime 1.23 refuses one at run time)
//   CPU           not in float16 with a past (less accurate there than the model)
// clang-format on
//
// float64 is refused by both: MultiHeadAttention has no float64 kernel, and Attention would compute
// its softmax in a narrower type than the model does.
//
// Precision: a block's Casts say in which type each step runs, wherever they sit. The op computes
// the two products in one type T, the widest of the types QKᵀ and ·V read their operands in
// (q, kᵀ, the probabilities, v), where one holds every other exactly; both ops keep the steps
// between them (scale, bias, softmax) in float32 whatever T is, as the kernels' accumulators do,
// so a float32 island there changes nothing and a step run wider than float32 and T is refused.
// An operand or bias term of another type is cast to T on the way in (the model's own widening,
// or the narrowing it did itself), and the output is cast back to the type the block returned,
// so every reader outside reads the type it read before. The op thus never computes a step in a
// narrower type than the model did. What it computes wider is the report's: its `compute_type`,
// and `narrowings_removed`, the block's Casts to a type that does not hold T (a converter's
// float32 → float16 → float32 round trip in a block computed in float32): the values they
// rounded are no longer rounded, an accuracy change the user should know of, never a loss.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fusekit/graph/facts.hpp"
#include "fusekit/pattern/match.hpp"
#include "fusekit/rewrite/emitter.hpp"
#include "fusekit/rewrite/rule.hpp"
#include "options.hpp"

namespace fusekit::rules::fused {

using rewrite::verdict;
using target = attention_options::target;

// The attention a rule found, in the terms of the contracts: q, k and v as BNSH-shaped values of
// the source graph (kᵀ as [B, N, H, L], or k itself where the graph holds no 4-D kᵀ), the scale,
// and the additive bias if there is one.
struct attention_call {
  // The type the op computes in (compute_type of the block); undefined where none holds the
  // others exactly.
  dtype type = dtype::undefined;
  value_id q = no_id;
  value_id kt = no_id;
  value_id v = no_id;
  // The axis of `kt` that counts the keys: 3 for kᵀ, 2 for k.
  int key_axis = 3;
  double scale = 0;
  // The bias's dims as broadcasting gives them; an empty optional when the rule could not prove
  // them (then `bias_text` says what it saw).
  bool has_bias = false;
  std::optional<std::vector<sym>> bias_dims{};
  std::string bias_text{};
  dtype bias_type = dtype::undefined;
  // The bias's key axis is not proven v's key length: the emit expands it to that length.
  bool bias_expanded_over_keys = false;
  // Its query axis is not proven q's length: the emit expands it to that length.
  bool bias_expanded_over_queries = false;
  // The model pairs query head n with key/value head n / (N / Nkv) itself (q's heads folded into
  // its query axis): grouped heads, which MultiHeadAttention reads repeated.
  bool heads_paired = false;
};

// Whether every value of `narrow` is one of `wide`: the widening Cast is exact.
inline bool holds_exactly(dtype wide, dtype narrow) {
  if (wide == narrow) return true;
  const bool half = narrow == dtype::float16 || narrow == dtype::bfloat16;
  if (wide == dtype::float32) return half;
  if (wide == dtype::float64) return half || narrow == dtype::float32;
  return false;
}
// Widens `t`, the widest type so far (undefined: none yet), to hold `x` as well: false where
// neither holds the other (float16 and bfloat16: each has values the other lacks).
inline bool widen_to_hold(dtype& t, dtype x) {
  if (t == dtype::undefined || holds_exactly(x, t))
    t = x;
  else if (!holds_exactly(t, x))
    return false;
  return true;
}
// The one of `types` that holds all the others exactly; undefined where there is none, or where
// one of them is unknown.
inline dtype widest_type(std::initializer_list<dtype> types) {
  dtype out = dtype::undefined;
  for (dtype t : types)
    if (t == dtype::undefined || !widen_to_hold(out, t)) return dtype::undefined;
  return out;
}

// Whether a Cast to `to` rounds values of `from`: the target does not hold them all.
inline bool narrows(dtype from, dtype to) { return !holds_exactly(to, from); }

// The type T the policy above gives a block whose products are `products`: the widest of their
// operands' types (those it knows); undefined where none holds the others.
inline dtype compute_type(const graph& g, std::initializer_list<node_id> products) {
  dtype t = dtype::undefined;
  for (node_id n : products)
    for (value_id x : g.inputs(n))
      if (g.type(x) != dtype::undefined && !widen_to_hold(t, g.type(x))) return dtype::undefined;
  return t;
}

// The first of `nodes` that computes in a type neither float32 nor `t` holds (its Casts, which only
// say where types change, aside), or no_id: a step the op would compute narrower than the model.
inline node_id step_wider_than(const graph& g, std::span<const node_id> nodes, dtype t) {
  for (node_id n : nodes) {
    if (!g.domain(n).empty() || g.op_type(n) == "Cast") continue;
    for (value_id y : g.outputs(n))
      if (y != no_id && is_float(g.type(y)) && !holds_exactly(dtype::float32, g.type(y)) &&
          !holds_exactly(t, g.type(y)))
        return n;
  }
  return no_id;
}

inline std::string dims_text(const facts& f, const std::vector<sym>& dims) {
  std::string out = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + f.text(dims[i]);
  return out + "]";
}

// numpy broadcasting of two proven shapes; empty where a pair of dims is not proven compatible.
inline std::optional<std::vector<sym>> broadcast(const std::vector<sym>& a,
                                                 const std::vector<sym>& b) {
  const std::size_t r = std::max(a.size(), b.size());
  std::vector<sym> out(r, sym::constant(1));
  for (std::size_t i = 0; i < r; ++i) {
    const sym* x = i < r - a.size() ? nullptr : &a[i - (r - a.size())];
    const sym* y = i < r - b.size() ? nullptr : &b[i - (r - b.size())];
    if (x == nullptr || x->is_constant(1))
      out[i] = y ? *y : sym::constant(1);
    else if (y == nullptr || y->is_constant(1) || equal(*x, *y) == truth::yes)
      out[i] = *x;
    else
      return std::nullopt;
  }
  return out;
}

inline std::int64_t heads_of(const facts& f, const attention_call& c, const attention_options& o) {
  if (auto h = f.dim_of(c.q, 1)->constant()) return *h;
  return o.num_heads;  // only where the model does not say; `admits` refuses a contradiction
}

inline verdict admits_dtype(dtype t, target to) {
  const bool ok =
      t == dtype::float32 || t == dtype::float16 || (t == dtype::bfloat16 && to == target::onnx);
  if (ok) return verdict::yes();
  return verdict::no(to == target::ort
                         ? "MultiHeadAttention takes float32 or float16, not " +
                               std::string(dtype_name(t))
                         : "Attention is emitted for float32, float16 or bfloat16, not " +
                               std::string(dtype_name(t)) +
                               ": its softmax would run in a narrower type than the model's");
}

// "; <where the proof broke>" for the first of these values whose rank is unknown, or "".
inline std::string broken_at(const facts& f, std::initializer_list<value_id> values) {
  for (value_id v : values)
    if (std::string why = f.why_unknown(v); !why.empty()) return "; " + why;
  return {};
}
// The same for the first of these dims that is neither a number nor named.
inline std::string broken_at(const facts& f, std::initializer_list<std::pair<value_id, int>> dims) {
  for (const auto& [v, i] : dims)
    if (std::string why = f.why_unknown(v, i); !why.empty()) return "; " + why;
  return {};
}

// One key/value head that the MatMuls broadcast against q's heads (multi-query attention):
// MultiHeadAttention, which takes one head count, reads k and v expanded to q's.
inline bool shares_one_kv_head(const facts& f, const attention_call& c) {
  return f.dim_of(c.kt, 1)->is_constant(1) && f.dim_of(c.v, 1)->is_constant(1) &&
         !f.dim_of(c.q, 1)->is_constant(1);
}

inline verdict admits_shapes(const facts& f, const attention_call& c, target to) {
  const value_id q = c.q, kt = c.kt, v = c.v;
  if (f.rank(q) != 4u || f.rank(kt) != 4u || f.rank(v) != 4u)
    return verdict::no("q, kᵀ and v are not proven 4-D [batch, heads, sequence, head size]: q " +
                       f.shape_text(q) + ", kᵀ " + f.shape_text(kt) + ", v " + f.shape_text(v) +
                       broken_at(f, {q, kt, v}));
  // The MatMuls broadcast batch and heads; the fused ops take them equal, so equal is proven.
  for (const auto& [other, label] : {std::pair{kt, "kᵀ"}, std::pair{v, "v"}})
    if (f.same_dim(q, 0, other, 0) != truth::yes)
      return verdict::no(std::string("the batch of q and ") + label + " is not proven equal (" +
                         f.shape_text(q) + " against " + f.shape_text(other) +
                         "): the MatMul broadcasts, the fused op does not" +
                         broken_at(f, {{q, 0}, {other, 0}}));
  const bool same_heads =
      f.same_dim(q, 1, kt, 1) == truth::yes && f.same_dim(q, 1, v, 1) == truth::yes;
  if (!same_heads) {
    const auto q_heads = f.dim_of(q, 1)->constant(), kv_heads = f.dim_of(kt, 1)->constant();
    const bool grouped = (to == target::onnx || c.heads_paired || shares_one_kv_head(f, c)) &&
                         f.same_dim(kt, 1, v, 1) == truth::yes && q_heads && kv_heads &&
                         *kv_heads > 0 && *q_heads % *kv_heads == 0;
    if (!grouped)
      return verdict::no("the heads of q " + f.shape_text(q) + " and of kᵀ " + f.shape_text(kt) +
                         " and v " + f.shape_text(v) +
                         " are not proven equal, nor one key/value head, nor (target onnx) a "
                         "proven multiple of the key/value heads");
  }
  return verdict::yes();
}

// Both ops take the bias as (B or 1, N or 1, S, L) in q's dtype.
inline verdict admits_bias(const facts& f, const attention_call& c, dtype t) {
  if (!c.has_bias) return verdict::yes();
  const value_id q = c.q, v = c.v;
  auto fits = [&](std::vector<sym> d) {
    // A mask of rank 2 or 3 broadcast from the right, as the Add did: the bias gets ones in
    // front (sdpa::bias).
    if (d.size() == 2 || d.size() == 3) d.insert(d.begin(), 4 - d.size(), sym::constant(1));
    auto one_or = [&](int i, const sym* x) {
      return d[std::size_t(i)].is_constant(1) || equal(d[std::size_t(i)], *x) == truth::yes;
    };
    return d.size() == 4 && one_or(0, f.dim_of(q, 0)) && one_or(1, f.dim_of(q, 1)) &&
           equal(d[2], *f.dim_of(q, 2)) == truth::yes && equal(d[3], *f.dim_of(v, 2)) == truth::yes;
  };
  if (!c.bias_dims || !fits(*c.bias_dims))
    return verdict::no("the mask " + (c.bias_dims ? dims_text(f, *c.bias_dims) : c.bias_text) +
                       " is not proven to be (batch or 1, heads or 1, sequence, key length) "
                       "for q " +
                       f.shape_text(q) + " and v " + f.shape_text(v));
  if (c.bias_type == dtype::undefined || !holds_exactly(t, c.bias_type))
    return verdict::no("the mask is " + std::string(dtype_name(c.bias_type)) + ", which the " +
                       std::string(dtype_name(t)) +
                       " the fused op computes and adds it in does not hold");
  return verdict::yes();
}

// The scale is written as a float32 attribute: it must survive that as a positive finite number.
inline verdict admits_scale(double scale) {
  const float written = float(scale);
  if (!std::isfinite(scale) || scale <= 0 || !std::isfinite(written) || written == 0.0f)
    return verdict::no("the scale " + pattern::number_text(scale) +
                       " is not a positive finite float32 number");
  return verdict::yes();
}

// Whether the op of `to` can compute `c` exactly as the model does.
inline verdict admits(const graph& g, const attention_call& c, const attention_options& o) {
  const facts& f = facts_of(g);
  const dtype t = c.type;
  const target to = o.fused_target;
  if (!is_float(g.type(c.q)))
    return verdict::no("q has dtype " + std::string(dtype_name(g.type(c.q))));
  if (auto no = admits_shapes(f, c, to); !no) return no;
  if (t == dtype::undefined)
    return verdict::no("q is " + std::string(dtype_name(g.type(c.q))) + ", kᵀ " +
                       std::string(dtype_name(g.type(c.kt))) + " and v " +
                       std::string(dtype_name(g.type(c.v))) +
                       ": no one of their types holds the others exactly, to compute in");
  if (auto no = admits_dtype(t, to); !no) return no;
  const auto model_heads = f.dim_of(c.q, 1)->constant();
  if (!model_heads && o.num_heads == 0)
    return verdict::no("the head count of q " + f.shape_text(c.q) +
                       " is not a number the model proves; give it with --num-heads");
  if (model_heads && o.num_heads > 0 && *model_heads != o.num_heads)
    return verdict::no("--num-heads " + std::to_string(o.num_heads) + " contradicts the " +
                       std::to_string(*model_heads) + " heads of the model");
  if (auto no = admits_bias(f, c, t); !no) return no;
  if (auto no = admits_scale(c.scale); !no) return no;
  if (to == target::onnx && g.opset("") < 23)
    return verdict::no("target onnx needs ai.onnx opset 23 for Attention; the model imports " +
                       std::to_string(g.opset("")) + " and fusekit does not raise it");
  return verdict::yes();
}

// Whether v's head size is not proven q's: MultiHeadAttention then reads k and v 3-D, and no
// cache (its present value would have k's head size); GroupQueryAttention takes one head size.
inline bool own_value_head_size(const facts& f, value_id q, value_id v) {
  return f.same_dim(q, 3, v, 3) != truth::yes;
}

// x [B, L, N·H] where `heads` [B, L, N, H] is only x's Reshape that splits the last axis into
// heads (every element where row-major order puts it), else no_id.
inline value_id heads_split_from(const graph& g, value_id heads) {
  const node_id split = g.producer(heads);
  if (split == no_id || !g.domain(split).empty() || g.op_type(split) != "Reshape") return no_id;
  const facts& f = facts_of(g);
  const value_id x = g.input(split, 0);
  if (f.rank(x) != 3u || f.rank(heads) != 4u || f.same_dim(x, 0, heads, 0) != truth::yes ||
      f.same_dim(x, 1, heads, 1) != truth::yes ||
      equal(*f.dim_of(x, 2), *f.dim_of(heads, 2) * *f.dim_of(heads, 3)) != truth::yes)
    return no_id;
  return x;
}

// The [B, L, N·H] value a BNSH operand is a view of (Transpose(0, 2, 1, 3) of its heads split),
// else no_id. The ops take q, k and v in that layout too: read so, the model's views before the
// op go, and ONNX Runtime's CPU MultiHeadAttention runs 1 to 10% faster on them (BERT-base to
// Whisper-encoder shapes, benchmarks/RESULTS.md).
inline value_id three_d_of(const graph& g, value_id bnsh) {
  const node_id t = g.producer(bnsh);
  if (t == no_id || !g.domain(t).empty() || g.op_type(t) != "Transpose") return no_id;
  const auto perm = g.attribute_ints(t, "perm");
  if (!perm || !std::ranges::equal(*perm, std::vector<std::int64_t>{0, 2, 1, 3})) return no_id;
  return heads_split_from(g, g.input(t, 0));
}

// A block GroupQueryAttention would compute: q and the new keys and values k_new, v_new (BNSH,
// grouped heads) as the op takes them, with or without a past; the type it computes in; whether
// it adds a bias; the provider that runs it.
struct group_query_call {
  value_id q = no_id, k_new = no_id, v_new = no_id;
  bool has_past = false;
  dtype type = dtype::undefined;
  bool biased = false;
  provider runs_on = provider::cpu;
};

// Whether GroupQueryAttention computes a causal block with grouped heads exactly, on the provider
// that runs it.
inline verdict admits_group_query(const facts& f, const group_query_call& c) {
  // ONNX Runtime's kernel table: CUDA registers the op for float16 and bfloat16 alone.
  if (c.type == dtype::float32 && c.runs_on == provider::cuda)
    return verdict::no("ONNX Runtime's CUDA GroupQueryAttention has no float32 kernel");
  if (c.biased && c.runs_on == provider::cuda)
    return verdict::no("ONNX Runtime's CUDA GroupQueryAttention takes no attention bias");
  // ONNX Runtime's CPU kernel in float16 with a past rounds more than the model's own steps:
  // transformers 4.49's LLaMA decode step came out 4.7× the original's error against its float32
  // twin on a padded row. MultiHeadAttention on the repeated heads does not.
  if (c.has_past && c.type == dtype::float16 && c.runs_on == provider::cpu)
    return verdict::no(
        "in float16 with a past it is less accurate on ONNX Runtime's CPU provider "
        "(--provider cuda takes it)");
  if (own_value_head_size(f, c.q, c.v_new))
    return verdict::no("the head size of v " + f.shape_text(c.v_new) + " is not proven q's " +
                       f.shape_text(c.q));
  const auto head_size = f.dim_of(c.q, 3)->constant();
  if (!head_size || *head_size % 8 != 0)
    return verdict::no("the head size " + f.text(*f.dim_of(c.q, 3)) +
                       " is not a proven multiple of 8");
  const sym* kv_heads = f.rank(c.k_new) == 4u ? f.dim_of(c.k_new, 1) : nullptr;
  if (kv_heads == nullptr || !kv_heads->constant())
    return verdict::no("the key/value heads of " + f.shape_text(c.k_new) + " are not a number");
  if (f.same_dim(c.q, 2, c.k_new, 2) != truth::yes)
    return verdict::no("the new keys " + f.shape_text(c.k_new) +
                       " are not proven as many as the queries " + f.shape_text(c.q));
  if (c.has_past && !f.dim_of(c.q, 2)->is_constant(1) && !f.dim_of(c.q, 0)->is_constant(1))
    return verdict::no("with a past it takes one query or one batch row, and q is " +
                       f.shape_text(c.q));
  return verdict::yes();
}

// The ops' default scale is 1/√(head size): where the call's scale is exactly that, the fused node
// leaves the attribute out.
inline bool default_scale(const facts& f, const attention_call& c) {
  const auto head_size = f.dim_of(c.q, 3)->constant();
  return head_size && c.scale == 1.0 / std::sqrt(double(*head_size));
}

// Names of the emitted operands: q and v BNSH as the model has them, k already BNSH, the bias
// (empty for none); for Attention's merged output, the model's own (B, S, N·H) shape to reuse.
// `zero_hidden_rows`: the block zeroes the rows its bias hides entirely (torch's NaN guard).
// `past_k`, `past_v`: a decoder step's cache, which the op extends by k and v (empty for none).
// `causal`: the op hides the keys after each query itself, the diagonal top-left (the rule has
// proven that is where the model's mask puts it). `group_query_kv_heads` > 0: target ort emits
// GroupQueryAttention on k and v with that many heads (`admits_group_query` said yes).
struct operands {
  std::string q, k, v, bias, merged_shape;
  // The model's own [B, L, N·H] q, k and v where the BNSH ones are views of them (three_d_of),
  // empty where not: target ort reads them in place of transposing q, k and v itself.
  std::string q_bsd{}, k_bsd{}, v_bsd{};
  bool zero_hidden_rows = false;
  std::string past_k{}, past_v{};
  bool causal = false;
  std::int64_t group_query_kv_heads = 0;
  // GroupQueryAttention's `softcap`: c · tanh(s / c) on the scaled scores, before the mask (0 for
  // none; only that op takes one).
  double softcap = 0;
};

// What the emitted op computes: attention, and with a past cache the present one (BNSH).
struct attention_outputs {
  std::string y, present_k{}, present_v{};
};

// The fused op's inputs from its bias on (`bias_slot` is where the bias goes; the past key and
// value follow it), and its outputs read back, both as either op lays them out.
inline void add_bias_and_past(std::vector<std::string>& inputs, std::size_t bias_slot,
                              const operands& in) {
  if (in.bias.empty() && in.past_k.empty()) return;
  inputs.resize(bias_slot);
  inputs.push_back(in.bias);
  if (!in.past_k.empty()) inputs.insert(inputs.end(), {in.past_k, in.past_v});
}
inline attention_outputs outputs_of(const std::vector<std::string>& out) {
  if (out.size() == 1) return {out[0]};
  return {out[0], out[1], out[2]};
}

// Both ops give NaN for a query row whose bias is −inf at every key, as Softmax does; torch's
// NaN guard makes that row's probabilities 0, so its output is 0. The same rows, found from the
// bias alone: (B|1, N|1, S, 1), true where the row's largest bias is −inf.
inline std::string hidden_rows(const graph& g, const std::string& bias, dtype t,
                               rewrite::emitter& e) {
  const std::string largest =
      g.opset("") >= 18
          ? e.op("ReduceMax", {bias, e.ints({-1})}, {{"keepdims", 1}})
          : e.op("ReduceMax", {bias}, {{"axes", std::vector<std::int64_t>{-1}}, {"keepdims", 1}});
  return e.op("Equal", {largest, e.constant(t, {}, {-std::numeric_limits<double>::infinity()})});
}

// x with dims of 1 inserted at `axes`: Unsqueeze, whose axes are an input from opset 13 on.
inline std::string unsqueezed(const graph& g, rewrite::emitter& e, const std::string& x,
                              const std::vector<std::int64_t>& axes) {
  if (g.opset("") >= 13) return e.op("Unsqueeze", {x, e.ints(axes)});
  return e.op("Unsqueeze", {x}, {{"axes", axes}});
}

// Emits the op of the options' target for a call `admits` accepted. Returns the (B, S, N·H)
// output if `merged`, else BNSH; each op writes one of them and the other is converted.
// One dim of x as the model runs it, a one-element int64 tensor.
inline std::string run_time_dim(rewrite::emitter& e, const std::string& x, int axis) {
  return e.op("Gather", {e.op("Shape", {x}), e.ints({axis})});
}

inline attention_outputs emit_attention(const graph& g, const attention_call& c, const operands& in,
                                        rewrite::emitter& e, const attention_options& o,
                                        bool merged) {
  const facts& f = facts_of(g);
  const dtype t = c.type;
  const std::int64_t num_heads = heads_of(f, c, o);
  const bool zero_rows = in.zero_hidden_rows && !in.bias.empty();
  const int outputs = in.past_k.empty() ? 1 : 3;
  const auto perm_0213 = [] { return std::vector<std::int64_t>{0, 2, 1, 3}; };
  const auto attributes = [&](std::vector<build::attr> own) {
    if (!default_scale(f, c)) own.emplace_back("scale", c.scale);
    return own;
  };
  e.note("num_heads", num_heads);
  if (o.fused_target == target::onnx) {
    e.note("target", "ai.onnx Attention");
    std::vector<std::string> inputs{in.q, in.k, in.v};
    add_bias_and_past(inputs, 3, in);
    std::vector<build::attr> own{{"softmax_precision", dtype::float32}};
    if (in.causal) own.emplace_back("is_causal", 1);
    attention_outputs r =
        outputs_of(e.ops("Attention", inputs, attributes(std::move(own)), {}, outputs));
    if (zero_rows)
      r.y = e.op("Where", {hidden_rows(g, in.bias, t, e), e.constant(t, {}, {0.0}), r.y});
    if (!merged) return r;
    const auto bsnh = e.op("Transpose", {r.y}, {{"perm", perm_0213()}});
    const std::string shape = in.merged_shape.empty() ? e.ints({0, 0, -1}) : in.merged_shape;
    r.y = e.op("Reshape", {bsnh, shape});
    return r;
  }
  const auto bsd = [&](const std::string& bnsh) {
    const auto bsnh = e.op("Transpose", {bnsh}, {{"perm", perm_0213()}});
    return e.op("Reshape", {bsnh, e.ints({0, 0, -1})});
  };
  const auto q_bsd = in.q_bsd.empty() ? bsd(in.q) : in.q_bsd;
  const auto k_bsd = [&] { return in.k_bsd.empty() ? bsd(in.k) : in.k_bsd; };
  const auto v_bsd = [&] { return in.v_bsd.empty() ? bsd(in.v) : in.v_bsd; };
  attention_outputs r;
  if (in.group_query_kv_heads > 0) {
    e.note("target", "com.microsoft GroupQueryAttention");
    // Every batch row holds all its keys: seqlens_k is the last key's index in each row.
    const auto dim = [&](const std::string& x, int axis) { return run_time_dim(e, x, axis); };
    std::string total = dim(in.k, 2);
    if (!in.past_k.empty()) total = e.op("Add", {dim(in.past_k, 2), total});
    const auto last = e.op("Sub", {total, e.ints({1})});
    const auto seqlens_k =
        e.op("Cast", {e.op("Expand", {last, dim(in.q, 0)})}, {{"to", dtype::int32}});
    const auto total_length =
        e.op("Cast", {e.op("Reshape", {total, e.ints({})})}, {{"to", dtype::int32}});
    // Inputs 7 to 9 (rotary caches, position ids) stay empty; 10 is the attention bias.
    std::vector<std::string> inputs{q_bsd,     k_bsd(),   v_bsd(),     in.past_k,
                                    in.past_v, seqlens_k, total_length};
    if (!in.bias.empty()) {
      inputs.resize(10);
      inputs.push_back(in.bias);
    }
    std::vector<build::attr> own{{"num_heads", num_heads},
                                 {"kv_num_heads", in.group_query_kv_heads}};
    if (in.softcap > 0) own.emplace_back("softcap", in.softcap);
    r = outputs_of(
        e.ops("GroupQueryAttention", inputs, attributes(std::move(own)), "com.microsoft", 3));
  } else {
    e.note("target", "com.microsoft MultiHeadAttention");
    // Inputs 3 and 4 (bias, key padding mask) stay empty; 5 is the attention bias, 6 and 7 the
    // past key and value.
    // A value head size of its own is taken from v 3-D only.
    const bool own_v = own_value_head_size(f, c.q, c.v);
    if (own_v) e.note("value_head_size", "v's own: k and v read 3-D");
    // k and v in one layout: both 3-D where the model has both so, or v's head size asks it.
    const bool three_d = own_v || (!in.k_bsd.empty() && !in.v_bsd.empty());
    std::vector<std::string> inputs{q_bsd, three_d ? k_bsd() : in.k, three_d ? v_bsd() : in.v};
    add_bias_and_past(inputs, 5, in);
    std::vector<build::attr> own{{"num_heads", num_heads}};
    // MultiHeadAttention hides the causal keys with mask_filter_value: the lowest float32 hides
    // them as the model's −inf or finfo.min does, where the default −10000 is a score like
    // others.
    if (in.causal)
      own.insert(own.end(), {{"unidirectional", 1},
                             {"mask_filter_value", double(std::numeric_limits<float>::lowest())}});
    r = outputs_of(
        e.ops("MultiHeadAttention", inputs, attributes(std::move(own)), "com.microsoft", outputs));
  }
  if (merged && !zero_rows) return r;
  std::string bsnh = e.op("Reshape", {r.y, e.ints({0, 0, num_heads, -1})});
  if (zero_rows) {
    const auto hidden = e.op("Transpose", {hidden_rows(g, in.bias, t, e)}, {{"perm", perm_0213()}});
    bsnh = e.op("Where", {hidden, e.constant(t, {}, {0.0}), bsnh});
    if (merged) {
      r.y = e.op("Reshape", {bsnh, e.ints({0, 0, -1})});
      return r;
    }
  }
  r.y = e.op("Transpose", {bsnh}, {{"perm", perm_0213()}});
  return r;
}

}  // namespace fusekit::rules::fused
