// The SIMT machine the emulated kernels run on: a grid run block by block; in a block, every
// thread a cooperatively scheduled context with its own stack and registers, sharing the block's
// shared memory. Threads run until they block (a barrier, a warp-collective instruction) or exit;
// the order in which runnable threads go is the thread index, or a permutation drawn from a seed.
//
// What it checks as the kernel runs, stopping the launch at the first fault with one line saying
// what, where and who (emulator::fault()):
// - shared memory: a byte written by one thread and read or written by another with no barrier
//   between them (__syncthreads, or __syncwarp within a warp); a read of a byte no thread of the
//   block wrote; a read or write of a byte a cp.async still in flight will write; an access
//   outside the block's shared memory;
// - global memory: an access outside every allocation (allocations are fenced by red zones);
// - warp collectives: all 32 lanes must reach the same instruction; a lane that has exited, or
//   one waiting elsewhere (at a barrier or another collective), is divergence.
#pragma once

#include <cstddef>
#include <cstdint>
#include <source_location>
#include <string>

#include "emulator/instructions.hpp"

namespace flash::emulator {

struct extent {
  unsigned x = 1, y = 1, z = 1;
};

struct settings {
  // 0: runnable threads go in index order; otherwise in an order shuffled by this seed, at every
  // scheduling round.
  unsigned schedule_seed = 0;
  // ex2.approx results moved by up to the documented error (2 units in the last place), by a
  // pseudo-random draw from this seed; 0 keeps them correctly rounded.
  unsigned approximation_seed = 0;
  int multiprocessors = 132;  // what cudaDeviceGetAttribute reports
};
settings& configuration();

// ---- the host side ----
// Runs `body(parameters)` as every thread of every block of the grid; the kernel may read the
// `parameter_bytes` at `parameters` (its constant bank) but not write them. False when the launch
// faulted (fault() says why); the grid's remaining blocks are not run.
bool run(extent grid, extent block, void (*body)(const void*), const void* parameters,
         std::size_t parameter_bytes);
// The first fault of the last failed launch; empty after a launch that ran clean.
const std::string& fault();
// Device memory: host memory between red zones, known to the access checks.
void* allocate(std::size_t bytes);
bool release(void* p);
// True when [p, p + bytes) lies inside one allocation.
bool in_allocation(const void* p, std::size_t bytes);

// ---- what kernel code calls ----
extent thread_index();
extent block_index();
extent block_dim();
extent grid_dim();
// The barrier and the warp collectives take their call site: threads that reach a barrier, or
// lanes that reach an .aligned instruction (ldmatrix, mma), at different sites have diverged.
void sync_threads(std::source_location site);
void sync_warp(unsigned mask, std::source_location site);

enum class shuffle_mode : std::uint8_t { index, bfly };
std::uint32_t shuffle(shuffle_mode mode, unsigned mask, std::uint32_t value, int lane_or_mask,
                      std::source_location site);

// The calling thread's next shared-memory declaration (every thread declares the same arrays
// in the same order, and all receive the same memory), `bytes` long, aligned to `align`.
void* shared_declaration(std::size_t bytes, std::size_t align);
// The shared-window address of p (cvta.to.shared); a fault when p is not shared memory.
std::uint32_t shared_address(const void* p);

// cp.async.cg.shared.global [dst], [src], 16, src_size: 16 bytes land at dst when the thread
// waits for their group; the bytes past src_size (0 or 16 here) are zeros and never read.
void cp_async(std::uint32_t dst, const void* src, unsigned src_size);
void cp_async_commit();
void cp_async_wait(int newest_groups_left_pending);

// ldmatrix.sync.aligned.m8n8.{x1,x2,x4}[.trans].shared.b16: `count` matrices, row addresses from
// lanes 8i..8i+7 for matrix i; registers[i] of every lane receives its pair of matrix i.
void ldmatrix(int count, bool trans, std::uint32_t* registers, std::uint32_t address,
              std::source_location site = std::source_location::current());

// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32: d = a·b + c per lane fragment.
void mma_m16n8k16(isa::input type, float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                  std::uint32_t b1, const float (&c)[4], std::source_location site);

// ex2.approx.ftz.f32.
float ex2_approx_ftz(float x);

// The access checks' entry: every load and store the emulated kernel code makes (`code`: the
// instruction's address, named in a fault).
void access(const void* p, std::size_t bytes, bool write, const void* code);

}  // namespace flash::emulator
