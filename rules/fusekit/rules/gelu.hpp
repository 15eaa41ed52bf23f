// GELU, exact and tanh-approximated, as one op; then the bias a Linear layer adds before it,
// folded into that op.
//
//   exact:  x ─┬─ Div(·, √2) | Mul(·, 1/√2) ── Erf ── Add(·, 1) ───────────────────┐
//              └──────────────────────────────────── (any grouping of) ·0.5 ── Mul ── y
//   tanh:   x ─┬─ x + 0.044715·x³ ── Mul(·, √(2/π)) ── Tanh ── Add(·, 1) ──────────┐
//              └──────────────────────────────────── (any grouping of) ·0.5 ── Mul ── y
//   ==>
//   target ort:   x ── com.microsoft Gelu ── y         x ── com.microsoft FastGelu ── y
//   target onnx:  x ── Gelu ── y   (opset ≥ 20)        x ── Gelu approximate="tanh" ── y
//
//   bias (target ort):  x ── Add(·, b) ── Gelu | FastGelu ── y
//   ==>                 x, b ── com.microsoft BiasGelu | FastGelu(x, b) ── y
//
//   quick (target ort): x ─┬─ Mul(·, α)? ── Sigmoid ──┐
//                          └───────────────────────── Mul ── y   ==>  x ── QuickGelu(alpha α) ── y
//
// Accepted: the operands of every Mul and Add in either order; x³ as Pow(x, 3), x·(x·x) or
// (x·x)·x, or the tanh's argument factored as Bloom writes it, √(2/π)·x·(1 + 0.044715·x·x);
// constants as initializers or Constant nodes of any float type, within 2e-4 (float16 roundings
// pass); the three groupings of the product with 0.5, noted as "form":
//   0  (x·0.5)·(1 + f)   hand-written, and transformers' NewGELU (GPT-2's gelu_new)
//   1  (x·(1 + f))·0.5   torch.onnx.export of nn.GELU() (TorchScript exporter, opsets 9 to 19)
//   2  x·((1 + f)·0.5)   torch.onnx.export(..., dynamo=True) below opset 20
// A bias is folded only where it is a vector of x's last axis, the one form the kernels add.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>

#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/rule.hpp"
#include "layer_ops.hpp"
#include "options.hpp"

namespace fusekit::rules {

namespace gelu_forms {
using namespace pattern;

using layer::add;
using layer::mul;
inline constexpr auto x = capture<"x">;

// x·0.5·(1 + f(x)) for 1 + f, twice the normal CDF or its approximation, in the three groupings.
inline constexpr auto times_half_x = [](auto twice_cdf) {
  constexpr auto half = constant_scalar<"half">.value(0.5);
  return any_of(mul(mul(x, half), twice_cdf), mul(mul(x, twice_cdf), half),
                mul(x, mul(twice_cdf, half)))
      .template bind<"form">();
};

inline constexpr auto one = constant_scalar<"one">.value(1.0);
inline constexpr auto erf_cdf =
    add(op<"Erf">(any_of(op<"Div">(x, constant_scalar<"√2">.value(1.4142136, 2e-4)),
                         mul(x, constant_scalar<"1/√2">.value(0.7071068, 2e-4)))),
        one);

inline constexpr auto cube =
    any_of(op<"Pow">(x, constant_scalar<"three">.value(3.0)), mul(x, mul(x, x)), mul(mul(x, x), x));
inline constexpr auto kappa = constant_scalar<"0.044715">.value(0.044715, 2e-4);
inline constexpr auto sqrt_2_over_pi = constant_scalar<"√(2/π)">.value(0.7978846, 2e-4);
// √(2/π)·(x + 0.044715·x³), or factored as Bloom writes it, √(2/π)·x·(1 + 0.044715·x·x)
inline constexpr auto tanh_argument =
    any_of(mul(add(x, mul(cube, kappa)), sqrt_2_over_pi),
           mul(mul(x, sqrt_2_over_pi), add(mul(mul(x, kappa), x), one)));
inline constexpr auto tanh_cdf = add(op<"Tanh">(tanh_argument), one);

// x·σ(α·x), α 1 where σ reads x itself (SiLU)
inline constexpr auto sigmoid_gate = mul(
    x, op<"Sigmoid">(optional_op(mul(x, constant_scalar<"alpha">.at_least(1e-6).at_most(1e6)))));

}  // namespace gelu_forms

// The contract both GELU rules share; `standard` is what target onnx writes.
template <bool Tanh>
struct fused_gelu {
  using options = fusion_options;
  static constexpr std::string_view name = Tanh ? "gelu-tanh" : "gelu";
  static constexpr auto pattern = [] {
    if constexpr (Tanh)
      return gelu_forms::times_half_x(gelu_forms::tanh_cdf);
    else
      return gelu_forms::times_half_x(gelu_forms::erf_cdf);
  }();
  static constexpr std::string_view ort_op = Tanh ? "FastGelu" : "Gelu";

  // A Mul is GELU's only where an Erf (a Tanh) feeds it within the pattern's depth: a failed
  // match at any other Mul of the model is no near miss.
  static bool resembles(const graph& g, node_id n) {
    return layer::reads_op_within(g, n, Tanh ? "Tanh" : "Erf", 3);
  }

  static rewrite::verdict guard(const graph& g, const auto& m, const options& o) {
    const bool ort = o.fused_target == target::ort;
    if (auto no = layer::admits_dtype(g, get<"x">(m), ort ? ort_op : "Gelu", o); !no) return no;
    // ONNX Runtime's FastGelu fails a 0-d x at run time ("1 or more dimensions"), where the
    // model it replaced ran.
    if (ort && Tanh) {
      const facts& f = facts_of(g);
      const value_id x = get<"x">(m);
      const auto rank = f.rank(x);
      if (!rank)
        return rewrite::verdict::no(
            pattern::describe_value(g, x) +
            " is of no proven rank, and FastGelu takes 1 or more dims: " + f.why_unknown(x));
      if (*rank == 0)
        return rewrite::verdict::no(pattern::describe_value(g, x) +
                                    " is a scalar, and ONNX Runtime's FastGelu takes 1 or more "
                                    "dims");
    }
    return layer::admits_opset(g, o.fused_target, "Gelu", 20);
  }

  static void emit(const graph&, const auto& m, rewrite::emitter& e, const options& o) {
    const std::string x = e.value(get<"x">(m));
    if (o.fused_target == target::ort)
      e.replace_root(e.op(ort_op, {x}, {}, "com.microsoft"));
    else if (Tanh)
      e.replace_root(e.op("Gelu", {x}, {{"approximate", "tanh"}}));
    else
      e.replace_root(e.op("Gelu", {x}));
    e.note("form", get<"form">(m));
  }
};

using gelu = fused_gelu<false>;
using gelu_tanh = fused_gelu<true>;

// x·σ(α·x) for a positive α: CLIP's QuickGelu (α 1.702) and SiLU (α 1), which ONNX Runtime
// computes in one pass (target ort: ONNX has no op for either).
struct quick_gelu {
  using options = fusion_options;
  static constexpr std::string_view name = "quick-gelu";
  static constexpr auto pattern = gelu_forms::sigmoid_gate;

  // x·σ(…) is a gate of x only where σ reads x, or a product that reads x: a GLU's Mul(x, σ(g))
  // gates another value and is no near miss.
  static bool resembles(const graph& g, node_id n) {
    if (g.inputs(n).size() != 2) return false;
    for (std::size_t k = 0; k < 2; ++k) {
      const value_id gated = g.input(n, 1 - k), gate = g.input(n, k);
      const node_id sigmoid = gate == no_id ? no_id : g.producer(gate);
      if (sigmoid == no_id || g.op_type(sigmoid) != "Sigmoid") continue;
      const value_id in = g.input(sigmoid, 0);
      if (in == gated) return true;
      const node_id scaled = in == no_id ? no_id : g.producer(in);
      if (scaled != no_id && g.op_type(scaled) == "Mul" &&
          std::find(g.inputs(scaled).begin(), g.inputs(scaled).end(), gated) !=
              g.inputs(scaled).end())
        return true;
    }
    return false;
  }

  static rewrite::verdict guard(const graph& g, const auto& m, const options& o) {
    return layer::admits_dtype(g, get<"x">(m), "QuickGelu", o);
  }

  static void emit(const graph&, const auto& m, rewrite::emitter& e) {
    const double alpha = has<"alpha">(m) ? get<"alpha">(m) : 1.0;
    e.replace_root(e.op("QuickGelu", {e.value(get<"x">(m))}, {{"alpha", alpha}}, "com.microsoft"));
  }
};

// The bias Add before either fused GELU (target ort: target onnx's Gelu takes no bias).
struct bias_gelu {
  using options = fusion_options;
  static constexpr std::string_view name = "bias-gelu";
  // The bias's shape is checked in the pattern, not the guard: of the Add's two operands the
  // vector is the bias, whichever order the exporter wrote them in.
  static constexpr auto biased = pattern::commutative(pattern::op<"Add">(
      pattern::capture<"x">, pattern::capture<"bias">.proven_rank<1>().same_dim<0, "x", -1>()));
  static constexpr auto pattern = pattern::any_of(pattern::op<"Gelu", "com.microsoft">(biased),
                                                  pattern::op<"FastGelu", "com.microsoft">(biased))
                                      .bind<"op">();

  static rewrite::verdict guard(const graph& g, const auto& m, const options& o) {
    return layer::admits_dtype(g, get<"x">(m), get<"op">(m) == 0 ? "BiasGelu" : "FastGelu", o);
  }

  static void emit(const graph&, const auto& m, rewrite::emitter& e) {
    e.replace_root(e.op(get<"op">(m) == 0 ? "BiasGelu" : "FastGelu",
                        {e.value(get<"x">(m)), e.value(get<"bias">(m))}, {}, "com.microsoft"));
  }
};

}  // namespace fusekit::rules
