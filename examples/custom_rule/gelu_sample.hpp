// A model with the exact GELU in every form the example rule accepts, each its own graph output:
// what make_gelu_model writes for the ONNX Runtime parity check, and what the rule's test fuses.
#pragma once

#include <onnx/onnx_pb.h>

#include <numbers>

#include "fusekit/graph/model_builder.hpp"

namespace my_rules::sample {

// How many GELUs the sample holds: every one of them must fuse.
inline constexpr int gelu_count = 5;

inline onnx::ModelProto make_gelu_model() {
  using fusekit::dtype;
  using fusekit::build::value;
  constexpr double sqrt2 = std::numbers::sqrt2;
  fusekit::build::model_builder b(17);
  const value x = b.input("x", dtype::float32, {"batch", 16});
  const value xh = b.input("x_half", dtype::float16, {"batch", 16});
  auto f32 = [&](double v) { return b.scalar(dtype::float32, v); };
  auto f16 = [&](double v) { return b.scalar(dtype::float16, v); };
  auto out = [&](const value& y, dtype t) { b.output(y, t, {"batch", 16}); };

  // (x·0.5)·(1 + erf(x / √2))
  value erf = b.op("Erf", {b.op("Div", {x, f32(sqrt2)})});
  out(b.op("Mul", {b.op("Mul", {x, f32(0.5)}), b.op("Add", {erf, f32(1)})}), dtype::float32);
  // (x·(1 + erf(x / √2)))·0.5 with Constant nodes, as torch.onnx.export writes nn.GELU()
  auto k32 = [&](double v) { return b.constant_scalar(dtype::float32, v); };
  erf = b.op("Erf", {b.op("Div", {x, k32(sqrt2)})});
  out(b.op("Mul", {b.op("Mul", {x, b.op("Add", {erf, k32(1)})}), k32(0.5)}), dtype::float32);
  // 0.5·((1 + erf((1/√2)·x))·x): every operand swapped, and a Mul by 1/√2
  erf = b.op("Erf", {b.op("Mul", {f32(1 / sqrt2), x})});
  out(b.op("Mul", {f32(0.5), b.op("Mul", {b.op("Add", {f32(1), erf}), x})}), dtype::float32);
  // x·((1 + erf(x / √2))·0.5)
  erf = b.op("Erf", {b.op("Div", {x, f32(sqrt2)})});
  out(b.op("Mul", {x, b.op("Mul", {b.op("Add", {erf, f32(1)}), f32(0.5)})}), dtype::float32);
  // float16: the constants rounded to float16 (√2 becomes 1.4140625)
  erf = b.op("Erf", {b.op("Div", {xh, f16(sqrt2)})});
  out(b.op("Mul", {b.op("Mul", {xh, f16(0.5)}), b.op("Add", {erf, f16(1)})}), dtype::float16);
  return b.build();
}

}  // namespace my_rules::sample
