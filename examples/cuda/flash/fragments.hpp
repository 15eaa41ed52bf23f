// Where each element of a tile lives: in shared memory (XOR swizzle), in the lanes of a warp
// (mma.sync.m16n8k16 and ldmatrix fragment layouts, as the PTX ISA specifies them), and which
// 16-byte chunk each thread copies. The kernels and the CPU tests use these same functions.
#pragma once

#include <cstdint>

#include "flash/hd.hpp"

namespace flash::frag {

inline constexpr int warp_size = 32;
inline constexpr int chunk_bytes = 16;  // one cp.async, one ldmatrix row

struct coord {
  int row, col;
  constexpr bool operator==(const coord&) const = default;
};

// mma.m16n8k16 A (16×16, row-major): lane holds 4 pairs of adjacent columns. With g = lane/4 and
// t = lane%4, pair p covers row g + 8·(p%2), columns 2t + 8·(p/2) and the one after.
FLASH_HD constexpr coord a_pair(int lane, int p) {
  return {lane / 4 + 8 * (p % 2), 2 * (lane % 4) + 8 * (p / 2)};
}
// B (16×8 as k×n): pair p covers rows k = 2t + 8p and the one after, column n = g.
FLASH_HD constexpr coord b_pair(int lane, int p) { return {2 * (lane % 4) + 8 * p, lane / 4}; }
// C/D (16×8, fp32): element e at row g + 8·(e/2), column 2t + e%2.
FLASH_HD constexpr coord c_element(int lane, int e) {
  return {lane / 4 + 8 * (e / 2), 2 * (lane % 4) + e % 2};
}

// P stays in registers: the C fragments of two adjacent n8 tiles are exactly the A fragment of
// one k16 step. A pair p comes from tile p/2 of the two, elements 2·(p%2) and 2·(p%2)+1.
FLASH_HD constexpr int a_pair_source_tile(int p) { return p / 2; }
FLASH_HD constexpr int a_pair_source_element(int p) { return 2 * (p % 2); }

// ldmatrix.x4 reads four 8×8 matrices; lane L supplies row L%8 of matrix L/8. The kernels arrange
// them as one 16×16 block, matrix i at (8·(i%2), 8·(i/2)). Returns the row and first column
// (in elements) that lane addresses.
FLASH_HD constexpr coord ldmatrix_x4_source(int lane) {
  return {lane % 8 + 8 * ((lane / 8) % 2), 8 * (lane / 16)};
}

// Which of the four ldmatrix registers holds B pair `p` of n8 tile `tile` (0 or 1) of the block.
// Without .trans (K stored one key per row) the block's rows are n: tile 1 is matrices 1 and 3.
// With .trans (V, or K stored transposed) the block's rows are k: tile 1 is matrices 2 and 3.
FLASH_HD constexpr int b_register(bool trans, int tile, int p) {
  return trans ? 2 * tile + p : tile + 2 * p;
}

// XOR swizzle of 16-byte chunks: within each 128-byte line (or row, when rows are longer), chunk
// c moves to c ^ (line % 8). Eight consecutive rows read at one column then hit eight different
// bank groups, for ldmatrix and cp.async alike. Rows must be 64, 128 or 256 bytes.
FLASH_HD constexpr std::uint32_t swizzle(std::uint32_t offset, std::uint32_t row_bytes) {
  const std::uint32_t line = row_bytes < 128 ? 128 : row_bytes;
  return offset ^ (((offset / line) % 8) << 4);
}

// A tile of 2-byte elements in shared memory, `cols` elements per row, swizzled.
struct smem_tile {
  int rows, cols;
  FLASH_HD constexpr std::uint32_t offset(int row, int col) const {
    return swizzle(std::uint32_t((row * cols + col) * 2), std::uint32_t(cols * 2));
  }
  FLASH_HD constexpr int bytes() const { return rows * cols * 2; }
  FLASH_HD constexpr int chunks_per_row() const { return cols * 2 / chunk_bytes; }
};

// Tile copies: pass `i` of thread `thread` (of `threads`) copies chunk `chunk` of row `row`.
// Consecutive threads take consecutive chunks of a row, so global reads coalesce.
FLASH_HD constexpr coord copy_chunk(int thread, int i, int chunks_per_row, int threads) {
  const int index = thread + i * threads;
  return {index / chunks_per_row, index % chunks_per_row};
}

}  // namespace flash::frag
