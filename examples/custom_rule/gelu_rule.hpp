// A complete fusion rule: the exact (erf) GELU becomes one com.microsoft Gelu, ONNX Runtime's
// fused kernel. Copy this file to start a rule of your own.
//
//   x ─┬─ Div(·, √2) ── Erf ── Add(·, 1) ──┐
//      └─ Mul(·, 0.5) ─────────────────── Mul ── y     ==>     x ── com.microsoft.Gelu ── y
//
// Accepted: the operands of Mul and Add in either order; Div by √2 or Mul by 1/√2 (within 2e-4, so
// float16 constants pass); constants as initializers or Constant nodes; x of a float type; and the
// three groupings of the product, noted in the report as "form":
//   0  (x·0.5)·(1+erf)   hand-written x * 0.5 * (1 + torch.erf(x / math.sqrt(2)))
//   1  (x·(1+erf))·0.5   torch.onnx.export of nn.GELU() (TorchScript exporter, opsets 9 to 19)
//   2  x·((1+erf)·0.5)   torch.onnx.export(..., dynamo=True) below opset 20
#pragma once

#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/rule.hpp"

namespace my_rules {
using namespace fusekit::pattern;
using fusekit::dtype;

struct gelu {
  static constexpr std::string_view name = "gelu-erf";
  static constexpr auto mul = [](auto a, auto b) { return commutative(op<"Mul">(a, b)); };
  static constexpr auto x = capture<"x">.dtype<dtype::float32, dtype::float16, dtype::bfloat16>();
  static constexpr auto half = constant_scalar<"half">.value(0.5);
  static constexpr auto sqrt2 = constant_scalar<"sqrt2">.value(1.4142136, 2e-4);
  static constexpr auto erf = op<"Erf">(
      any_of(op<"Div">(x, sqrt2), mul(x, constant_scalar<"1/sqrt2">.value(0.7071068, 2e-4))));
  // 1 + erf(x/√2): twice the normal CDF
  static constexpr auto cdf = commutative(op<"Add">(erf, constant_scalar<"one">.value(1.0)));
  static constexpr auto pattern =
      any_of(mul(mul(x, half), cdf), mul(mul(x, cdf), half), mul(x, mul(cdf, half))).bind<"form">();

  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    e.replace_root(e.op("Gelu", {e.value(get<"x">(m))}, {}, "com.microsoft"));
    e.note("form", get<"form">(m));
  }
};

}  // namespace my_rules
