// The simple kernel: one warp per query row, fp32 arithmetic throughout, any strides, any head
// size up to 256. It runs fp32 models, and f16/bf16 problems the tiled kernel does not take.
#pragma once

#include "flash/choice.hpp"
#include "flash/device.cuh"
#include "flash/kernel_args.hpp"
#include "flash/schedule.hpp"
#include "flash/softmax.hpp"

namespace flash::simple {

template <class T>
__device__ __forceinline__ float load(const T* p) {
  if constexpr (std::is_same_v<T, float>)
    return *p;
  else if constexpr (std::is_same_v<T, __half>)
    return __half2float(*p);
  else
    return __bfloat162float(*p);
}

template <class T>
__device__ __forceinline__ T convert(float x) {
  if constexpr (std::is_same_v<T, float>)
    return x;
  else if constexpr (std::is_same_v<T, __half>)
    return __float2half_rn(x);
  else
    return __float2bfloat16_rn(x);
}

__device__ __forceinline__ float warp_max(float x) {
  for (int lanes = 16; lanes > 0; lanes /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, lanes));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
  for (int lanes = 16; lanes > 0; lanes /= 2) x += __shfl_xor_sync(0xffffffffu, x, lanes);
  return x;
}

// Keys go 32 at a time: lane j scores key j of the group, then each lane accumulates its own
// head-dim columns (lane, lane + 32, …) over the group.
template <class T>
__global__ void __launch_bounds__(threads) forward(const kernel_args a) {
  constexpr int per_lane = simple_max_head_dim / 32;
  FLASH_SHARED(alignof(float), float[warps][simple_max_head_dim], q_rows);
  const problem& p = a.p;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int i = blockIdx.x * warps + warp, h = blockIdx.y, b = blockIdx.z;
  if (i >= p.seq_q) return;
  const int kv_head = h / p.group();
  const T* q = static_cast<const T*>(a.q);
  const T* k = static_cast<const T*>(a.k);
  const T* v = static_cast<const T*>(a.v);
  for (int d = lane; d < p.head_dim; d += 32) q_rows[warp][d] = load(q + p.q.at(b, h, i, d));
  __syncwarp();

  const float c = softmax::exp2_scale(p.scale);
  const int end = p.causal && i + 1 < p.seq_kv ? i + 1 : p.seq_kv;
  float acc[per_lane] = {};
  float row_max = -INFINITY, row_sum = 0.f;
  for (int key0 = 0; key0 < end; key0 += 32) {
    const int key = key0 + lane;
    float score = -INFINITY;
    if (key < end) {
      score = 0.f;
      for (int d = 0; d < p.head_dim; ++d)
        score += q_rows[warp][d] * load(k + p.k.at(b, kv_head, key, d));
    }
    const float new_max = fmaxf(row_max, warp_max(score));
    const float offset = softmax::max_offset(new_max, c);
    const float correction = ptx::ex2(softmax::exponent(row_max, c, offset));
    const float prob = ptx::ex2(softmax::exponent(score, c, offset));
    row_max = new_max;
    row_sum = row_sum * correction + warp_sum(prob);
#pragma unroll
    for (int e = 0; e < per_lane; ++e) acc[e] *= correction;
    const int group = end - key0 < 32 ? end - key0 : 32;
    for (int j = 0; j < group; ++j) {
      const float pj = __shfl_sync(0xffffffffu, prob, j);
#pragma unroll
      for (int e = 0; e < per_lane; ++e) {
        const int d = lane + 32 * e;
        if (d < p.head_dim) acc[e] += pj * load(v + p.v.at(b, kv_head, key0 + j, d));
      }
    }
  }
  const float inverse = softmax::inverse_or_zero(row_sum);
  T* o = static_cast<T*>(a.o);
#pragma unroll
  for (int e = 0; e < per_lane; ++e) {
    const int d = lane + 32 * e;
    if (d < p.head_dim) o[p.o.at(b, h, i, d)] = convert<T>(acc[e] * inverse);
  }
}

template <class T>
cudaError_t launch(const kernel_args& a, cudaStream_t stream) {
  const dim3 grid(unsigned((a.p.seq_q + warps - 1) / warps), unsigned(a.p.heads),
                  unsigned(a.p.batch));
  FLASH_LAUNCH(forward<T>, grid, threads, stream)(a);
  return cudaGetLastError();
}

}  // namespace flash::simple
