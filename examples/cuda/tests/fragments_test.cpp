// The kernel's index math on the CPU: fragment layouts against the PTX ISA's tables, ldmatrix and
// mma emulated over the swizzled tiles the kernel uses (every way it uses them must compute the
// right product), and the swizzle's promise of conflict-free shared-memory access.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <set>
#include <vector>

#include "flash/fragments.hpp"
#include "flash/schedule.hpp"

namespace flash::frag {
namespace {

// A few entries of the PTX ISA's figures for mma.m16n8k16 (.f16/.bf16) fragments.
TEST(Fragments, MatchThePtxTables) {
  EXPECT_EQ(a_pair(0, 0), (coord{0, 0}));
  EXPECT_EQ(a_pair(5, 0), (coord{1, 2}));   // a0,a1: row groupID, col threadID_in_group·2
  EXPECT_EQ(a_pair(5, 1), (coord{9, 2}));   // a2,a3: row groupID + 8
  EXPECT_EQ(a_pair(5, 2), (coord{1, 10}));  // a4,a5: col + 8
  EXPECT_EQ(a_pair(31, 3), (coord{15, 14}));
  EXPECT_EQ(b_pair(5, 0), (coord{2, 1}));  // b0,b1: row (k) threadID_in_group·2, col groupID
  EXPECT_EQ(b_pair(31, 1), (coord{14, 7}));
  EXPECT_EQ(c_element(5, 0), (coord{1, 2}));
  EXPECT_EQ(c_element(5, 3), (coord{9, 3}));
  EXPECT_EQ(c_element(31, 3), (coord{15, 7}));
}

TEST(Fragments, EveryLaneAndRegisterCoversEachElementOnce) {
  std::set<std::pair<int, int>> a, b, c;
  for (int lane = 0; lane < warp_size; ++lane) {
    for (int p = 0; p < 4; ++p)
      for (int j = 0; j < 2; ++j) a.insert({a_pair(lane, p).row, a_pair(lane, p).col + j});
    for (int p = 0; p < 2; ++p)
      for (int j = 0; j < 2; ++j) b.insert({b_pair(lane, p).row + j, b_pair(lane, p).col});
    for (int e = 0; e < 4; ++e) c.insert({c_element(lane, e).row, c_element(lane, e).col});
  }
  EXPECT_EQ(a.size(), 16u * 16);
  EXPECT_EQ(b.size(), 16u * 8);
  EXPECT_EQ(c.size(), 16u * 8);
}

// P stays in registers: C elements of n8 tiles 2k and 2k+1 are the A fragment of k-step k.
TEST(Fragments, ScoreAccumulatorsAreTheNextProductsAFragment) {
  for (int lane = 0; lane < warp_size; ++lane)
    for (int p = 0; p < 4; ++p) {
      const int tile = a_pair_source_tile(p), e = a_pair_source_element(p);
      const coord from = c_element(lane, e), next = c_element(lane, e + 1);
      EXPECT_EQ(a_pair(lane, p), (coord{from.row, tile * 8 + from.col})) << lane << " " << p;
      EXPECT_EQ(next.col, from.col + 1);
      EXPECT_EQ(next.row, from.row);
    }
}

// Shared memory as bytes holding 16-bit values.
struct shared {
  std::vector<std::uint16_t> words;
  std::uint16_t at(std::uint32_t byte) const { return words.at(byte / 2); }
};

using registers = std::array<std::array<std::uint32_t, 4>, warp_size>;

// ldmatrix.x4 (.trans) as the PTX ISA defines it: lane L supplies row L%8 of matrix L/8; without
// .trans lane L receives row L/4, columns 2(L%4) and +1 of each matrix, with .trans column L/4,
// rows 2(L%4) and +1.
registers ldmatrix(const shared& s, const std::array<std::uint32_t, warp_size>& rows, bool trans) {
  registers r{};
  for (int lane = 0; lane < warp_size; ++lane)
    for (int m = 0; m < 4; ++m) {
      std::uint16_t lo, hi;
      if (!trans) {
        lo = s.at(rows[8 * m + lane / 4] + 4 * (lane % 4));
        hi = s.at(rows[8 * m + lane / 4] + 4 * (lane % 4) + 2);
      } else {
        lo = s.at(rows[8 * m + 2 * (lane % 4)] + 2 * (lane / 4));
        hi = s.at(rows[8 * m + 2 * (lane % 4) + 1] + 2 * (lane / 4));
      }
      r[lane][m] = lo | std::uint32_t(hi) << 16;
    }
  return r;
}

// A tile filled with distinct small integers, so products are exact in any order.
shared fill(const smem_tile& t, auto value) {
  shared s{std::vector<std::uint16_t>(std::size_t(t.bytes() / 2))};
  for (int r = 0; r < t.rows; ++r)
    for (int c = 0; c < t.cols; ++c) s.words[t.offset(r, c) / 2] = std::uint16_t(value(r, c));
  return s;
}

std::array<std::uint32_t, warp_size> addresses(const smem_tile& t, int row0, int col0) {
  std::array<std::uint32_t, warp_size> a{};
  for (int lane = 0; lane < warp_size; ++lane) {
    const coord src = ldmatrix_x4_source(lane);
    a[lane] = t.offset(row0 + src.row, col0 + src.col);
  }
  return a;
}

int low(std::uint32_t r) { return int(r & 0xffff); }
int high(std::uint32_t r) { return int(r >> 16); }

// S = Q·Kᵀ for one 16×16 block of Q and 16 keys, K stored one key per row ([keys, dim], ldmatrix)
// or transposed ([dim, keys], ldmatrix.trans): both must give the fragments mma expects.
void check_scores(int head_dim, int keys, bool k_transposed) {
  const smem_tile q{64, head_dim};
  const smem_tile k = k_transposed ? smem_tile{head_dim, keys} : smem_tile{keys, head_dim};
  auto qv = [](int r, int c) { return (r * 7 + c * 3) % 11; };
  auto kv = [](int key, int d) { return (key * 5 + d) % 13; };
  const shared sq = fill(q, qv);
  const shared sk =
      k_transposed ? fill(k, [&](int d, int key) { return kv(key, d); }) : fill(k, kv);
  for (int row0 : {0, 16, 48})
    for (int kk = 0; kk < head_dim / 16; ++kk)
      for (int np = 0; np < keys / 16; ++np) {
        const registers a = ldmatrix(sq, addresses(q, row0, kk * 16), false);
        const registers b = k_transposed ? ldmatrix(sk, addresses(k, kk * 16, np * 16), true)
                                         : ldmatrix(sk, addresses(k, np * 16, kk * 16), false);
        // The matrices the mma would see, rebuilt from the fragments alone.
        int am[16][16] = {};
        for (int lane = 0; lane < warp_size; ++lane)
          for (int p = 0; p < 4; ++p) {
            const coord at = a_pair(lane, p);
            am[at.row][at.col] = low(a[lane][p]);
            am[at.row][at.col + 1] = high(a[lane][p]);
          }
        for (int t = 0; t < 2; ++t) {
          int bm[16][8] = {};
          for (int lane = 0; lane < warp_size; ++lane)
            for (int p = 0; p < 2; ++p) {
              const coord at = b_pair(lane, p);
              const std::uint32_t reg = b[lane][b_register(k_transposed, t, p)];
              bm[at.row][at.col] = low(reg);
              bm[at.row + 1][at.col] = high(reg);
            }
          for (int r = 0; r < 16; ++r)
            for (int n = 0; n < 8; ++n) {
              int product = 0, expected = 0;
              for (int j = 0; j < 16; ++j) {
                product += am[r][j] * bm[j][n];
                expected += qv(row0 + r, kk * 16 + j) * kv(np * 16 + t * 8 + n, kk * 16 + j);
              }
              ASSERT_EQ(product, expected)
                  << "dim " << head_dim << " keys " << keys << " transposed " << k_transposed
                  << " row " << r << " key " << n << " tile " << t;
            }
        }
      }
}

TEST(Ldmatrix, ScoresFromKRows) {
  check_scores(64, 64, false);
  check_scores(128, 64, false);
  check_scores(128, 32, false);
}

TEST(Ldmatrix, ScoresFromTransposedK) {
  check_scores(64, 64, true);
  check_scores(128, 64, true);
  check_scores(128, 32, true);
}

// O += P·V: V stored [keys, dim] and read with .trans; B pair bp of n-tile t of the block must be
// V[2·(lane%4) + 8·bp (+1)][n0 + 8t + lane/4].
TEST(Ldmatrix, ValueFragmentsThroughTrans) {
  for (auto [keys, dim] : {std::pair{64, 64}, {64, 128}, {32, 128}}) {
    const smem_tile v{keys, dim};
    auto vv = [](int key, int d) { return key * 300 + d; };
    const shared sv = fill(v, vv);
    for (int kk = 0; kk < keys / 16; ++kk)
      for (int np = 0; np < dim / 16; ++np) {
        const registers r = ldmatrix(sv, addresses(v, kk * 16, np * 16), true);
        for (int lane = 0; lane < warp_size; ++lane)
          for (int t = 0; t < 2; ++t)
            for (int bp = 0; bp < 2; ++bp) {
              const coord at = b_pair(lane, bp);
              const std::uint32_t reg = r[lane][b_register(true, t, bp)];
              const int key = kk * 16 + at.row, d = np * 16 + t * 8 + at.col;
              ASSERT_EQ(low(reg), vv(key, d) & 0xffff);
              ASSERT_EQ(high(reg), vv(key + 1, d) & 0xffff);
            }
      }
  }
}

// Shared memory serves 16-byte accesses a quarter warp at a time: eight lanes, conflict-free when
// they touch eight different 16-byte bank groups (address / 16 mod 8).
bool conflict_free(const std::vector<std::uint32_t>& quarter) {
  std::set<std::uint32_t> groups;
  for (std::uint32_t a : quarter) groups.insert(a / 16 % 8);
  return groups.size() == quarter.size();
}

// Every ldmatrix of the kernel: 16×16 blocks at every 16-aligned position of every tile shape.
bool ldmatrix_conflict_free(const smem_tile& t) {
  for (int r0 = 0; r0 < t.rows; r0 += 16)
    for (int c0 = 0; c0 < t.cols; c0 += 16) {
      const auto a = addresses(t, r0, c0);
      for (int m = 0; m < 4; ++m)
        if (!conflict_free(std::vector<std::uint32_t>(a.begin() + 8 * m, a.begin() + 8 * m + 8)))
          return false;
    }
  return true;
}

// Every cp.async of the kernel (and the epilogue's 16-byte reads of O).
bool copies_conflict_free(const smem_tile& t) {
  const int passes = t.rows * t.chunks_per_row() / threads;
  for (int i = 0; i < passes; ++i)
    for (int q0 = 0; q0 < threads; q0 += 8) {
      std::vector<std::uint32_t> quarter;
      for (int thread = q0; thread < q0 + 8; ++thread) {
        const coord c = copy_chunk(thread, i, t.chunks_per_row(), threads);
        quarter.push_back(t.offset(c.row, c.col * 8));
      }
      if (!conflict_free(quarter)) return false;
    }
  return true;
}

// The C fragments written to the O tile: 4-byte stores, a full warp at once over 32 banks.
bool epilogue_conflict_free(const smem_tile& t) {
  for (int r0 = 0; r0 < t.rows; r0 += 16)
    for (int c0 = 0; c0 < t.cols; c0 += 8)
      for (int e = 0; e < 4; e += 2) {
        std::set<std::uint32_t> banks;
        for (int lane = 0; lane < warp_size; ++lane) {
          const coord at = c_element(lane, e);
          banks.insert(t.offset(r0 + at.row, c0 + at.col) / 4 % 32);
        }
        if (banks.size() != 32) return false;
      }
  return true;
}

// Every tile the kernels allocate: Q/O [bm, d], K [bn, d] or [d, bn], V [bn, d].
std::vector<smem_tile> kernel_tiles() {
  std::vector<smem_tile> tiles;
  for (int dim : {64, 128})
    for (int slices : {1, 2}) {
      const tile_shape s{dim, slices};
      tiles.push_back({s.bm(), dim});
      tiles.push_back({s.bn(), dim});
      tiles.push_back({dim, s.bn()});
    }
  return tiles;
}

TEST(Swizzle, RemovesBankConflicts) {
  for (const smem_tile& t : kernel_tiles()) {
    EXPECT_TRUE(ldmatrix_conflict_free(t)) << t.rows << "×" << t.cols;
    EXPECT_TRUE(copies_conflict_free(t)) << t.rows << "×" << t.cols;
    EXPECT_TRUE(epilogue_conflict_free(t)) << t.rows << "×" << t.cols;
  }
}

// The check has teeth: without the swizzle, reading a column of 8 rows of 128 bytes or more
// lands every lane in one bank group.
TEST(Swizzle, UnswizzledTilesWouldConflict) {
  for (int cols : {64, 128}) {
    std::vector<std::uint32_t> quarter;
    for (int r = 0; r < 8; ++r) quarter.push_back(std::uint32_t(r * cols * 2));
    EXPECT_FALSE(conflict_free(quarter));
  }
}

TEST(Swizzle, IsAPermutationOfEachTile) {
  for (const smem_tile& t : kernel_tiles()) {
    std::set<std::uint32_t> seen;
    for (int r = 0; r < t.rows; ++r)
      for (int c = 0; c < t.cols; ++c) {
        const std::uint32_t at = t.offset(r, c);
        EXPECT_LT(at, std::uint32_t(t.bytes()));
        EXPECT_EQ(at % 2, 0u);
        seen.insert(at);
      }
    EXPECT_EQ(seen.size(), std::size_t(t.rows) * t.cols);
  }
}

// The copies keep one shared address per thread and add a constant per pass: moving down by the
// pass step (a multiple of 8 rows) must not change the swizzled column.
TEST(Swizzle, CopyPassesShiftByWholeRows) {
  for (const smem_tile& t : kernel_tiles()) {
    const int step = threads / t.chunks_per_row();
    ASSERT_EQ(step % 8, 0);
    for (int thread = 0; thread < threads; ++thread) {
      const coord c = copy_chunk(thread, 0, t.chunks_per_row(), threads);
      for (int i = 0; c.row + i * step < t.rows; ++i)
        EXPECT_EQ(t.offset(c.row + i * step, c.col * 8),
                  t.offset(c.row, c.col * 8) + std::uint32_t(i * step * t.cols * 2));
      const coord later = copy_chunk(thread, 1, t.chunks_per_row(), threads);
      if (later.row < t.rows) {
        EXPECT_EQ(later, (coord{c.row + step, c.col}));
      }
    }
  }
}

TEST(Tiles, FitTheSharedMemoryBudget) {
  for (int dim : {64, 128})
    for (int slices : {1, 2}) EXPECT_LE((tile_shape{dim, slices}.smem_bytes()), smem_budget);
}

}  // namespace
}  // namespace flash::frag
