// The tiled algorithm, emulated on the CPU, against the fp64 reference: every tile shape, both
// element types, causal or not, the three layouts, sequence tails, scales up to F5-TTS's 100.
// Also the schedule: which tiles a query tile visits and which it masks.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "flash/emulation.hpp"
#include "flash/reference.hpp"
#include "flash/schedule.hpp"
#include "test_tensors.hpp"

namespace flash {
namespace {

using testing::layout;

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

struct case_t {
  element type;
  int dim, slices;
  bool causal;
  layout l;
  int seq_q, seq_kv;
  float scale;
  int heads = 2, kv_heads = 2;
};

std::string describe(const case_t& c) {
  return std::string(element_name(c.type)) + " d" + std::to_string(c.dim) + " slices " +
         std::to_string(c.slices) + (c.causal ? " causal " : " ") + testing::layout_name(c.l) +
         " S " + std::to_string(c.seq_q) + "×" + std::to_string(c.seq_kv) + " scale " +
         std::to_string(c.scale) + " heads " + std::to_string(c.heads) + "/" +
         std::to_string(c.kv_heads);
}

double emulation_error(const case_t& c) {
  const problem p = testing::make_problem(c.type, 2, c.heads, c.kv_heads, c.seq_q, c.seq_kv, c.dim,
                                          c.scale, c.causal, c.l);
  const testing::inputs in = testing::random_inputs(p, 7);
  std::vector<float> out(std::size_t(o_extent(p)), NAN);
  emulate_tiled(p, c.slices, in.q.data(), in.k.data(), in.v.data(), out.data());
  return testing::max_error(p, out, reference(p, in.q.data(), in.k.data(), in.v.data()));
}

// Every combination of element type, head size, query tile, causal and layout, each with its own
// sequence lengths (tails included) and scale, so the sweep stays a few seconds.
TEST(Emulation, MatchesTheReference) {
  const int seqs[][2] = {{64, 64}, {100, 100}, {37, 37}, {130, 130}, {1, 1}, {200, 77}, {65, 190}};
  int n = 0;
  for (element type : {element::f16, element::bf16})
    for (int dim : {64, 128})
      for (int slices : {1, 2})
        for (bool causal : {false, true})
          for (layout l : {layout::bnsh, layout::bsnh, layout::bnhs_k}) {
            const auto& s = seqs[n % 7];
            const float scale = n % 3 == 0   ? 100.f
                                : n % 3 == 1 ? 1.f / std::sqrt(float(dim))
                                             : 0.3f;
            ++n;
            const case_t c{type, dim, slices, causal, l, s[0], s[1], scale};
            EXPECT_LE(emulation_error(c), testing::tolerance(type)) << describe(c);
          }
}

TEST(Emulation, F5TtsScaleOfOneHundred) {
  for (element type : {element::f16, element::bf16})
    for (int seq : {256, 300}) {
      const case_t c{type, 64, 1, false, layout::bnhs_k, seq, seq, 100.f};
      EXPECT_LE(emulation_error(c), testing::tolerance(type)) << describe(c);
    }
}

TEST(Emulation, GroupedQueryHeadsShareKeyValueHeads) {
  const case_t c{element::f16, 128, 2, true, layout::bnsh, 150, 150, 0.125f, 8, 2};
  EXPECT_LE(emulation_error(c), testing::tolerance(element::f16)) << describe(c);
}

TEST(Emulation, RowsWithNoVisibleKeyAreZeroNotNan) {
  const problem p =
      testing::make_problem(element::f16, 1, 1, 1, 70, 0, 64, 1.f, false, layout::bnsh);
  const testing::inputs in = testing::random_inputs(p, 1);
  std::vector<float> out(std::size_t(o_extent(p)), NAN);
  emulate_tiled(p, 1, in.q.data(), in.k.data(), in.v.data(), out.data());
  for (float x : out) EXPECT_EQ(x, 0.f);
}

// The comparison has teeth: a causal reference against a non-causal emulation fails it.
TEST(Emulation, ToleranceDetectsAWrongMask) {
  problem p =
      testing::make_problem(element::f16, 1, 2, 2, 100, 100, 64, 0.125f, false, layout::bnsh);
  const testing::inputs in = testing::random_inputs(p, 3);
  std::vector<float> out(std::size_t(o_extent(p)));
  emulate_tiled(p, 1, in.q.data(), in.k.data(), in.v.data(), out.data());
  p.causal = true;
  EXPECT_GT(testing::max_error(p, out, reference(p, in.q.data(), in.k.data(), in.v.data())),
            10 * testing::tolerance(element::f16));
}

}  // namespace
}  // namespace flash
