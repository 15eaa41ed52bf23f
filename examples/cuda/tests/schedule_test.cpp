// The tiled kernel's schedule: which K/V tiles a query tile visits, which it masks, and which
// query tile size a grid takes.
#include <gtest/gtest.h>

#include <algorithm>

#include "flash/schedule.hpp"

namespace flash {
namespace {

// Tiles the kernel skips are fully masked for every row of the query tile; tiles it reads
// without a mask hide nothing from any row.
TEST(Schedule, SkipsOnlyFullyMaskedTilesAndMasksEveryPartialOne) {
  for (int dim : {64, 128})
    for (int slices : {1, 2})
      for (bool causal : {false, true})
        for (int seq_q : {1, 63, 64, 65, 200})
          for (int seq_kv : {0, 1, 31, 64, 100, 257}) {
            const tile_shape t{dim, slices};
            for (int row0 = 0; row0 < seq_q; row0 += t.bm()) {
              const int count = kv_tile_count(row0, t, seq_kv, causal);
              const int rows = std::min(t.bm(), seq_q - row0);
              for (int tile = 0; tile * t.bn() < seq_kv + t.bn(); ++tile) {
                bool any_visible = false, any_hidden = false;
                for (int r = row0; r < row0 + rows; ++r)
                  for (int key = tile * t.bn(); key < (tile + 1) * t.bn(); ++key)
                    (masked(r, key, seq_kv, causal) ? any_hidden : any_visible) = true;
                if (tile >= count) {
                  EXPECT_FALSE(any_visible) << "skipped a tile with visible keys";
                } else if (!tile_needs_mask(row0, tile, t, seq_kv, causal)) {
                  EXPECT_FALSE(any_hidden) << "an unmasked tile hides keys";
                }
                if (tile < count && seq_q - row0 >= t.bm() && !any_visible) {
                  ADD_FAILURE() << "visits a fully masked tile";
                }
              }
            }
          }
}

TEST(Schedule, SmallGridsTakeSmallQueryTiles) {
  constexpr int h100 = 132, a100 = 108;
  for (int seq : {256, 512, 1024}) EXPECT_EQ(query_slices(2 * 16, seq, h100), 1) << seq;
  EXPECT_EQ(query_slices(2 * 16, 512, a100), 1);
  // 256 tiles of 128 rows already give each of the A100's 108 SMs two blocks.
  EXPECT_EQ(query_slices(2 * 16, 1024, a100), 2);
  EXPECT_EQ(query_slices(2 * 24, 4096, h100), 2) << "SD3";
  EXPECT_EQ(query_slices(16 * 16, 2048, h100), 2);
}

}  // namespace
}  // namespace flash
