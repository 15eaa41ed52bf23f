// What the synthetic transformer trunks share (dit_model.hpp, and the benchmarks' LLaMA-style
// decoder): weights from a fixed pseudo-random sequence, so that a generated file is byte-stable,
// and rotate_half RoPE as PyTorch exports spell it.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "fusekit/graph/model_builder.hpp"

namespace fusekit::samples {

// A [rows, cols] initializer of `type`, uniform in ±0.5/√rows, from the sequence `seed` steps.
inline build::value pseudo_random_weights(build::model_builder& b, dtype type, std::uint32_t& seed,
                                          std::int64_t rows, std::int64_t cols) {
  std::vector<double> w(std::size_t(rows * cols));
  for (double& x : w) {
    seed = seed * 1664525u + 1013904223u;
    x = (double(seed >> 8) / double(1u << 24) - 0.5) / std::sqrt(double(rows));
  }
  return b.initializer(type, {rows, cols}, w);
}

// The int64 vectors rotate_half's Slices read, made once for every rotation of a trunk.
struct rotate_half_bounds {
  build::value zero, half, end, last_axis;
};

// x·cos + rotate_half(x)·sin, rotate_half(x) = cat(−x[…, h:], x[…, :h]) on the last axis.
inline build::value rotate_half_rope(build::model_builder& b, const build::value& x,
                                     const build::value& cos, const build::value& sin,
                                     const rotate_half_bounds& k) {
  auto lo = b.op("Slice", {x, k.zero, k.half, k.last_axis});
  auto hi = b.op("Slice", {x, k.half, k.end, k.last_axis});
  auto rotated = b.op("Concat", {b.op("Neg", {hi}), lo}, {{"axis", -1}});
  return b.op("Add", {b.op("Mul", {x, cos}), b.op("Mul", {rotated, sin})});
}

}  // namespace fusekit::samples
