// Rotary position embeddings (RoPE) in the halves form every rotate_half model writes, as one op.
//
//   x ─┬───────────────────────────────────────────────── Mul(·, cos) ──┐
//      ├─ Slice(h:) ── Neg ──┐                                          Add ── y
//      └─ Slice(:h) ─────────┴─ Concat(last axis) ── Mul(·, sin) ───────┘
//   ==>
//   target ort:  x, positions, cos[…, :h], sin[…, :h] ── com.microsoft RotaryEmbedding ── y
//   target onnx: x, cos[…, :h], sin[…, :h], positions ── RotaryEmbedding-23 ── y
//
// x is (batch, heads, sequence, head size H), h = H/2; cos and sin broadcast against it along the
// heads alone: (batch or 1, 1, sequence, H), or that shape without its leading ones. The ops read
// one angle per rotated pair (i, i + h), where the model multiplies x by a cos and a sin of H
// numbers: the two agree only where cos[…, :h] equals cos[…, h:] (and sin so), which the guard
// proves from how the model computes them — cat(θ, θ) through elementwise math and views that
// keep the last axis whole (transformers' rotary embeddings, computed or cached), or a constant
// whose halves are equal — and never assumes.
//
// The ops look their angles up by position: the model's own cos and sin, one row per (batch row,
// position), become the cache, and the positions index it row by row. So whatever the model's
// positions were (offsets of a decode step, packed or shifted sequences), the op reads the very
// angles the model computed.
//
// Accepted: the operands of both Muls and of the Add in either order; Slice bounds as any
// constant or folded expression, negative or past the end as Slice clamps them. Refused, with the
// reason: x not 4-D with a head size that is a number; a Slice that is not the half it stands
// for; cos or sin of another shape or type, or whose halves are not proven equal; float16 and
// bfloat16 (layer_ops.hpp: why the layer ops fuse float32 alone).
//
// Where it pays (benchmarks/RESULTS.md, "Kernel forms"): on ONNX Runtime's CPU provider, one
// thread, the op takes 0.7 to 0.9 of the seven ops' time at the sizes of a decode step and of a
// small model's prefill, and up to 1.4 where a prefill rotates more than a few hundred thousand
// numbers at once, where the model's matrix products outweigh it by far; on CUDA it is one kernel
// in place of seven.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fused_ops.hpp"
#include "fusekit/graph/facts.hpp"
#include "fusekit/graph/tensor.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/rule.hpp"
#include "layer_ops.hpp"
#include "options.hpp"

namespace fusekit::rules {

namespace rotary_forms {
using namespace pattern;

using layer::add;
using layer::mul;

inline constexpr auto x = capture<"x">;
inline constexpr auto upper =
    op<"Slice">(x, any(), any(), maybe(any()), maybe(any())).bind<"upper">();
inline constexpr auto lower =
    op<"Slice">(x, any(), any(), maybe(any()), maybe(any())).bind<"lower">();
// rotate_half(x) = cat(−x[…, h:], x[…, :h]), read first so that x is bound by the Slices
inline constexpr auto rotated_half = op<"Concat">(op<"Neg">(upper), lower).attr<"axis">(last_axis);
inline constexpr auto halves = add(mul(rotated_half, capture<"sin">), mul(x, capture<"cos">));

// The [from, to) of the last axis (of length `length`) that a Slice keeps, its bounds clamped as
// Slice clamps them; nullopt where a bound is not a number the facts prove, the step is not 1 or
// the Slice cuts another axis.
struct kept {
  std::int64_t from, to;
};
inline std::optional<kept> kept_of_last_axis(const graph& g, node_id slice, std::int64_t length) {
  const facts& f = facts_of(g);
  const auto rank = f.rank(g.input(slice, 0));
  if (!rank) return std::nullopt;
  auto given = [&](std::size_t k) {
    return k < g.inputs(slice).size() && g.input(slice, k) != no_id;
  };
  auto number = [&](std::size_t k) -> std::optional<std::int64_t> {
    const content_fact& c = f.content(g.input(slice, k));
    if (!c.known || c.real || c.size() != 1) return std::nullopt;
    return c.ints[0].constant();
  };
  const std::int64_t last = std::int64_t(*rank) - 1;
  const auto axis = given(3) ? number(3) : std::optional<std::int64_t>(0);
  const auto step = given(4) ? number(4) : std::optional<std::int64_t>(1);
  const auto from = number(1), to = number(2);
  if (!axis || !step || !from || !to || *step != 1 || (*axis != last && *axis != -1))
    return std::nullopt;
  auto clamp = [&](std::int64_t i) {
    if (i < 0) i += length;
    return i < 0 ? 0 : i > length ? length : i;
  };
  return kept{clamp(*from), clamp(*to)};
}

// Whether a Transpose keeps the last axis last, or a Slice cuts only other axes: each then moves
// whole rows of the last axis.
inline bool away_from_last_axis(const graph& g, node_id p) {
  const facts& f = facts_of(g);
  const auto rank = f.rank(g.input(p, 0));
  if (!rank) return false;
  const std::int64_t last = std::int64_t(*rank) - 1;
  if (g.op_type(p) == "Transpose") {
    const auto perm = g.attribute_ints(p, "perm");
    return perm && !perm->empty() && perm->back() == last;
  }
  if (g.inputs(p).size() < 4 || g.input(p, 3) == no_id) return false;
  const content_fact& axes = f.content(g.input(p, 3));
  if (!axes.known || axes.real) return false;
  for (const sym& a : axes.ints) {
    const auto k = a.constant();
    if (!k || *k == last || *k == -1) return false;
  }
  return true;
}

inline bool uniform_along_last_axis(const facts& f, value_id v) {
  const auto rank = f.rank(v);
  return rank && (*rank == 0 || f.dim_of(v, -1)->is_constant(1));
}

// Why v[…, :h] is not proven to equal v[…, h:] for every input of the model; empty where it is.
// Proven: a constant whose halves are equal; cat(a, a) on the last axis; elementwise math whose
// every operand has equal halves or one number along the last axis; views that move whole rows
// of the last axis (Unsqueeze, Squeeze, Reshape and Expand that keep its length; Gather, Slice
// and Transpose of other axes) of such a value.
inline std::string unequal_halves(const graph& g, value_id v, int depth = 16) {
  const facts& f = facts_of(g);
  const std::string of_v = "the halves of " + pattern::describe_value(g, v);
  if (uniform_along_last_axis(f, v)) return {};
  if (const onnx::TensorProto* t = g.constant_tensor(v)) {
    const tensor_values values(*t, g.directory());
    const std::int64_t length = t->dims_size() == 0 ? 1 : t->dims(t->dims_size() - 1);
    if (length % 2 != 0) return of_v + " cannot be equal: its last axis is odd";
    const std::int64_t h = length / 2, size = std::int64_t(values.size());
    for (std::int64_t row = 0; row < size; row += length)
      for (std::int64_t i = 0; i < h; ++i)
        if (values.as_double(row + i) != values.as_double(row + h + i))
          return of_v + " differ: element " + std::to_string(row + i) + " is not element " +
                 std::to_string(row + h + i);
    return {};
  }
  const node_id p = g.producer(v);
  if (p == no_id) return of_v + " are not proven equal: it is an input of the model";
  if (depth == 0) return of_v + " are not proven equal within 16 ops";
  const std::string_view op = g.domain(p).empty() ? g.op_type(p) : std::string_view();
  const value_id in = g.inputs(p).empty() ? no_id : g.input(p, 0);
  const auto rank = f.rank(v);
  auto keeps_rows = [&] { return in != no_id && f.same_dim(v, -1, in, -1) == truth::yes; };
  if (op == "Concat") {
    const auto axis = g.attribute_int(p, "axis");
    if (rank && axis && (*axis == -1 || *axis == std::int64_t(*rank) - 1) &&
        g.inputs(p).size() == 2 && g.input(p, 0) == g.input(p, 1))
      return {};
  } else if (op == "Cos" || op == "Sin" || op == "Neg" || op == "Cast" || op == "Sqrt" ||
             op == "Exp" || op == "Reciprocal" || op == "Tanh" || op == "Abs" ||
             (!op.empty() && g.passes_input_at_inference(p))) {
    return unequal_halves(g, in, depth - 1);
  } else if (op == "Mul" || op == "Div" || op == "Add" || op == "Sub" || op == "Pow") {
    for (value_id operand : g.inputs(p)) {
      if (uniform_along_last_axis(f, operand)) continue;
      if (f.same_dim(v, -1, operand, -1) != truth::yes)
        return of_v + " are not proven equal: " + pattern::describe_value(g, operand) +
               " is not proven to span its last axis";
      if (std::string why = unequal_halves(g, operand, depth - 1); !why.empty()) return why;
    }
    return {};
  } else if (op == "Unsqueeze" || op == "Squeeze" || op == "Reshape" || op == "Expand") {
    if (keeps_rows() || uniform_along_last_axis(f, in)) return unequal_halves(g, in, depth - 1);
  } else if (op == "Gather") {
    const auto data_rank = f.rank(in);
    const std::int64_t axis = g.attribute_int(p, "axis").value_or(0);
    if (data_rank && *data_rank > 1 && axis != -1 && axis != std::int64_t(*data_rank) - 1)
      return unequal_halves(g, in, depth - 1);
  } else if (op == "Slice" || op == "Transpose") {
    if (keeps_rows() && away_from_last_axis(g, p)) return unequal_halves(g, in, depth - 1);
  }
  return of_v + " are not proven equal: " + g.describe(p) + " is none of the ops that keep them so";
}

// cos or sin against x (batch, heads, sequence, head size), aligned from the right as Mul
// broadcasts: the head size, the sequence, one number for every head, the batch or one row.
inline rewrite::verdict admits_angles(const graph& g, value_id angle, value_id x) {
  const facts& f = facts_of(g);
  const auto rank = f.rank(angle);
  bool fits = rank && *rank >= 2 && *rank <= 4 && g.type(angle) == g.type(x);
  for (std::size_t k = 0; fits && k < *rank; ++k) {
    const int at = int(4 - *rank + k);
    const sym& d = *f.dim_of(angle, int(k));
    fits = at == 1   ? d.is_constant(1)
           : at == 0 ? d.is_constant(1) || f.same_dim(angle, int(k), x, 0) == truth::yes
                     : f.same_dim(angle, int(k), x, at) == truth::yes;
  }
  if (fits) return rewrite::verdict::yes();
  return rewrite::verdict::no(
      pattern::describe_value(g, angle) + " is " + std::string(dtype_name(g.type(angle))) + " " +
      f.shape_text(angle) + " against x " + std::string(dtype_name(g.type(x))) + " " +
      f.shape_text(x) +
      ": RotaryEmbedding takes the angles in x's type, one per (batch row or every row, "
      "position, pair), the same for every head");
}

}  // namespace rotary_forms

struct rotary_embedding {
  using options = fusion_options;
  static constexpr std::string_view name = "rotary-embedding";
  static constexpr auto pattern = rotary_forms::halves;

  // An Add is a rotation's only where a Neg feeds it through a Mul and a Concat: a failed match
  // at any other Add is no near miss.
  static bool resembles(const graph& g, node_id n) {
    return layer::reads_op_within(g, n, "Neg", 3);
  }

  static rewrite::verdict guard(const graph& g, const auto& m, const options& o) {
    using rewrite::verdict;
    const facts& f = facts_of(g);
    const value_id x = get<"x">(m);
    if (auto no = layer::admits_dtype(g, x, "RotaryEmbedding"); !no) return no;
    if (auto no = layer::admits_opset(g, o.fused_target, "RotaryEmbedding", 23); !no) return no;
    if (g.opset("") < 11)
      return verdict::no(
          "the positions the op reads are a Range, which came in ai.onnx opset "
          "11; the model imports " +
          std::to_string(g.opset("")) + " and fusekit does not raise it");
    const auto head_size = f.rank(x) == 4u ? f.dim_of(x, 3)->constant() : std::nullopt;
    if (!head_size || *head_size % 2 != 0)
      return verdict::no(pattern::describe_value(g, x) + " is " + f.shape_text(x) +
                         ": RotaryEmbedding takes (batch, heads, sequence, head size), the head "
                         "size an even number");
    const std::int64_t length = *head_size, h = length / 2;
    const struct {
      node_id slice;
      std::int64_t from, to;
      const char* half;
    } halves[] = {{get<"lower">(m), 0, h, "lower"}, {get<"upper">(m), h, length, "upper"}};
    for (const auto& s : halves) {
      const auto k = rotary_forms::kept_of_last_axis(g, s.slice, length);
      if (!k || k->from != s.from || k->to != s.to)
        return verdict::no(
            g.describe(s.slice) +
            (k ? " keeps [" + std::to_string(k->from) + ", " + std::to_string(k->to) + ")"
               : std::string(" keeps no proven range")) +
            " of the last axis of x, not its " + s.half + " half [" + std::to_string(s.from) +
            ", " + std::to_string(s.to) + ")");
    }
    const value_id cos = get<"cos">(m), sin = get<"sin">(m);
    for (value_id angle : {cos, sin}) {
      if (auto no = rotary_forms::admits_angles(g, angle, x); !no) return no;
      if (std::string why = rotary_forms::unequal_halves(g, angle); !why.empty())
        return verdict::no(why +
                           ": RotaryEmbedding reads one angle for each rotated pair (i, i + " +
                           std::to_string(h) + ")");
    }
    for (int k = 0; k < int(*f.rank(cos)); ++k)
      if (f.rank(sin) != f.rank(cos) || f.same_dim(cos, k, sin, k) != truth::yes)
        return verdict::no(pattern::describe_value(g, cos) + " " + f.shape_text(cos) + " and " +
                           pattern::describe_value(g, sin) + " " + f.shape_text(sin) +
                           " are not proven of one shape: RotaryEmbedding looks both up by the "
                           "same positions");
    return verdict::yes();
  }

  static void emit(const graph& g, const auto& m, rewrite::emitter& e, const options& o) {
    const facts& f = facts_of(g);
    const value_id x = get<"x">(m), cos = get<"cos">(m);
    const std::int64_t h = *f.dim_of(x, 3)->constant() / 2;
    const std::size_t rank = *f.rank(cos);
    auto four_d = [&](value_id angle) {
      std::vector<std::int64_t> front(4 - rank);
      for (std::size_t i = 0; i < front.size(); ++i) front[i] = std::int64_t(i);
      return front.empty() ? e.value(angle) : fused::unsqueezed(g, e, e.value(angle), front);
    };
    auto ints = [&](std::vector<double> v) {
      return e.constant(dtype::int64, {std::int64_t(v.size())}, std::move(v));
    };
    // The cache: the model's angles of the lower half, a row per (batch row or 1, position).
    auto cache = [&](const std::string& angle) {
      const std::string lower = e.op("Slice", {angle, ints({0}), ints({double(h)}), ints({3})});
      return e.op("Reshape", {lower, ints({-1, double(h)})});
    };
    const std::string cos4 = four_d(cos), sin4 = four_d(get<"sin">(m));
    // Row b·S + s of the cache for (b, s): a Range in the angles' (batch or 1, sequence) shape,
    // expanded over the batch where the angles are the same for every row.
    const std::string rows = e.op("Gather", {e.op("Shape", {cos4}), ints({0, 2})});
    const std::string count = e.op("ReduceProd", {rows}, {{"keepdims", std::int64_t(0)}});
    std::string positions =
        e.op("Reshape", {e.op("Range", {e.constant(dtype::int64, {}, {0}), count,
                                        e.constant(dtype::int64, {}, {1})}),
                         rows});
    if (rank < 4 || f.same_dim(cos, 0, x, 0) != truth::yes)
      positions =
          e.op("Expand", {positions, e.op("Gather", {e.op("Shape", {e.value(x)}), ints({0, 2})})});
    const std::string y =
        o.fused_target == target::ort
            ? e.op("RotaryEmbedding", {e.value(x), positions, cache(cos4), cache(sin4)}, {},
                   "com.microsoft")
            : e.op("RotaryEmbedding", {e.value(x), cache(cos4), cache(sin4), positions});
    e.replace_root(y);
    e.note("form", "halves");
  }
};

}  // namespace fusekit::rules
