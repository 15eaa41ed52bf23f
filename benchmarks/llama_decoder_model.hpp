// A LLaMA-style decoder trunk as a TorchScript export spells it, in float32:
//
//   x ─ RMSNorm ─┬─ MatMul Wq ─ Reshape ─ Transpose(0,2,1,3) ─ RoPE ─────────────────── q
//                ├─ MatMul Wk ─ Reshape ─ Transpose(0,2,1,3) ─ RoPE ─ Transpose(0,1,3,2) kᵀ
//                └─ MatMul Wv ─ Reshape ─ Transpose(0,2,1,3) ───────────────────────── v
//   MatMul(q, kᵀ) → Div(√d) → Add(mask) → Softmax(-1) → MatMul(·, v) → Transpose(0,2,1,3)
//      → Reshape(B, S, D) → MatMul Wo → + x → RMSNorm → MatMul Wd(SiLU(MatMul Wg) · MatMul Wu) → +
//
// RMSNorm is x · 1/√(mean(x²) + ε) · w; RoPE is x·cos + rotate_half(x)·sin, cos and sin of the
// angles cat(θ, θ) for an input θ of shape [S, head_dim / 2]; the mask is an additive input of
// shape [1, 1, S, S]. The bundled rules fuse every block of it: what the rule-count benchmark
// needs beside the DiT, whose rotations are float16 (refused on ONNX Runtime's CPU provider) and
// which has no norms.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "fusekit/graph/model_builder.hpp"
#include "trunk_parts.hpp"

namespace fusekit::samples {

struct decoder_config {
  int layers = 2;
  int heads = 4;
  int head_dim = 16;
  int batch = 1;
  int intermediate = 128;
};

inline onnx::ModelProto make_llama_decoder_model(const decoder_config& c) {
  using build::value;
  build::model_builder b(17);
  const int hidden = c.heads * c.head_dim;
  const dtype f32 = dtype::float32;
  std::uint32_t seed = 2024;
  auto weights = [&](std::int64_t rows, std::int64_t cols) {
    return pseudo_random_weights(b, f32, seed, rows, cols);
  };
  auto ints = [&](std::vector<double> v) {
    return b.initializer(dtype::int64, {std::int64_t(v.size())}, v);
  };
  auto perm = [](std::vector<std::int64_t> p) { return build::attr("perm", std::move(p)); };

  value x = b.input("x", f32, {c.batch, "S", hidden});
  // The angles of half a head, repeated as cat(θ, θ): each rotated pair (i, i + h) reads one.
  const value half_angles = b.input("angles", f32, {"S", c.head_dim / 2});
  const value angles = b.op("Concat", {half_angles, half_angles}, {{"axis", -1}});
  const value cos = b.op("Cos", {angles});
  const value sin = b.op("Sin", {angles});
  const value mask = b.input("mask", f32, {1, 1, "S", "S"});
  const value heads_shape = ints({0, 0, double(c.heads), double(c.head_dim)});
  const value merged_shape = ints({0, 0, double(hidden)});
  const rotate_half_bounds bounds{.zero = ints({0}),
                                  .half = ints({double(c.head_dim / 2)}),
                                  .end = ints({double(c.head_dim)}),
                                  .last_axis = ints({-1})};
  const value two = b.scalar(f32, 2.0);
  const value one = b.scalar(f32, 1.0);
  const value eps = b.scalar(f32, 1e-6);
  const value root_d = b.scalar(f32, std::sqrt(double(c.head_dim)));

  auto rms_norm = [&](const value& in) {
    auto mean = b.op("ReduceMean", {b.op("Pow", {in, two})},
                     {build::attr("axes", std::vector<std::int64_t>{-1}), {"keepdims", 1}});
    auto inverse = b.op("Div", {one, b.op("Sqrt", {b.op("Add", {mean, eps})})});
    return b.op("Mul", {b.initializer(f32, {hidden}, std::vector<double>(hidden, 1.0)),
                        b.op("Mul", {in, inverse})});
  };
  auto heads = [&](const value& in) {
    return b.op("Transpose",
                {b.op("Reshape", {b.op("MatMul", {in, weights(hidden, hidden)}), heads_shape})},
                {perm({0, 2, 1, 3})});
  };
  auto rope = [&](const value& t) { return rotate_half_rope(b, t, cos, sin, bounds); };

  for (int layer = 0; layer < c.layers; ++layer) {
    const value normed = rms_norm(x);
    const value q = rope(heads(normed));
    const value kt = b.op("Transpose", {rope(heads(normed))}, {perm({0, 1, 3, 2})});
    const value v = heads(normed);
    auto scores = b.op("Add", {b.op("Div", {b.op("MatMul", {q, kt}), root_d}), mask});
    auto probs = b.op("Softmax", {scores}, {{"axis", -1}});
    auto context = b.op("Transpose", {b.op("MatMul", {probs, v})}, {perm({0, 2, 1, 3})});
    auto merged = b.op("Reshape", {context, merged_shape});
    x = b.op("Add", {x, b.op("MatMul", {merged, weights(hidden, hidden)})});
    const value gate_in = rms_norm(x);
    auto gate = b.op("MatMul", {gate_in, weights(hidden, c.intermediate)});
    auto silu = b.op("Mul", {gate, b.op("Sigmoid", {gate})});
    auto up = b.op("MatMul", {gate_in, weights(hidden, c.intermediate)});
    auto down = b.op("MatMul", {b.op("Mul", {silu, up}), weights(c.intermediate, hidden)});
    const bool last = layer + 1 == c.layers;
    x = b.op("Add", {x, down}, {}, {.name = last ? "y" : ""});
  }
  b.output(x, f32, {c.batch, "S", hidden});
  return b.build();
}

}  // namespace fusekit::samples
