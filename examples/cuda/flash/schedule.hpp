// What a thread block does: its tile shapes, which K/V tiles a query tile visits (causal blocks
// skip the fully masked ones), which of those need a mask, and how big the query tiles are.
#pragma once

#include <cstdint>

#include "flash/hd.hpp"

namespace flash {

inline constexpr int warps = 4;
inline constexpr int threads = warps * 32;
inline constexpr int warp_rows = 16;  // rows of one query slice: the m of mma.m16n8k16
// Static shared memory a block may declare (48 KiB): every tile set fits it, on every SM80+ GPU.
inline constexpr int smem_budget = 48 * 1024;

// A query tile of `slices` 16-row slices per warp (64 or 128 rows), K/V tiles of `bn` keys.
// 128 rows with d = 128 keeps 128 fp32 accumulators per thread, so its K/V tiles are 32 keys to
// leave registers for the scores (and the three tiles fit 48 KiB).
struct tile_shape {
  int head_dim, slices;
  FLASH_HD constexpr int bm() const { return warps * warp_rows * slices; }
  FLASH_HD constexpr int bn() const { return head_dim == 128 && slices == 2 ? 32 : 64; }
  // Q (reused for O), K and V, 2-byte elements.
  FLASH_HD constexpr int smem_bytes() const { return (bm() + 2 * bn()) * head_dim * 2; }
};

// K/V tiles [0, count) hold every key some row of the query tile at `q_row0` may see. Causal:
// the tiles after the tile's last row are fully masked and never visited.
FLASH_HD constexpr int kv_tile_count(int q_row0, tile_shape t, int seq_kv, bool causal) {
  const int end = causal && q_row0 + t.bm() < seq_kv ? q_row0 + t.bm() : seq_kv;
  return (end + t.bn() - 1) / t.bn();
}

// Key `key` is hidden from query `row`: past the sequence end, or in its future.
FLASH_HD constexpr bool masked(int row, int key, int seq_kv, bool causal) {
  return key >= seq_kv || (causal && key > row);
}

// Only the tile holding the sequence end and, causal, the tiles the diagonal crosses need the
// mask; the others are read as they are.
FLASH_HD constexpr bool tile_needs_mask(int q_row0, int kv_tile, tile_shape t, int seq_kv,
                                        bool causal) {
  const int key_end = (kv_tile + 1) * t.bn();
  return key_end > seq_kv || (causal && key_end - 1 > q_row0);
}

// 128-row query tiles reuse each K/V tile twice as often; 64-row tiles make twice the blocks.
// Small grids (batch 2 × 16 heads × S ≤ 1024, as F5-TTS runs) take 64 rows, so that every SM
// gets at least two blocks.
constexpr int query_slices(std::int64_t batch_heads, int seq_q, int sm_count) {
  const std::int64_t big_tiles = batch_heads * ((seq_q + 127) / 128);
  return big_tiles >= 2 * std::int64_t(sm_count) ? 2 : 1;
}

}  // namespace flash
