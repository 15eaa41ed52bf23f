// What the warp-collective instructions compute, lane by lane, as the PTX ISA specifies them:
// pure functions over the 32 lanes' registers, used by the machine and checked by the emulator's
// specification tests on known matrices. Written from the ISA's fragment tables, not from the
// kernel's own layout helpers (flash/fragments.hpp), so that a mistake in one shows in the other.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

#include "fusekit/graph/dtype.hpp"

namespace flash::emulator::isa {

inline constexpr int lanes = 32;

struct element_at {
  int row, col;
};

// mma.m16n8k16 with .f16/.bf16 inputs. With g = lane / 4 and t = lane % 4:
// A (16×16, .row), 8 elements a0..a7 in 4 registers (2 each, the lower index in the low half):
//   a_i at row g + 8·((i / 2) % 2), column 2t + i % 2 + 8·(i / 4).
constexpr element_at mma_a(int lane, int i) {
  return {lane / 4 + 8 * ((i / 2) % 2), 2 * (lane % 4) + i % 2 + 8 * (i / 4)};
}
// B (16×8, k × n, .col), b0..b3 in 2 registers: b_i at row (k) 2t + i % 2 + 8·(i / 2), column g.
constexpr element_at mma_b(int lane, int i) {
  return {2 * (lane % 4) + i % 2 + 8 * (i / 2), lane / 4};
}
// C and D (16×8, f32), c0..c3: c_i at row g + 8·(i / 2), column 2t + i % 2.
constexpr element_at mma_c(int lane, int i) {
  return {lane / 4 + 8 * (i / 2), 2 * (lane % 4) + i % 2};
}

enum class input : std::uint8_t { f16, bf16 };

inline float widen(input type, std::uint16_t bits) {
  return type == input::f16 ? fusekit::half_to_float(bits) : fusekit::bfloat16_to_float(bits);
}
inline std::uint16_t half_of(std::uint32_t r, int which) {
  return static_cast<std::uint16_t>(which == 0 ? r & 0xffffu : r >> 16);
}

struct mma_operands {
  std::uint32_t a[lanes][4];
  std::uint32_t b[lanes][2];
  float c[lanes][4];
};

// D = A·B + C. The products of two f16 or bf16 values are exact in double, and so is their sum
// here to well below fp32's precision; each D element is that sum, plus C, rounded to fp32 once.
// (The ISA leaves the accumulation order and its intermediate rounding open; this is the exact
// result, which a kernel's tolerance must hold against.)
inline void mma_m16n8k16(input type, const mma_operands& in, float (&d)[lanes][4]) {
  double a[16][16], b[16][8], c[16][8];
  for (int lane = 0; lane < lanes; ++lane) {
    for (int i = 0; i < 8; ++i) {
      const element_at at = mma_a(lane, i);
      a[at.row][at.col] = widen(type, half_of(in.a[lane][i / 2], i % 2));
    }
    for (int i = 0; i < 4; ++i) {
      const element_at at = mma_b(lane, i);
      b[at.row][at.col] = widen(type, half_of(in.b[lane][i / 2], i % 2));
      const element_at ct = mma_c(lane, i);
      c[ct.row][ct.col] = in.c[lane][i];
    }
  }
  for (int lane = 0; lane < lanes; ++lane)
    for (int i = 0; i < 4; ++i) {
      const element_at at = mma_c(lane, i);
      double sum = c[at.row][at.col];
      for (int k = 0; k < 16; ++k) sum += a[at.row][k] * b[k][at.col];
      d[lane][i] = static_cast<float>(sum);
    }
}

// ldmatrix .m8n8 .b16: matrix rows are 16 bytes (8 elements). Without .trans lane L receives
// row L / 4, elements 2·(L % 4) and the next; with .trans, column L / 4, rows 2·(L % 4) and the
// next (the lower index in the low half).
using matrix8x8 = std::array<std::array<std::uint16_t, 8>, 8>;

constexpr std::uint32_t ldmatrix_register(const matrix8x8& m, bool trans, int lane) {
  const int first = 2 * (lane % 4), line = lane / 4;
  const std::uint16_t lo = trans ? m[first][line] : m[line][first];
  const std::uint16_t hi = trans ? m[first + 1][line] : m[line][first + 1];
  return std::uint32_t(lo) | std::uint32_t(hi) << 16;
}

// shfl.sync: the lane a lane reads from (width 32). .bfly reads lane ^ mask, or its own value
// where that is past the warp; .idx reads lane b[4:0].
constexpr int shuffle_source(bool butterfly, int lane, int lane_or_mask) {
  if (!butterfly) return lane_or_mask & 31;
  const int source = lane ^ lane_or_mask;
  return source >= 0 && source < 32 ? source : lane;
}

}  // namespace flash::emulator::isa
