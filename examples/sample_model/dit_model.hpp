// A DiT (F5-TTS-like) transformer trunk as its PyTorch export spells attention:
//
//   x ─┬─ MatMul Wq ─ Add ─ Reshape ─ Transpose(0,2,1,3) ─ RoPE ──────────────── q
//      ├─ MatMul Wk ─ Add ─ Reshape ─ Transpose(0,2,1,3) ─ RoPE ─ Transpose(0,1,3,2) kᵀ
//      └─ MatMul Wv ─ Add ─ Reshape ─ Transpose(0,2,1,3) ──────────────────────── v
//   MatMul(q, kᵀ) → Cast(f32) → Mul(scale) → Softmax(-1) → Cast(f16) → MatMul(·, v)
//      → Transpose(0,2,1,3) → Reshape(B, S, D) → MatMul Wo → Add → + x
//
// RoPE is x·cos + rotate_half(x)·sin with cos/sin fed as inputs of shape [S, head_dim].
// Weights are deterministic pseudo-random numbers, so the generated file is byte-stable.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fusekit/graph/model_builder.hpp"
#include "trunk_parts.hpp"

namespace fusekit::samples {

struct dit_config {
  int layers = 2;
  int heads = 4;
  int head_dim = 16;
  int batch = 2;  // classifier-free guidance runs conditional and unconditional together
  double scale = 100.0;
  dtype type = dtype::float16;
  std::int64_t opset = 17;
};

inline onnx::ModelProto make_dit_model(const dit_config& c) {
  using build::value;
  build::model_builder b(c.opset);
  const int hidden = c.heads * c.head_dim;
  std::uint32_t seed = 12345;
  auto weights = [&](std::int64_t rows, std::int64_t cols) {
    return pseudo_random_weights(b, c.type, seed, rows, cols);
  };
  auto ints = [&](std::vector<double> v) {
    return b.initializer(dtype::int64, {std::int64_t(v.size())}, v);
  };
  auto perm = [](std::vector<std::int64_t> p) { return build::attr("perm", std::move(p)); };

  value x = b.input("x", c.type, {c.batch, "S", hidden});
  const value cos = b.input("rope_cos", c.type, {"S", c.head_dim});
  const value sin = b.input("rope_sin", c.type, {"S", c.head_dim});
  const value heads_shape = ints({0, 0, double(c.heads), double(c.head_dim)});
  const value merged_shape = ints({0, 0, double(hidden)});
  const value half = ints({double(c.head_dim / 2)});
  const value zero = ints({0});
  const value end = ints({double(c.head_dim)});
  const value last_axis = ints({-1});
  const rotate_half_bounds bounds{.zero = zero, .half = half, .end = end, .last_axis = last_axis};
  const value scale = b.scalar(dtype::float32, c.scale);

  auto project = [&](const value& in) {
    auto y = b.op("Add", {b.op("MatMul", {in, weights(hidden, hidden)}),
                          b.initializer(c.type, {hidden}, std::vector<double>(hidden, 0.01))});
    return b.op("Transpose", {b.op("Reshape", {y, heads_shape})}, {perm({0, 2, 1, 3})});
  };
  auto rope = [&](const value& t) { return rotate_half_rope(b, t, cos, sin, bounds); };

  for (int layer = 0; layer < c.layers; ++layer) {
    const value q = rope(project(x));
    const value kt = b.op("Transpose", {rope(project(x))}, {perm({0, 1, 3, 2})});
    const value v = project(x);
    auto scores = b.op("MatMul", {q, kt});
    auto up = b.op("Cast", {scores}, {{"to", dtype::float32}});
    auto probs = b.op("Softmax", {b.op("Mul", {up, scale})}, {{"axis", -1}});
    auto down = b.op("Cast", {probs}, {{"to", c.type}});
    auto context = b.op("Transpose", {b.op("MatMul", {down, v})}, {perm({0, 2, 1, 3})});
    auto merged = b.op("Reshape", {context, merged_shape});
    auto projected = b.op("MatMul", {merged, weights(hidden, hidden)});
    const bool last = layer + 1 == c.layers;
    x = b.op("Add", {x, projected}, {}, {.name = last ? "y" : ""});
  }
  b.output(x, c.type, {c.batch, "S", hidden});
  return b.build();
}

}  // namespace fusekit::samples
