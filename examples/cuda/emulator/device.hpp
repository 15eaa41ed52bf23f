// CUDA as the emulator provides it to a host compiler: what the kernels and their host programs
// take from CUDA's headers (qualifiers, built-in indices, intrinsics, vector and half types, the
// runtime calls they make) and from flash/ptx.cuh, each mapped onto the machine (machine.hpp).
// flash/device.cuh includes this where nvcc is not compiling; the shims in emulator/include let
// host programs that include <cuda_runtime_api.h> build against it unchanged.
#pragma once

#include <math.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <source_location>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "emulator/machine.hpp"
#include "fusekit/graph/dtype.hpp"

// Code the emulator runs for the kernel, which the access checks must not see as the kernel's.
#define FLASH_EMULATOR_UNCHECKED __attribute__((no_sanitize("thread"), noinline))

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
  constexpr dim3(flash::emulator::extent e) : x(e.x), y(e.y), z(e.z) {}
};
#define threadIdx (dim3(::flash::emulator::thread_index()))
#define blockIdx (dim3(::flash::emulator::block_index()))
#define blockDim (dim3(::flash::emulator::block_dim()))
#define gridDim (dim3(::flash::emulator::grid_dim()))

inline void __syncthreads(std::source_location site = std::source_location::current()) {
  flash::emulator::sync_threads(site);
}
// The warp collectives pass on their caller's source location: lanes at different ones diverged.
inline void __syncwarp(unsigned mask = 0xffffffffu,
                       std::source_location site = std::source_location::current()) {
  flash::emulator::sync_warp(mask, site);
}

namespace flash::emulator {
template <class T>
T shuffle_as(shuffle_mode mode, unsigned mask, T value, int lane_or_mask,
             const std::source_location& site) {
  static_assert(sizeof(T) == 4, "32-bit shuffles only");
  return std::bit_cast<T>(
      shuffle(mode, mask, std::bit_cast<std::uint32_t>(value), lane_or_mask, site));
}
}  // namespace flash::emulator

template <class T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask,
                  std::source_location site = std::source_location::current()) {
  return flash::emulator::shuffle_as(flash::emulator::shuffle_mode::bfly, mask, value, lane_mask,
                                     site);
}
template <class T>
T __shfl_sync(unsigned mask, T value, int source_lane,
              std::source_location site = std::source_location::current()) {
  return flash::emulator::shuffle_as(flash::emulator::shuffle_mode::index, mask, value, source_lane,
                                     site);
}

struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

// The 16-bit float types: their bits, converted with round-to-nearest-even.
struct __half {
  std::uint16_t bits;
};
struct __nv_bfloat16 {
  std::uint16_t bits;
};
struct alignas(4) __half2 {
  __half x, y;
};
struct alignas(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
inline __half __float2half_rn(float x) { return {fusekit::float_to_half(x)}; }
inline float __half2float(__half h) { return fusekit::half_to_float(h.bits); }
inline __nv_bfloat16 __float2bfloat16_rn(float x) { return {fusekit::float_to_bfloat16(x)}; }
inline float __bfloat162float(__nv_bfloat16 h) { return fusekit::bfloat16_to_float(h.bits); }
inline __half2 __floats2half2_rn(float lo, float hi) {
  return {__float2half_rn(lo), __float2half_rn(hi)};
}
inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) {
  return {__float2bfloat16_rn(lo), __float2bfloat16_rn(hi)};
}

// ---- the runtime ----
enum cudaError_t : int {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorLaunchFailure = 719,
};
enum cudaMemcpyKind : int {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
};
enum cudaDeviceAttr : int { cudaDevAttrMultiProcessorCount = 16 };
using cudaStream_t = struct emulated_stream*;

namespace flash::emulator::runtime {
// The error of the last launch. A launch runs to completion inside the call, so its outcome is
// both what cudaGetLastError reports (once) and what cudaDeviceSynchronize returns. Unlike a GPU
// context, a fault does not poison later launches: each test starts clean.
inline cudaError_t& last_launch() {
  static cudaError_t e = cudaSuccess;
  return e;
}
inline cudaError_t& unreported() {
  static cudaError_t e = cudaSuccess;
  return e;
}
}  // namespace flash::emulator::runtime

inline cudaError_t cudaGetLastError() {
  return std::exchange(flash::emulator::runtime::unreported(), cudaSuccess);
}
inline cudaError_t cudaDeviceSynchronize() { return flash::emulator::runtime::last_launch(); }
// The emulator's fault, where there is one, is the message of a launch failure.
inline const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorLaunchFailure:
      return flash::emulator::fault().c_str();
  }
  return "unknown error";
}
inline cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int) {
  if (attribute != cudaDevAttrMultiProcessorCount) return cudaErrorInvalidValue;
  *value = flash::emulator::configuration().multiprocessors;
  return cudaSuccess;
}
inline cudaError_t cudaMalloc(void** p, std::size_t bytes) {
  *p = flash::emulator::allocate(bytes);
  return cudaSuccess;
}
inline cudaError_t cudaFree(void* p) {
  return p == nullptr || flash::emulator::release(p) ? cudaSuccess : cudaErrorInvalidValue;
}
inline cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  const bool to_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool from_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if ((to_device && !flash::emulator::in_allocation(dst, bytes)) ||
      (from_device && !flash::emulator::in_allocation(src, bytes)))
    return cudaErrorInvalidValue;
  std::memcpy(dst, src, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaMemset(void* p, int value, std::size_t bytes) {
  if (!flash::emulator::in_allocation(p, bytes)) return cudaErrorInvalidValue;
  std::memset(p, value, bytes);
  return cudaSuccess;
}

namespace flash::emulator {

// kernel<<<grid, block, 0, stream>>>(arguments...): the arguments become the kernel's parameters
// (converted as a launch converts them), which every thread of the grid then reads.
template <class... Parameters>
struct launcher {
  void (*kernel)(Parameters...);
  dim3 grid, block;

  struct bank {
    void (*kernel)(Parameters...);
    std::tuple<std::remove_cvref_t<Parameters>...> values;
  };

  template <class... Arguments>
  FLASH_EMULATOR_UNCHECKED void operator()(Arguments&&... arguments) const {
    cudaError_t outcome = cudaErrorInvalidConfiguration;
    if (grid.x != 0 && grid.y != 0 && grid.z != 0 && block.x != 0 && block.y != 0 && block.z != 0) {
      const bank parameters{kernel, {std::forward<Arguments>(arguments)...}};
      outcome = run({grid.x, grid.y, grid.z}, {block.x, block.y, block.z}, &invoke, &parameters,
                    sizeof parameters)
                    ? cudaSuccess
                    : cudaErrorLaunchFailure;
    }
    runtime::last_launch() = runtime::unreported() = outcome;
  }

  FLASH_EMULATOR_UNCHECKED static void invoke(const void* parameters) {
    const bank& b = *static_cast<const bank*>(parameters);
    call(b.kernel, b.values, std::index_sequence_for<Parameters...>{});
  }

  template <std::size_t... I>
  FLASH_EMULATOR_UNCHECKED static void call(void (*kernel)(Parameters...),
                                            const decltype(bank::values)& v,
                                            std::index_sequence<I...>) {
    kernel(std::get<I>(v)...);
  }
};

// Launches run to completion before the call returns, which every stream order allows.
template <class... Parameters>
launcher<Parameters...> launch(void (*kernel)(Parameters...), dim3 grid, dim3 block, cudaStream_t) {
  return {kernel, grid, block};
}

// A __shared__ declaration: the calling thread's next array in the block's shared memory.
template <class T, std::size_t Align>
T& shared_array() {
  return *std::launder(static_cast<T*>(shared_declaration(sizeof(T), Align)));
}

}  // namespace flash::emulator

#define FLASH_SHARED(align, type, name) \
  std::type_identity_t<type>& name = ::flash::emulator::shared_array<type, align>()
#define FLASH_LAUNCH(kernel, grid, block, stream) \
  ::flash::emulator::launch(kernel, grid, block, stream)

// ---- flash/ptx.cuh's instructions ----
namespace flash::ptx {

inline std::uint32_t smem_address(const void* p) { return emulator::shared_address(p); }

inline void cp_async_16(std::uint32_t dst, const void* src, bool valid) {
  emulator::cp_async(dst, src, valid ? 16 : 0);
}
inline void cp_async_commit() { emulator::cp_async_commit(); }
inline void cp_async_wait_all() { emulator::cp_async_wait(0); }

inline void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t address,
                        std::source_location site = std::source_location::current()) {
  emulator::ldmatrix(4, false, r, address, site);
}
inline void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t address,
                              std::source_location site = std::source_location::current()) {
  emulator::ldmatrix(4, true, r, address, site);
}

template <class T>
void mma(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1,
         std::source_location site = std::source_location::current()) {
  const float c[4] = {d[0], d[1], d[2], d[3]};
  emulator::mma_m16n8k16(
      std::is_same_v<T, __half> ? emulator::isa::input::f16 : emulator::isa::input::bf16, d, a, b0,
      b1, c, site);
}

inline float ex2(float x) { return emulator::ex2_approx_ftz(x); }

template <class T>
std::uint32_t pack(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>)
    return std::bit_cast<std::uint32_t>(__floats2half2_rn(lo, hi));
  else
    return std::bit_cast<std::uint32_t>(__floats2bfloat162_rn(lo, hi));
}

}  // namespace flash::ptx
