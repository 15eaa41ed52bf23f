// The SIMT emulator's specification: its warp-collective instructions against the PTX ISA's
// fragment tables on known matrices, the faults it must catch in small planted kernels (races, a
// missing cp.async wait, out-of-bounds accesses, divergent collectives), and the tiled kernel's
// result under other thread schedules and ex2 errors. Kernels here are written as CUDA and
// compiled, like the flash kernels, against the emulator.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "../tools/device_tensors.hpp"
#include "emulator/instructions.hpp"
#include "emulator/machine.hpp"
#include "flash/device.cuh"
#include "flash/launch.hpp"
#include "flash/reference.hpp"
#include "test_tensors.hpp"

namespace flash::emulator {
namespace {

// ---- the PTX ISA's tables, entry by entry (m16n8k16 with .f16/.bf16; g = lane/4, t = lane%4) --

TEST(Tables, MmaFragmentsAreTheIsasLayouts) {
  // Lane 0 (g 0, t 0) and lane 29 (g 7, t 1), every element: rows and columns as the ISA lists.
  const isa::element_at a0[8] = {{0, 0}, {0, 1}, {8, 0}, {8, 1}, {0, 8}, {0, 9}, {8, 8}, {8, 9}};
  const isa::element_at a29[8] = {{7, 2},  {7, 3},  {15, 2},  {15, 3},
                                  {7, 10}, {7, 11}, {15, 10}, {15, 11}};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(isa::mma_a(0, i).row, a0[i].row) << i;
    EXPECT_EQ(isa::mma_a(0, i).col, a0[i].col) << i;
    EXPECT_EQ(isa::mma_a(29, i).row, a29[i].row) << i;
    EXPECT_EQ(isa::mma_a(29, i).col, a29[i].col) << i;
  }
  const isa::element_at b29[4] = {{2, 7}, {3, 7}, {10, 7}, {11, 7}};
  const isa::element_at c29[4] = {{7, 2}, {7, 3}, {15, 2}, {15, 3}};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(isa::mma_b(29, i).row, b29[i].row) << i;
    EXPECT_EQ(isa::mma_b(29, i).col, b29[i].col) << i;
    EXPECT_EQ(isa::mma_c(29, i).row, c29[i].row) << i;
    EXPECT_EQ(isa::mma_c(29, i).col, c29[i].col) << i;
  }
  // Each table places every element of its matrix exactly once.
  int a[16][16] = {}, b[16][8] = {}, c[16][8] = {};
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i) ++a[isa::mma_a(lane, i).row][isa::mma_a(lane, i).col];
    for (int i = 0; i < 4; ++i) ++b[isa::mma_b(lane, i).row][isa::mma_b(lane, i).col];
    for (int i = 0; i < 4; ++i) ++c[isa::mma_c(lane, i).row][isa::mma_c(lane, i).col];
  }
  for (int r = 0; r < 16; ++r) {
    for (int col = 0; col < 16; ++col) EXPECT_EQ(a[r][col], 1);
    for (int col = 0; col < 8; ++col) EXPECT_EQ(b[r][col], 1);
    for (int col = 0; col < 8; ++col) EXPECT_EQ(c[r][col], 1);
  }
}

// ---- instructions, run by a warp ----

template <class T>
struct on_device {
  T* p = nullptr;
  explicit on_device(std::size_t n, const T* from = nullptr) {
    cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(T));
    if (from) cudaMemcpy(p, from, n * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~on_device() { cudaFree(p); }
  std::vector<T> get(std::size_t n) const {
    std::vector<T> out(n);
    cudaMemcpy(out.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
    return out;
  }
};

bool launch_ok() { return cudaGetLastError() == cudaSuccess; }

__global__ void mma_kernel(const std::uint32_t* a, const std::uint32_t* b, const float* c, float* d,
                           int bf16) {
  const int lane = int(threadIdx.x);
  float acc[4] = {c[lane * 4], c[lane * 4 + 1], c[lane * 4 + 2], c[lane * 4 + 3]};
  const std::uint32_t frag[4] = {a[lane * 4], a[lane * 4 + 1], a[lane * 4 + 2], a[lane * 4 + 3]};
  if (bf16)
    ptx::mma<__nv_bfloat16>(acc, frag, b[lane * 2], b[lane * 2 + 1]);
  else
    ptx::mma<__half>(acc, frag, b[lane * 2], b[lane * 2 + 1]);
  for (int i = 0; i < 4; ++i) d[lane * 4 + i] = acc[i];
}

// D = A·B + C on small integers (exact in f16, bf16 and f32), every element compared.
TEST(Instructions, MmaComputesTheProductOfTheTablesMatrices) {
  for (bool bf16 : {false, true}) {
    auto bits = [&](int v) {
      return bf16 ? fusekit::float_to_bfloat16(float(v)) : fusekit::float_to_half(float(v));
    };
    auto A = [](int m, int k) { return (m + 2 * k) % 7 - 3; };
    auto B = [](int k, int n) { return (3 * k + n) % 5 - 2; };
    auto C = [](int m, int n) { return m - 2 * n; };
    std::vector<std::uint32_t> a(32 * 4, 0), b(32 * 2, 0);
    std::vector<float> c(32 * 4);
    for (int lane = 0; lane < 32; ++lane) {
      for (int i = 0; i < 8; ++i) {
        const auto at = isa::mma_a(lane, i);
        a[lane * 4 + i / 2] |= std::uint32_t(bits(A(at.row, at.col))) << (16 * (i % 2));
      }
      for (int i = 0; i < 4; ++i) {
        const auto at = isa::mma_b(lane, i);
        b[lane * 2 + i / 2] |= std::uint32_t(bits(B(at.row, at.col))) << (16 * (i % 2));
        const auto ct = isa::mma_c(lane, i);
        c[lane * 4 + i] = float(C(ct.row, ct.col));
      }
    }
    on_device<std::uint32_t> da(a.size(), a.data()), db(b.size(), b.data());
    on_device<float> dc(c.size(), c.data()), dd(c.size());
    FLASH_LAUNCH(mma_kernel, 1, 32, nullptr)(da.p, db.p, dc.p, dd.p, int(bf16));
    ASSERT_TRUE(launch_ok()) << fault();
    const std::vector<float> d = dd.get(c.size());
    for (int lane = 0; lane < 32; ++lane)
      for (int i = 0; i < 4; ++i) {
        const auto at = isa::mma_c(lane, i);
        int want = C(at.row, at.col);
        for (int k = 0; k < 16; ++k) want += A(at.row, k) * B(k, at.col);
        EXPECT_EQ(d[lane * 4 + i], float(want)) << "lane " << lane << " d" << i << " bf16 " << bf16;
      }
  }
}

// Four 8×8 matrices of 16-bit values 100·matrix + 10·row + column, rows 16 bytes apart.
__global__ void ldmatrix_kernel(std::uint32_t* out, int count, int trans) {
  FLASH_SHARED(16, std::uint16_t[4 * 64], tiles);
  const int lane = int(threadIdx.x);
  for (int e = lane; e < 4 * 64; e += 32)
    tiles[e] = std::uint16_t(100 * (e / 64) + 10 * (e % 64 / 8) + e % 8);
  __syncwarp();
  std::uint32_t r[4] = {};
  const std::uint32_t row = ptx::smem_address(tiles) + std::uint32_t(lane * 16);
  if (count == 1) emulator::ldmatrix(1, trans != 0, r, row);
  if (count == 2) emulator::ldmatrix(2, trans != 0, r, row);
  if (count == 4) emulator::ldmatrix(4, trans != 0, r, row);
  for (int i = 0; i < 4; ++i) out[lane * 4 + i] = r[i];
}

TEST(Instructions, LdmatrixGivesEachLaneItsPairAsTheIsaLists) {
  for (int count : {1, 2, 4})
    for (bool trans : {false, true}) {
      on_device<std::uint32_t> out(32 * 4);
      FLASH_LAUNCH(ldmatrix_kernel, 1, 32, nullptr)(out.p, count, int(trans));
      ASSERT_TRUE(launch_ok()) << fault();
      const std::vector<std::uint32_t> r = out.get(32 * 4);
      for (int lane = 0; lane < 32; ++lane)
        for (int i = 0; i < 4; ++i) {
          // Lane L: row L/4, columns 2(L%4) and the next; .trans: column L/4, rows 2(L%4), +1.
          const int g = lane / 4, t = lane % 4;
          const std::uint32_t lo = trans ? 100 * i + 10 * (2 * t) + g : 100 * i + 10 * g + 2 * t;
          const std::uint32_t hi = trans ? lo + 10 : lo + 1;
          const std::uint32_t want = i < count ? lo | hi << 16 : 0;
          EXPECT_EQ(r[lane * 4 + i], want)
              << "x" << count << (trans ? ".trans" : "") << " lane " << lane << " register " << i;
        }
    }
}

__global__ void shuffle_kernel(int* out) {
  const int lane = int(threadIdx.x);
  out[lane] = __shfl_xor_sync(0xffffffffu, lane * 10, 5);
  out[32 + lane] = __shfl_sync(0xffffffffu, lane * 10, 31 - lane);
  out[64 + lane] = __shfl_xor_sync(0xffffffffu, lane * 10, 32);  // past the warp: its own value
}

TEST(Instructions, ShufflesReadTheLaneTheIsaNames) {
  on_device<int> out(96);
  FLASH_LAUNCH(shuffle_kernel, 1, 32, nullptr)(out.p);
  ASSERT_TRUE(launch_ok()) << fault();
  const std::vector<int> r = out.get(96);
  for (int lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(r[lane], (lane ^ 5) * 10);
    EXPECT_EQ(r[32 + lane], (31 - lane) * 10);
    EXPECT_EQ(r[64 + lane], lane * 10);
  }
}

TEST(Instructions, Ex2IsCorrectlyRoundedAndFlushesSubnormals) {
  EXPECT_EQ(ex2_approx_ftz(3.f), 8.f);
  EXPECT_EQ(ex2_approx_ftz(-INFINITY), 0.f);
  EXPECT_EQ(ex2_approx_ftz(1e-40f), 1.f) << "a subnormal input is zero";
  EXPECT_EQ(ex2_approx_ftz(-140.f), 0.f) << "a subnormal result is zero";
  EXPECT_EQ(ex2_approx_ftz(0.5f), float(std::sqrt(2.0)));
  // With an approximation seed, within 2 units in the last place, and not always exact.
  configuration().approximation_seed = 7;
  int moved = 0;
  for (float x = -20.f; x < 20.f; x += 0.37f) {
    const float exact = float(std::exp2(double(x))), y = ex2_approx_ftz(x);
    EXPECT_LE(std::abs(y - exact), 2.5f * (std::nextafter(exact, INFINITY) - exact)) << x;
    moved += y != exact;
  }
  configuration().approximation_seed = 0;
  EXPECT_GT(moved, 10);
}

// ---- planted faults ----

__global__ void race_kernel(float* out, int with_barrier, int across_warps) {
  FLASH_SHARED(4, float[64], cells);
  const int t = int(threadIdx.x);
  const int reader = across_warps ? 32 : 1;
  cells[t] = 0.f;
  __syncthreads();
  if (t == 0) cells[0] = 1.f;
  if (with_barrier) {
    if (across_warps)
      __syncthreads();
    else
      __syncwarp();
  }
  if (t == reader) out[0] = cells[0];
}

TEST(Faults, RaceBetweenWarpsWithoutBarrier) {
  on_device<float> out(1);
  FLASH_LAUNCH(race_kernel, 1, 64, nullptr)(out.p, 0, 1);
  EXPECT_FALSE(launch_ok());
  EXPECT_EQ(fault(),
            "shared-memory race: block (0,0,0) thread 32 (warp 1, lane 0) reads shared byte 0, "
            "which thread 0 (warp 0, lane 0) wrote with no barrier between");
}

TEST(Faults, RaceBetweenLanesWithoutSyncwarp) {
  on_device<float> out(1);
  FLASH_LAUNCH(race_kernel, 1, 64, nullptr)(out.p, 0, 0);
  EXPECT_FALSE(launch_ok());
  EXPECT_EQ(fault(),
            "shared-memory race: block (0,0,0) thread 1 (warp 0, lane 1) reads shared byte 0, "
            "which thread 0 (warp 0, lane 0) wrote with no barrier between");
}

TEST(Faults, BarriersOrderTheSameAccesses) {
  for (int across : {0, 1}) {
    on_device<float> out(1);
    FLASH_LAUNCH(race_kernel, 1, 64, nullptr)(out.p, 1, across);
    EXPECT_TRUE(launch_ok()) << fault();
    EXPECT_EQ(out.get(1)[0], 1.f);
  }
}

// Whatever order the threads run in: every seed finds the race.
TEST(Faults, EveryScheduleFindsTheRace) {
  for (unsigned seed : {1u, 2u, 3u, 4u}) {
    configuration().schedule_seed = seed;
    on_device<float> out(1);
    FLASH_LAUNCH(race_kernel, 1, 64, nullptr)(out.p, 0, 1);
    EXPECT_FALSE(launch_ok()) << seed;
    EXPECT_NE(fault().find("shared-memory race"), std::string::npos) << fault();
  }
  configuration().schedule_seed = 0;
}

// A write after another warp's read, with no barrier between, is a race too (WAR).
__global__ void write_after_read_kernel(float* out) {
  FLASH_SHARED(4, float[64], cells);
  const int t = int(threadIdx.x);
  cells[t] = 1.f;
  __syncthreads();
  if (t == 5) out[0] = cells[40];
  if (t == 40) cells[40] = 2.f;
}

TEST(Faults, WriteAfterAnotherWarpsRead) {
  on_device<float> out(1);
  FLASH_LAUNCH(write_after_read_kernel, 1, 64, nullptr)(out.p);
  EXPECT_FALSE(launch_ok());
  EXPECT_EQ(fault(),
            "shared-memory race: block (0,0,0) thread 40 (warp 1, lane 8) writes shared byte 160, "
            "which thread 5 (warp 0, lane 5) read with no barrier between");
}

__global__ void copy_kernel(const float* in, float* out, int wait, int valid) {
  FLASH_SHARED(16, float[4 * 32], tile);
  const int t = int(threadIdx.x);
  ptx::cp_async_16(ptx::smem_address(tile) + std::uint32_t(t * 16), in + 4 * t, valid != 0);
  ptx::cp_async_commit();
  if (wait) ptx::cp_async_wait_all();
  __syncthreads();
  out[t] = tile[(4 * t + 4) % 128];
}

TEST(Faults, ReadBeforeTheCopyIsWaitedFor) {
  std::vector<float> host(128, 2.f);
  on_device<float> in(128, host.data()), out(32);
  FLASH_LAUNCH(copy_kernel, 1, 32, nullptr)(in.p, out.p, 0, 1);
  EXPECT_FALSE(launch_ok());
  EXPECT_EQ(fault(),
            "read or write before cp.async.wait_group: block (0,0,0) thread 0 (warp 0, lane 0) "
            "reads shared byte 16, which a cp.async of thread 1 (warp 0, lane 1) has not yet "
            "landed");
}

TEST(Faults, CopiesLandAtTheWaitAndZeroFillInvalidSources) {
  std::vector<float> host(128);
  for (int i = 0; i < 128; ++i) host[std::size_t(i)] = float(i);
  for (int valid : {1, 0}) {
    on_device<float> in(128, host.data()), out(32);
    FLASH_LAUNCH(copy_kernel, 1, 32, nullptr)(in.p, out.p, 1, valid);
    ASSERT_TRUE(launch_ok()) << fault();
    const std::vector<float> r = out.get(32);
    for (int t = 0; t < 32; ++t)
      EXPECT_EQ(r[std::size_t(t)], valid ? float((4 * t + 4) % 128) : 0.f);
  }
}

__global__ void global_kernel(const float* in, float* out, int n) { out[threadIdx.x] = in[n]; }

TEST(Faults, GlobalReadPastTheAllocation) {
  on_device<float> in(64), out(32);
  FLASH_LAUNCH(global_kernel, 1, 32, nullptr)(in.p, out.p, 63);
  EXPECT_TRUE(launch_ok()) << fault();
  FLASH_LAUNCH(global_kernel, 1, 32, nullptr)(in.p, out.p, 64);
  EXPECT_FALSE(launch_ok());
  // The address differs from run to run; the rest is fixed.
  EXPECT_TRUE(
      fault().starts_with("out-of-bounds global access: block (0,0,0) thread 0 (warp 0, "
                          "lane 0): read of 4 bytes at 0x"))
      << fault();
  EXPECT_NE(fault().find(", outside every allocation (code at program offset 0x"),
            std::string::npos)
      << fault();
}

__global__ void shared_bounds_kernel(float* out, int n) {
  FLASH_SHARED(4, float[32], cells);
  cells[threadIdx.x] = 1.f;
  __syncthreads();
  out[threadIdx.x] = cells[n];
}

TEST(Faults, SharedReadPastTheDeclaration) {
  on_device<float> out(32);
  FLASH_LAUNCH(shared_bounds_kernel, 1, 32, nullptr)(out.p, 32);
  EXPECT_FALSE(launch_ok());
  EXPECT_EQ(fault(),
            "out-of-bounds shared access: block (0,0,0) thread 0 (warp 0, lane 0): read of 4 "
            "bytes at shared offset 128, outside the 128 bytes of shared memory the block "
            "declared");
}

__global__ void uninitialised_kernel(float* out) {
  FLASH_SHARED(4, float[32], cells);
  if (threadIdx.x != 3) cells[threadIdx.x] = 1.f;
  __syncthreads();
  out[threadIdx.x] = cells[(threadIdx.x + 1) % 32];
}

TEST(Faults, ReadOfSharedMemoryNoThreadWrote) {
  on_device<float> out(32);
  FLASH_LAUNCH(uninitialised_kernel, 1, 32, nullptr)(out.p);
  EXPECT_FALSE(launch_ok());
  EXPECT_EQ(fault(),
            "uninitialised shared read: block (0,0,0) thread 2 (warp 0, lane 2) reads shared "
            "byte 12, which no thread of the block has written");
}

__global__ void exiting_half_kernel(int* out) {
  const int lane = int(threadIdx.x);
  if (lane >= 16) return;
  out[lane] = __shfl_xor_sync(0xffffffffu, lane, 1);
}

TEST(Faults, CollectiveReachedByPartOfTheWarp) {
  on_device<int> out(32);
  FLASH_LAUNCH(exiting_half_kernel, 1, 32, nullptr)(out.p);
  EXPECT_FALSE(launch_ok());
  EXPECT_EQ(fault(),
            "divergent warp collective: block (0,0,0) thread 16 (warp 0, lane 16) exits while "
            "lane 0 waits at shfl.sync");
}

// shfl.sync may meet from different sites (sm_70 and later); an .aligned instruction may not.
__global__ void two_sites_kernel(int* out, int aligned) {
  FLASH_SHARED(16, std::uint16_t[64], tile);
  const int lane = int(threadIdx.x);
  tile[2 * lane] = tile[2 * lane + 1] = 0;
  __syncwarp();
  std::uint32_t r[1];
  const std::uint32_t row = ptx::smem_address(tile) + std::uint32_t(lane % 8 * 16);
  if (lane >= 16) {
    out[lane] = __shfl_xor_sync(0xffffffffu, lane, 1);
    if (aligned) emulator::ldmatrix(1, false, r, row);
  } else {
    out[lane] = __shfl_xor_sync(0xffffffffu, lane, 1);
    if (aligned) emulator::ldmatrix(1, false, r, row);
  }
}

TEST(Faults, AlignedInstructionReachedFromTwoSites) {
  on_device<int> out(32);
  FLASH_LAUNCH(two_sites_kernel, 1, 32, nullptr)(out.p, 0);
  ASSERT_TRUE(launch_ok()) << fault();
  const std::vector<int> r = out.get(32);
  for (int lane = 0; lane < 32; ++lane) EXPECT_EQ(r[std::size_t(lane)], lane ^ 1);
  FLASH_LAUNCH(two_sites_kernel, 1, 32, nullptr)(out.p, 1);
  EXPECT_FALSE(launch_ok());
  // Both sites named, and they differ (their line numbers are this file's).
  const std::string text = fault();
  auto line_after = [&](const std::string& marker) {
    const std::size_t at = text.find(marker);
    return at == std::string::npos ? -1 : std::atoi(text.c_str() + at + marker.size());
  };
  EXPECT_TRUE(text.starts_with("divergent warp collective: block (0,0,0) thread ")) << text;
  const int reached = line_after(" reaches ldmatrix.x1 at emulator_test.cpp:");
  const int waiting = line_after(" waits at ldmatrix.x1 at emulator_test.cpp:");
  EXPECT_GT(reached, 0) << text;
  EXPECT_GT(waiting, 0) << text;
  EXPECT_NE(reached, waiting) << text;
}

__global__ void barrier_divergence_kernel(int* out) {
  const int lane = int(threadIdx.x);
  if (lane < 16)
    __syncthreads();
  else
    out[lane] = __shfl_xor_sync(0xffffffffu, lane, 1);
}

TEST(Faults, WarpSplitBetweenABarrierAndACollective) {
  on_device<int> out(32);
  FLASH_LAUNCH(barrier_divergence_kernel, 1, 32, nullptr)(out.p);
  EXPECT_FALSE(launch_ok());
  EXPECT_EQ(fault(),
            "divergent warp collective: block (0,0,0) thread 16 (warp 0, lane 16) reaches "
            "shfl.sync while lane 0 waits at __syncthreads");
}

__global__ void barrier_sites_kernel(int* out) {
  const int t = int(threadIdx.x);
  if (t < 32)
    __syncthreads();
  else
    __syncthreads();
  out[t] = t;
}

TEST(Faults, ThreadsAtTwoDifferentBarriers) {
  on_device<int> out(64);
  FLASH_LAUNCH(barrier_sites_kernel, 1, 64, nullptr)(out.p);
  EXPECT_FALSE(launch_ok());
  EXPECT_TRUE(
      fault().starts_with("divergent barrier: block (0,0,0) thread 32 (warp 1, lane 0) "
                          "reaches __syncthreads at emulator_test.cpp:"))
      << fault();
}

TEST(Faults, EmptyGridIsAnInvalidConfiguration) {
  on_device<int> out(64);
  FLASH_LAUNCH(barrier_sites_kernel, dim3(0), 64, nullptr)(out.p);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
}

// ---- the tiled kernel under the machine's freedoms ----

struct kernel_run {
  std::vector<float> out;
  double error;
};

kernel_run run_tiled(const problem& p) {
  const testing::inputs in = testing::random_inputs(p, 5);
  const kernel_choice tiled{kernel_choice::kernel::tiled, 2, true, {}};
  const std::vector<float> out = tools::forward(p, in.q, in.k, in.v, tiled);
  return {out, testing::max_error(p, out, reference(p, in.q.data(), in.k.data(), in.v.data()))};
}

const problem kernel_case =
    testing::make_problem(element::f16, 1, 2, 2, 72, 136, 64, 100.f, true, testing::layout::bnhs_k);

// Barriers, not the order threads happen to run in, decide the result: every schedule gives the
// same bits.
TEST(Kernels, TheSameOutputUnderEverySchedule) {
  const kernel_run in_order = run_tiled(kernel_case);
  EXPECT_LE(in_order.error, testing::tolerance(element::f16));
  for (unsigned seed : {1u, 2u, 3u}) {
    configuration().schedule_seed = seed;
    EXPECT_EQ(run_tiled(kernel_case).out, in_order.out) << "schedule seed " << seed;
  }
  configuration().schedule_seed = 0;
}

// The kernel's tolerance holds when every ex2 errs by as much as the hardware's may.
TEST(Kernels, WithinToleranceWhenEx2ErrsByItsBound) {
  for (unsigned seed : {1u, 2u}) {
    configuration().approximation_seed = seed;
    EXPECT_LE(run_tiled(kernel_case).error, testing::tolerance(element::f16)) << seed;
  }
  configuration().approximation_seed = 0;
}

}  // namespace
}  // namespace flash::emulator
