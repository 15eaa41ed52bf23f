// Rotary position embeddings (RoPE), in the two forms models write them, as one op.
//
//   halves (rotate_half: LLaMA and every model that copies it):
//     x ─┬──────────────────────────────────────────────────────────── Mul(·, cos) ──┐
//        ├─ Slice(h:) ── Neg ──┐                                                     Add ── y
//        └─ Slice(:h) ─────────┴─ Concat(last axis) ─────────────────── Mul(·, sin) ─┘
//   interleaved (pairs (2i, 2i + 1): diffusers' apply_rotary_emb, x_transformers, GPT-J):
//     x ─┬──────────────────────────────────────────────────────────── Mul(·, cos) ──┐
//        └─ Reshape(…, h, 2) ─┬─ element 1 ── Neg ── Unsqueeze ──┐                   Add ── y
//                             └─ element 0 ─────────  Unsqueeze ─┴─ Concat ── Reshape(…, H)
//                                                                          ── Mul(·, sin) ┘
//   ==>
//   target ort:  x, positions, cos cache, sin cache ── com.microsoft RotaryEmbedding ── y
//   target onnx: x, cos cache, sin cache, positions ── RotaryEmbedding-23 ── y
//   (interleaved=1 for the second form)
//
// x has head size H (a number, even), h = H/2, in either layout: (batch, heads, sequence, H), the
// ops' own, or (batch, sequence, heads, H), which they take as (batch, sequence, heads·H) with
// num_heads; cos and sin vary by batch row (or not at all) and position, never by head, and the
// layout is the one their dims prove. The ops read one angle per rotated pair, (i, i + h) or
// (2i, 2i + 1), where the model multiplies x by a cos and a sin of H numbers: the two agree only
// where both numbers of every pair are equal, which the guard proves from how the model
// computes them — cat(θ, θ) or θ repeated element by element, through elementwise math and views
// that keep the last axis whole, or a constant whose pairs are equal — and never assumes.
//
// The ops look their angles up by position: the model's own cos and sin, one row per (batch row,
// position), become the cache, and the positions index it row by row. So whatever the model's
// positions were (a decode step's offsets, packed or shifted sequences, 2-D image positions), the
// op reads the very angles the model computed.
//
// Accepted: the operands of every Mul and of the Add in either order; x_transformers' scale of
// exactly 1 multiplied into each product; Casts to the type a value has; Slice bounds as any
// constant or folded expression, negative or past the end as Slice clamps them; a pair's elements
// by Slice or Split then Squeeze, or by Gather of one index. Refused, with the reason: a head size
// that is not a number; a Slice, Split, Gather or view that is not what its place in the form
// needs; cos or sin of another shape or type, or whose pairs are not proven equal; float16 and
// bfloat16 but for --provider cuda (layer_ops.hpp says why). A partial rotation, the first r
// numbers of each head, is widened to the whole head once its part has fused (below).
//
// Why it is the default for both providers (benchmarks/kernel_forms.py, results in
// benchmarks/RESULTS.md): on ONNX Runtime's CPU provider, one thread, q and k rotated with the
// sequence length known at run time only, the fused op with its cache and positions takes 0.41
// to 0.97 of the halves form's time and 0.29 to 0.70 of the interleaved form's, from a decode step
// of one token to a Flux-size prefill (ONNX Runtime 1.23 and 1.32 alike); on CUDA it is one
// kernel in place of seven or thirteen.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fused_ops.hpp"
#include "fusekit/graph/facts.hpp"
#include "fusekit/graph/model_builder.hpp"
#include "fusekit/graph/tensor.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/rule.hpp"
#include "layer_ops.hpp"
#include "options.hpp"

namespace fusekit::rules {

enum class rotary_form { halves, interleaved };

namespace rotary_forms {
using namespace pattern;

using layer::add;
using layer::mul;

inline constexpr auto x = capture<"x">;
inline constexpr auto sliced = [](auto in) {
  return op<"Slice">(in, any(), any(), maybe(any()), maybe(any()));
};

// rotate_half(x) = cat(−x[…, h:], x[…, :h]), read first so that the Slices bind x
inline constexpr auto rotated_halves =
    op<"Concat">(op<"Neg">(sliced(x).bind<"upper">()), sliced(x).bind<"lower">())
        .attr<"axis">(last_axis);

// stack(−x[…, 1::2], x[…, ::2]) flattened: each pair (a, b) of x becomes (−b, a)
inline constexpr auto pairs = op<"Reshape">(x, any()).bind<"pairs">();
// element 1 and element 0 of each pair: by Slice or Split, the pair's axis squeezed away, or by
// Gather of one index, which drops it
inline constexpr auto imag =
    any_of(op<"Squeeze">(any_of(sliced(pairs).bind<"imag_slice">(),
                                op<"Split">(pairs, maybe(any())).output(1).bind<"split">()),
                         maybe(any())),
           op<"Gather">(pairs, any()).bind<"imag_gather">());
inline constexpr auto real =
    any_of(op<"Squeeze">(any_of(sliced(pairs).bind<"real_slice">(),
                                op<"Split">(pairs, maybe(any())).output(0).bind<"split">()),
                         maybe(any())),
           op<"Gather">(pairs, any()).bind<"real_gather">());
inline constexpr auto rotated_pairs =
    op<"Reshape">(op<"Concat">(op<"Unsqueeze">(op<"Neg">(imag).bind<"neg">(), maybe(any())),
                               op<"Unsqueeze">(real, maybe(any())))
                      .attr<"axis">(last_axis),
                  any())
        .bind<"merge">();

// x_transformers multiplies each product by its scale, 1 where it does not extrapolate
inline constexpr auto times_one = [](auto product, auto one) {
  return optional_op(mul(product, one.value(1.0)));
};
template <rotary_form F>
inline constexpr auto rotated = [] {
  if constexpr (F == rotary_form::halves)
    return rotated_halves;
  else
    return rotated_pairs;
}();
template <rotary_form F>
inline constexpr auto rotation =
    add(times_one(mul(transparent(rotated<F>), capture<"sin">), constant_scalar<"sin_scale">),
        times_one(mul(transparent(x), capture<"cos">), constant_scalar<"cos_scale">));

}  // namespace rotary_forms

namespace rotary_forms {

// The [from, to) of the last axis (of length `length`) that a Slice keeps, its bounds clamped as
// Slice clamps them; nullopt where a bound is not a number the facts prove, the step is not 1 or
// the Slice cuts another axis.
struct kept {
  std::int64_t from, to;
};
// Whether `axis` of node n (read against its input 0) is the last, as the DSL's last_axis proves
// it.
inline bool on_last_axis(const graph& g, node_id n, std::int64_t axis) {
  return last_axis.is_last(g, n, axis) == truth::yes;
}
inline std::optional<kept> kept_of_last_axis(const graph& g, node_id slice, std::int64_t length) {
  const facts& f = facts_of(g);
  auto given = [&](std::size_t k) {
    return k < g.inputs(slice).size() && g.input(slice, k) != no_id;
  };
  auto number = [&](std::size_t k) -> std::optional<std::int64_t> {
    const content_fact& c = f.content(g.input(slice, k));
    if (!c.known || c.real || c.size() != 1) return std::nullopt;
    return c.ints[0].constant();
  };
  const auto axis = given(3) ? number(3) : std::optional<std::int64_t>(0);
  const auto step = given(4) ? number(4) : std::optional<std::int64_t>(1);
  const auto from = number(1), to = number(2);
  if (!axis || !step || !from || !to || *step != 1 || !on_last_axis(g, slice, *axis))
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
  const auto axes = f.ints(g.input(p, 3));
  return axes && std::none_of(axes->begin(), axes->end(),
                              [&](std::int64_t k) { return k == last || k == -1; });
}

inline bool uniform_along_last_axis(const facts& f, value_id v) {
  const auto rank = f.rank(v);
  return rank && (*rank == 0 || f.dim_of(v, -1)->is_constant(1));
}

// Whether dims [0, count) of a and b are proven equal.
inline bool same_leading_dims(const facts& f, value_id a, value_id b, int count) {
  for (int i = 0; i < count; ++i)
    if (f.same_dim(a, i, b, i) != truth::yes) return false;
  return true;
}

// Whether a and b hold the same numbers for every input of the model: one value, equal folded
// contents, or the outputs of two nodes of one deterministic view or cast with the same
// attributes reading the same values (an exporter writes torch.stack((f, f)) with an Unsqueeze
// for each f).
inline bool same_numbers(const graph& g, value_id a, value_id b, int depth = 4) {
  if (a == b) return true;
  if (a == no_id || b == no_id || depth == 0) return false;
  const facts& f = facts_of(g);
  const content_fact &ca = f.content(a), &cb = f.content(b);
  if (ca.known && cb.known && ca.real == cb.real && ca.size() == cb.size()) {
    bool equal_contents = true;
    for (std::size_t i = 0; equal_contents && i < ca.size(); ++i)
      equal_contents =
          ca.real ? ca.reals[i] == cb.reals[i] : equal(ca.ints[i], cb.ints[i]) == truth::yes;
    if (equal_contents) return true;
  }
  const node_id pa = g.producer(a), pb = g.producer(b);
  if (pa == no_id || pb == no_id || !g.domain(pa).empty() || !g.domain(pb).empty() ||
      g.op_type(pa) != g.op_type(pb) || g.inputs(pa).size() != g.inputs(pb).size() ||
      g.outputs(pa).size() != 1 || g.outputs(pb).size() != 1)
    return false;
  const std::string_view op = g.op_type(pa);
  if (op != "Unsqueeze" && op != "Squeeze" && op != "Reshape" && op != "Cast" &&
      op != "Transpose" && op != "Identity" && op != "Expand")
    return false;
  const auto& na = g.node(pa).attribute();
  const auto& nb = g.node(pb).attribute();
  if (na.size() != nb.size()) return false;
  for (int i = 0; i < na.size(); ++i)
    if (na[i].SerializeAsString() != nb[i].SerializeAsString()) return false;
  for (std::size_t k = 0; k < g.inputs(pa).size(); ++k)
    if (!same_numbers(g, g.input(pa, k), g.input(pb, k), depth - 1)) return false;
  return true;
}

// Why the two numbers of some rotated pair of v's last axis — (i, i + h) for the halves form,
// (2i, 2i + 1) for the interleaved — are not proven equal; empty where every pair's are. Proven:
// a constant whose pairs are equal; cat(a, a) on the last axis (halves), or the last two axes of
// a [… , h, 2] value whose pairs are equal merged (interleaved: a repeated element by element);
// elementwise math whose every operand has equal pairs or one number along the last axis; views
// that move whole rows of the last axis (Unsqueeze, Squeeze, Reshape and Expand that keep its
// length; Gather, Slice and Transpose of other axes) of such a value.
inline std::string unequal_pairs(const graph& g, value_id v, rotary_form form, int depth = 16) {
  const facts& f = facts_of(g);
  const std::string of_v =
      std::string(form == rotary_form::halves ? "the halves of " : "the pairs of ") +
      pattern::describe_value(g, v);
  if (uniform_along_last_axis(f, v)) return {};
  if (const onnx::TensorProto* t = g.constant_tensor(v)) {
    const tensor_values values(*t, g.directory());
    const std::int64_t length = t->dims_size() == 0 ? 1 : t->dims(t->dims_size() - 1);
    if (length % 2 != 0) return of_v + " cannot be equal: its last axis is odd";
    const std::int64_t h = length / 2, size = std::int64_t(values.size());
    for (std::int64_t row = 0; row < size; row += length)
      for (std::int64_t i = 0; i < h; ++i) {
        const std::int64_t a = row + (form == rotary_form::halves ? i : 2 * i),
                           b = form == rotary_form::halves ? a + h : a + 1;
        if (values.as_double(a) != values.as_double(b))
          return of_v + " differ: element " + std::to_string(a) + " is not element " +
                 std::to_string(b);
      }
    return {};
  }
  const node_id p = g.producer(v);
  if (p == no_id) return of_v + " are not proven equal: it is an input of the model";
  if (depth == 0) return of_v + " are not proven equal within 16 ops";
  const std::string_view op = g.domain(p).empty() ? g.op_type(p) : std::string_view();
  const value_id in = g.inputs(p).empty() ? no_id : g.input(p, 0);
  const auto rank = f.rank(v);
  auto keeps_rows = [&] { return in != no_id && f.same_dim(v, -1, in, -1) == truth::yes; };
  if (op == "Concat" && on_last_axis(g, p, g.attribute_int(p, "axis").value_or(0))) {
    if (form == rotary_form::halves) {
      if (g.inputs(p).size() == 2 && same_numbers(g, g.input(p, 0), g.input(p, 1))) return {};
    } else {
      // Parts of even length keep every pair inside one part (Flux: an axis's angles each).
      for (value_id part : g.inputs(p)) {
        const sym* part_length = f.dim_of(part, -1);
        const auto even = part_length ? part_length->constant() : std::nullopt;
        if (!even || *even % 2 != 0)
          return of_v + " are not proven equal: " + pattern::describe_value(g, part) +
                 " is not of an even length a number";
        if (std::string why = unequal_pairs(g, part, form, depth - 1); !why.empty()) return why;
      }
      return {};
    }
  } else if ((op == "Reshape" || op == "Flatten") && form == rotary_form::interleaved && rank &&
             *rank > 0 && f.rank(in) >= 2u && f.dim_of(in, -1)->is_constant(2) &&
             equal(*f.dim_of(v, -1), *f.dim_of(in, -2) * sym::constant(2)) == truth::yes) {
    // Row-major, each row of v is one [h, 2] block of the input: its pairs are the blocks' rows.
    return unequal_pairs(g, in, rotary_form::halves, depth - 1);
  }
  if (op == "Cos" || op == "Sin" || op == "Neg" || op == "Cast" || op == "Sqrt" || op == "Exp" ||
      op == "Reciprocal" || op == "Tanh" || op == "Abs" ||
      (!op.empty() && g.passes_input_at_inference(p)))
    return unequal_pairs(g, in, form, depth - 1);
  if (op == "Mul" || op == "Div" || op == "Add" || op == "Sub" || op == "Pow") {
    for (value_id operand : g.inputs(p)) {
      if (uniform_along_last_axis(f, operand)) continue;
      if (f.same_dim(v, -1, operand, -1) != truth::yes)
        return of_v + " are not proven equal: " + pattern::describe_value(g, operand) +
               " is not proven to span its last axis";
      if (std::string why = unequal_pairs(g, operand, form, depth - 1); !why.empty()) return why;
    }
    return {};
  }
  if (op == "Tile" && uniform_along_last_axis(f, in)) return {};  // repeat_interleave's copies
  if ((op == "Unsqueeze" || op == "Squeeze" || op == "Reshape" || op == "Flatten" ||
       op == "Expand" || op == "Tile") &&
      (keeps_rows() || uniform_along_last_axis(f, in)))
    return unequal_pairs(g, in, form, depth - 1);
  if (op == "Gather") {
    const auto data_rank = f.rank(in);
    const std::int64_t axis = g.attribute_int(p, "axis").value_or(0);
    if (data_rank && *data_rank > 1 && axis != -1 && axis != std::int64_t(*data_rank) - 1)
      return unequal_pairs(g, in, form, depth - 1);
  }
  if ((op == "Slice" || op == "Transpose") && keeps_rows() && away_from_last_axis(g, p))
    return unequal_pairs(g, in, form, depth - 1);
  return of_v + " are not proven equal: " + g.describe(p) + " is none of the ops that keep them so";
}

// The axis of x the angles' positions run along, as Mul broadcasts them against x aligned from
// the right: 2 where x is (batch, heads, sequence, H), 1 where it is (batch, sequence, heads, H);
// the angles of x's type, one per (batch row or every row, position, pair), none per head.
inline std::optional<int> position_axis(const graph& g, value_id angle, value_id x) {
  const facts& f = facts_of(g);
  const auto rank = f.rank(angle);
  if (!rank || *rank < 2 || *rank > 4 || g.type(angle) != g.type(x)) return std::nullopt;
  for (const int position : {2, 1}) {
    bool fits = true;
    for (std::size_t k = 0; fits && k < *rank; ++k) {
      const int at = int(4 - *rank + k);
      const sym& d = *f.dim_of(angle, int(k));
      fits = at == 0 ? d.is_constant(1) || f.same_dim(angle, int(k), x, 0) == truth::yes
             : at == position || at == 3 ? f.same_dim(angle, int(k), x, at) == truth::yes
                                         : d.is_constant(1);
    }
    if (fits) return position;
  }
  return std::nullopt;
}

// What the guard reads beyond the pattern (the rules' sources, for selfcheck): angles whose
// halves (pairs) it proves equal, computed as the models compute them: cat(θ, θ) of half the
// angles (θ repeated in pairs: each [h, 2] row of a cat of θ with itself, flattened).
template <fixed_string Half>
inline constexpr auto halved = op<"Concat">(capture<Half>(op<"Slice">(any(), any(), any(), any())),
                                            capture<Half>);
template <fixed_string Half, fixed_string Column>
inline constexpr auto paired =
    op<"Reshape">(op<"Concat">(capture<Column>(op<"Unsqueeze">(
                                   capture<Half>(op<"Slice">(any(), any(), any(), any())), any())),
                               capture<Column>),
                  any());
template <rotary_form F, fixed_string Half, fixed_string Column>
inline constexpr auto repeated_angles = [] {
  if constexpr (F == rotary_form::halves)
    return halved<Half>;
  else
    return paired<Half, Column>;
}();
template <rotary_form F>
inline constexpr auto angle_sources =
    sources(source<"cos">(op<"Cos">(repeated_angles<F, "cos_half", "cos_column">)),
            source<"sin">(op<"Sin">(repeated_angles<F, "sin_half", "sin_column">)));

}  // namespace rotary_forms

template <rotary_form F>
struct fused_rotary_embedding {
  using options = fusion_options;
  static constexpr std::string_view name =
      F == rotary_form::halves ? "rotary-embedding" : "rotary-embedding-interleaved";
  static constexpr auto pattern = rotary_forms::rotation<F>;
  static constexpr auto sources = rotary_forms::angle_sources<F>;

  // An Add is a rotation's only where a Neg feeds it within the form's depth: a failed match at
  // any other Add is no near miss.
  static bool resembles(const graph& g, node_id n) {
    return layer::reads_op_within(g, n, "Neg", F == rotary_form::halves ? 4 : 7);
  }

  static rewrite::verdict guard(const graph& g, const auto& m, const options& o) {
    using rewrite::verdict;
    const facts& f = facts_of(g);
    const value_id x = get<"x">(m);
    if (auto no = layer::admits_dtype(g, x, "RotaryEmbedding", o); !no) return no;
    if (auto no = layer::admits_opset(g, o.fused_target, "RotaryEmbedding", 23); !no) return no;
    if (g.opset("") < 11)
      return verdict::no(
          "the positions the op reads are a Range, which came in ai.onnx opset "
          "11; the model imports " +
          std::to_string(g.opset("")) + " and fusekit does not raise it");
    const auto head_size = f.rank(x) == 4u ? f.dim_of(x, 3)->constant() : std::nullopt;
    if (!head_size || *head_size % 2 != 0 || *head_size < 4)
      return verdict::no(pattern::describe_value(g, x) + " is " + f.shape_text(x) +
                         ": RotaryEmbedding takes 4-D x whose head size is an even number");
    const std::int64_t length = *head_size, h = length / 2;
    if (auto no = admits_form(g, m, x, length); !no) return no;
    const value_id cos = get<"cos">(m), sin = get<"sin">(m);
    const auto position = rotary_forms::position_axis(g, cos, x);
    for (value_id angle : {cos, sin}) {
      if (!position || rotary_forms::position_axis(g, angle, x) != position)
        return verdict::no(pattern::describe_value(g, angle) + " is " +
                           std::string(dtype_name(g.type(angle))) + " " + f.shape_text(angle) +
                           " against x " + std::string(dtype_name(g.type(x))) + " " +
                           f.shape_text(x) +
                           ": RotaryEmbedding takes the angles in x's type, one per (batch row "
                           "or every row, position, pair), the same for every head");
      if (std::string why = rotary_forms::unequal_pairs(g, angle, F); !why.empty())
        return verdict::no(why + ": RotaryEmbedding reads one angle for each rotated pair " +
                           (F == rotary_form::halves ? "(i, i + " + std::to_string(h) + ")"
                                                     : std::string("(2i, 2i + 1)")));
    }
    for (int k = 0; k < int(*f.rank(cos)); ++k)
      if (f.rank(sin) != f.rank(cos) || f.same_dim(cos, k, sin, k) != truth::yes)
        return verdict::no(pattern::describe_value(g, cos) + " " + f.shape_text(cos) + " and " +
                           pattern::describe_value(g, sin) + " " + f.shape_text(sin) +
                           " are not proven of one shape: RotaryEmbedding looks both up by the "
                           "same positions");
    if (*position == 1 && !f.dim_of(x, 2)->constant())
      return verdict::no(pattern::describe_value(g, x) + " is " + f.shape_text(x) +
                         ", (batch, sequence, heads, head size): RotaryEmbedding takes it as "
                         "(batch, sequence, heads·head size) and needs the heads as a number");
    return verdict::yes();
  }

  static void emit(const graph& g, const auto& m, rewrite::emitter& e, const options& o) {
    const facts& f = facts_of(g);
    const value_id x = get<"x">(m), cos = get<"cos">(m);
    const std::int64_t length = *f.dim_of(x, 3)->constant(), h = length / 2;
    const int position = *rotary_forms::position_axis(g, cos, x);
    const std::size_t rank = *f.rank(cos);
    auto four_d = [&](value_id angle) {
      std::vector<std::int64_t> front(4 - rank);
      for (std::size_t i = 0; i < front.size(); ++i) front[i] = std::int64_t(i);
      return front.empty() ? e.value(angle) : fused::unsqueezed(g, e, e.value(angle), front);
    };
    // The cache: the angle of each pair, a row per (batch row or 1, position).
    auto cache = [&](const std::string& angle) {
      const std::string one_per_pair =
          F == rotary_form::halves
              ? e.op("Slice", {angle, e.ints({0}), e.ints({h}), e.ints({3})})
              : e.op("Slice", {angle, e.ints({0}), e.ints({length}), e.ints({3}), e.ints({2})});
      return e.op("Reshape", {one_per_pair, e.ints({-1, h})});
    };
    const std::string cos4 = four_d(cos), sin4 = four_d(get<"sin">(m));
    // Row b·S + s of the cache for (b, s): a Range in the angles' (batch or 1, sequence) shape,
    // expanded over the batch where the angles are the same for every row.
    const std::string rows = e.op("Gather", {e.op("Shape", {cos4}), e.ints({0, position})});
    const std::string count = e.op("ReduceProd", {rows}, {{"keepdims", std::int64_t(0)}});
    std::string positions =
        e.op("Reshape", {e.op("Range", {e.constant(dtype::int64, {}, {0}), count,
                                        e.constant(dtype::int64, {}, {1})}),
                         rows});
    if (rank < 4 || f.same_dim(cos, 0, x, 0) != truth::yes)
      positions =
          e.op("Expand",
               {positions, e.op("Gather", {e.op("Shape", {e.value(x)}), e.ints({0, position})})});
    // (batch, sequence, heads, H) is read as (batch, sequence, heads·H), a view either way.
    const bool merged = position == 1;
    const std::string in = merged ? e.op("Reshape", {e.value(x), e.ints({0, 0, -1})}) : e.value(x);
    std::vector<build::attr> attrs;
    if (F == rotary_form::interleaved) attrs.emplace_back("interleaved", std::int64_t(1));
    if (merged) attrs.emplace_back("num_heads", *f.dim_of(x, 2)->constant());
    const bool ort = o.fused_target == target::ort;
    std::string y = e.ops("RotaryEmbedding",
                          ort ? std::vector<std::string>{in, positions, cache(cos4), cache(sin4)}
                              : std::vector<std::string>{in, cache(cos4), cache(sin4), positions},
                          attrs, ort ? "com.microsoft" : "")
                        .front();
    if (merged) y = e.op("Reshape", {y, e.op("Shape", {e.value(x)})});
    e.replace_root(y);
    e.note("form", F == rotary_form::halves ? "halves" : "interleaved");
    e.note("layout", merged ? "BSNH" : "BNSH");
  }

 private:
  // The form's own views of x are what they stand for: the halves' Slices, or the pairs'
  // Reshape, elements and merge, each with the dims that make it so.
  static rewrite::verdict admits_form(const graph& g, const auto& m, value_id x,
                                      std::int64_t length) {
    using rewrite::verdict;
    const std::int64_t h = length / 2;
    auto keeps = [&](node_id slice, std::int64_t of, std::int64_t from, std::int64_t to,
                     const std::string& what) {
      const auto k = rotary_forms::kept_of_last_axis(g, slice, of);
      if (k && k->from == from && k->to == to) return verdict::yes();
      return verdict::no(
          g.describe(slice) +
          (k ? " keeps [" + std::to_string(k->from) + ", " + std::to_string(k->to) + ")"
             : std::string(" keeps no proven range")) +
          " of the last axis, not " + what + " [" + std::to_string(from) + ", " +
          std::to_string(to) + ")");
    };
    if constexpr (F == rotary_form::halves) {
      if (auto no = keeps(get<"lower">(m), length, 0, h, "x's lower half"); !no) return no;
      return keeps(get<"upper">(m), length, h, length, "x's upper half");
    } else {
      const facts& f = facts_of(g);
      const node_id merge = get<"merge">(m), neg = get<"neg">(m);
      const node_id stack = g.producer(g.input(merge, 0));
      const value_id pairs = g.output(get<"pairs">(m), 0);
      const value_id imag = g.input(neg, 0), real = g.input(g.producer(g.input(stack, 1)), 0);
      // dims [0, 3) of x, then these
      auto has_dims = [&](value_id v, std::vector<std::int64_t> tail) {
        if (f.rank(v) != 3 + tail.size() || !rotary_forms::same_leading_dims(f, v, x, 3))
          return false;
        for (std::size_t i = 0; i < tail.size(); ++i)
          if (!f.dim_of(v, int(3 + i))->is_constant(tail[i])) return false;
        return true;
      };
      struct view {
        value_id v;
        std::vector<std::int64_t> tail;
      };
      if (has<"split">(m) && (has<"real_slice">(m) || has<"imag_slice">(m) ||
                              has<"real_gather">(m) || has<"imag_gather">(m)))
        return verdict::no(g.describe(get<"split">(m)) +
                           " splits one element of each pair, another op takes the other");
      auto gathers = [&](node_id gather, std::int64_t k, const std::string& what) {
        const auto axis = g.attribute_int(gather, "axis").value_or(0);
        const content_fact& index = f.content(g.input(gather, 1));
        if (rotary_forms::on_last_axis(g, gather, axis) && index.known && !index.real &&
            index.size() == 1 && index.ints[0].is_constant(k))
          return verdict::yes();
        return verdict::no(g.describe(gather) + " is not proven to take " + what + ", index " +
                           std::to_string(k) + " of the last axis");
      };
      if (has<"real_gather">(m))
        if (auto no = gathers(get<"real_gather">(m), 0, "a pair's first element"); !no) return no;
      if (has<"imag_gather">(m))
        if (auto no = gathers(get<"imag_gather">(m), 1, "a pair's second element"); !no) return no;
      if (has<"split">(m)) {
        const node_id split = get<"split">(m);
        const auto axis = g.attribute_int(split, "axis");
        bool halves_of_two =
            g.outputs(split).size() == 2 && axis && rotary_forms::on_last_axis(g, split, *axis);
        if (g.inputs(split).size() > 1 && g.input(split, 1) != no_id) {
          const content_fact& sizes = f.content(g.input(split, 1));
          halves_of_two = halves_of_two && sizes.known && !sizes.real && sizes.size() == 2 &&
                          sizes.ints[0].is_constant(1) && sizes.ints[1].is_constant(1);
        } else if (const auto sizes = g.attribute_ints(split, "split")) {
          halves_of_two =
              halves_of_two && sizes->size() == 2 && (*sizes)[0] == 1 && (*sizes)[1] == 1;
        }
        if (!halves_of_two)
          return verdict::no(g.describe(split) + " does not split each pair into its two elements");
      } else {
        if (has<"real_slice">(m))
          if (auto no = keeps(get<"real_slice">(m), 2, 0, 1, "a pair's first element"); !no)
            return no;
        if (has<"imag_slice">(m))
          if (auto no = keeps(get<"imag_slice">(m), 2, 1, 2, "a pair's second element"); !no)
            return no;
      }
      for (const view& w :
           {view{pairs, {h, 2}}, view{imag, {h}}, view{real, {h}}, view{g.input(stack, 0), {h, 1}},
            view{g.input(stack, 1), {h, 1}}, view{g.output(merge, 0), {length}}})
        if (!has_dims(w.v, w.tail))
          return verdict::no(pattern::describe_value(g, w.v) + " is " + f.shape_text(w.v) +
                             ", not proven the shape its place in the interleaved form needs "
                             "against x " +
                             f.shape_text(x));
      return verdict::yes();
    }
  }
};

using rotary_embedding = fused_rotary_embedding<rotary_form::halves>;
using rotary_embedding_interleaved = fused_rotary_embedding<rotary_form::interleaved>;

// A partial rotation (GPT-NeoX, Phi: the first r numbers of each head rotated, the rest passed
// on), once the rules above have fused its rotated part: the op rotates the part itself.
//
//   x ─┬─ Slice(:r) ── RotaryEmbedding ──┐
//      └─ Slice(r:) ─────────────────────┴─ Concat(last axis) ── y
//   ==>
//   x ── RotaryEmbedding(rotary_embedding_dim r, num_heads) ── y   (the op's own cache and
//                                                                     positions, either domain)
namespace rotary_forms {
inline constexpr auto rotated_part = capture<"part">(sliced(x).bind<"rotated_part">());
// ONNX Runtime's op reads a cache row per position; ai.onnx's too, or without positions a cache
// per (batch row, position).
inline constexpr auto partial =
    op<"Concat">(
        any_of(op<"RotaryEmbedding", "com.microsoft">(rotated_part, capture<"positions">,
                                                      capture<"cos_cache">, capture<"sin_cache">)
                   .bind<"rotation">(),
               op<"RotaryEmbedding">(rotated_part, capture<"cos_cache">, capture<"sin_cache">,
                                     capture<"positions">)
                   .bind<"rotation">(),
               op<"RotaryEmbedding">(rotated_part, capture<"cos_rows">, capture<"sin_rows">)
                   .bind<"rotation">()),
        sliced(x).bind<"passed">())
        .attr<"axis">(last_axis);

// The op's inputs as ONNX Runtime runs them, which no schema the check reads says (pattern/
// sources.hpp): positions (batch, sequence), each below the caches' rows, which are the
// positions (or each (batch row, position)) with one angle per rotated pair.
struct written_positions {
  static auto write(auto& w) { return w.input(dtype::int64, {w.dim("x", 0), w.dim("x", 2)}); }
};
template <bool PerRow>
struct written_cache {
  static auto write(auto& w) {
    const std::int64_t pairs = w.dim("part", -1) / 2;
    if constexpr (PerRow) return w.input(w.type(), {w.dim("x", 0), w.dim("x", 2), pairs});
    return w.input(w.type(), {w.dim("x", 2), pairs});
  }
};
inline constexpr auto partial_sources = sources(source<"positions">(written<written_positions>),
                                                source<"cos_cache">(written<written_cache<false>>),
                                                source<"sin_cache">(written<written_cache<false>>),
                                                source<"cos_rows">(written<written_cache<true>>),
                                                source<"sin_rows">(written<written_cache<true>>));
}  // namespace rotary_forms

struct partial_rotary_embedding {
  static constexpr std::string_view name = "partial-rotary-embedding";
  static constexpr auto pattern = rotary_forms::partial;
  static constexpr auto sources = rotary_forms::partial_sources;

  // A Concat is a partial rotation's only where it joins along the last axis (a decode step's
  // cache joins rotated keys along the sequence) and a RotaryEmbedding gives one of its inputs.
  static bool resembles(const graph& g, node_id n) {
    const auto axis = g.attribute_int(n, "axis");
    if (!axis || g.inputs(n).empty() || !rotary_forms::on_last_axis(g, n, *axis)) return false;
    for (value_id in : g.inputs(n)) {
      const node_id p = in == no_id ? no_id : g.producer(in);
      if (p != no_id && g.op_type(p) == "RotaryEmbedding") return true;
    }
    return false;
  }

  static rewrite::verdict guard(const graph& g, const auto& m) {
    using rewrite::verdict;
    const facts& f = facts_of(g);
    const value_id x = get<"x">(m);
    const node_id rotation = get<"rotation">(m);
    const auto length = f.rank(x) == 4u ? f.dim_of(x, 3)->constant() : std::nullopt;
    const auto heads = f.rank(x) == 4u ? f.dim_of(x, 1)->constant() : std::nullopt;
    if (!length || !heads)
      return verdict::no(pattern::describe_value(g, x) + " is " + f.shape_text(x) +
                         ": the op rotates part of each head of 4-D x whose heads and head size "
                         "are numbers");
    if (g.attribute_int(rotation, "rotary_embedding_dim").value_or(0) != 0 ||
        g.attribute_int(rotation, "is_packed_batching").value_or(0) != 0 ||
        g.attribute_float(rotation, "scale").value_or(1.0f) != 1.0f)
      return verdict::no(g.describe(rotation) +
                         " rotates with attributes of its own beyond interleaved");
    const node_id part = get<"rotated_part">(m);
    const auto rotated = f.dim_of(g.output(part, 0), -1)->constant();
    const auto kept = rotated ? rotary_forms::kept_of_last_axis(g, part, *length) : std::nullopt;
    if (!kept || kept->from != 0 || kept->to != *rotated || *rotated % 2 != 0)
      return verdict::no(g.describe(part) +
                         " is not proven the first numbers of each head, an "
                         "even count of them");
    const auto passed = rotary_forms::kept_of_last_axis(g, get<"passed">(m), *length);
    if (!passed || passed->from != *rotated || passed->to != *length)
      return verdict::no(g.describe(get<"passed">(m)) + " is not proven the numbers after the " +
                         std::to_string(*rotated) + " rotated, to the end of each head");
    return verdict::yes();
  }

  static void emit(const graph& g, const auto& m, rewrite::emitter& e) {
    const facts& f = facts_of(g);
    const value_id x = get<"x">(m);
    const node_id rotation = get<"rotation">(m);
    std::vector<std::string> inputs;
    for (value_id in : g.inputs(rotation)) inputs.push_back(e.value(in));
    inputs[0] = e.value(x);
    // ONNX Runtime wants num_heads wherever rotary_embedding_dim is given, 4-D x too.
    const std::vector<build::attr> attrs = {
        {"interleaved", g.attribute_int(rotation, "interleaved").value_or(0)},
        {"rotary_embedding_dim", *f.dim_of(g.output(get<"rotated_part">(m), 0), -1)->constant()},
        {"num_heads", *f.dim_of(x, 1)->constant()}};
    e.replace_root(e.ops("RotaryEmbedding", inputs, attrs, g.domain(rotation)).front());
  }
};

}  // namespace fusekit::rules
