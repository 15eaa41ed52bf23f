// The FlashAttention-2 forward kernel: one block of 4 warps per (query tile, head, batch); each
// warp owns `Slices` 16-row slices of the query tile and keeps their O accumulators, row maxima
// and row sums in registers for the whole K/V sweep.
//
// Per K/V tile (visited last to first, so the masked tiles come first):
//   wait for K(j); start V(j)   S = Q·K(j)ᵀ   [mask]   wait for V(j); start K(j−1)
//   online softmax of S → P (registers)   O += P·V(j)
// so each copy overlaps a matrix product. Q, K and V live in XOR-swizzled shared memory and
// reach the tensor cores through ldmatrix (.trans for V, and for K stored transposed).
#pragma once

#include <cstdint>

#include "flash/device.cuh"
#include "flash/fragments.hpp"
#include "flash/kernel_args.hpp"
#include "flash/schedule.hpp"
#include "flash/softmax.hpp"

namespace flash::tiled {

// Copies rows [row0, row0 + Rows) of a [seq, Cols] matrix (row stride `stride`, elements
// contiguous) into a swizzled tile; rows at or past `limit` become zeros. Each pass moves every
// thread down by a multiple of 8 rows, which the swizzle maps to the same chunk column: one source
// pointer and one shared address per thread serve all passes.
template <int Rows, int Cols, class T>
__device__ __forceinline__ void copy_rows(std::uint32_t smem, const T* base, std::int64_t stride,
                                          int row0, int limit) {
  constexpr frag::smem_tile tile{Rows, Cols};
  constexpr int step = threads / tile.chunks_per_row(), passes = Rows / step;
  static_assert(passes * step == Rows && step % 8 == 0);
  const frag::coord c = frag::copy_chunk(threadIdx.x, 0, tile.chunks_per_row(), threads);
  const T* src = base + (row0 + c.row) * stride + c.col * 8;
  const std::uint32_t dst = smem + tile.offset(c.row, c.col * 8);
#pragma unroll
  for (int i = 0; i < passes; ++i) {
    const bool valid = row0 + c.row + i * step < limit;
    ptx::cp_async_16(dst + i * step * Cols * 2, valid ? src + i * step * stride : base, valid);
  }
}

// Keys [key0, key0 + Keys) of K stored transposed ([Dim, seq], keys contiguous) into a swizzled
// [Dim, Keys] tile. Vectorized: 16-byte copies (keys a multiple of 8, rows aligned). Otherwise
// element loads, for any length and alignment; they do not overlap, but they are correct.
template <int Dim, int Keys, class T>
__device__ __forceinline__ void copy_keys_transposed(std::uint32_t smem, unsigned char* smem_ptr,
                                                     const T* base, std::int64_t dim_stride,
                                                     int key0, int seq_kv, bool vectorized) {
  constexpr frag::smem_tile tile{Dim, Keys};
  constexpr int passes = Dim * tile.chunks_per_row() / threads;
  static_assert(passes * threads == Dim * tile.chunks_per_row());
  if (vectorized) {
    constexpr int step = threads / tile.chunks_per_row();
    static_assert(step % 8 == 0);
    const frag::coord c = frag::copy_chunk(threadIdx.x, 0, tile.chunks_per_row(), threads);
    const int key = key0 + c.col * 8;
    const bool valid = key < seq_kv;
    const T* src = base + c.row * dim_stride + key;
    const std::uint32_t dst = smem + tile.offset(c.row, c.col * 8);
#pragma unroll
    for (int i = 0; i < passes; ++i)
      ptx::cp_async_16(dst + i * step * Keys * 2, valid ? src + i * step * dim_stride : base,
                       valid);
    return;
  }
  // Not unrolled: the fallback must not take the registers the fast path needs.
#pragma unroll 1
  for (int i = 0; i < passes; ++i) {
    const frag::coord c = frag::copy_chunk(threadIdx.x, i, tile.chunks_per_row(), threads);
    const int key = key0 + c.col * 8;
    const auto* row = reinterpret_cast<const std::uint16_t*>(base + c.row * dim_stride);
    std::uint32_t e[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) e[j] = key + j < seq_kv ? row[key + j] : 0u;
    *reinterpret_cast<uint4*>(smem_ptr + tile.offset(c.row, c.col * 8)) =
        make_uint4(e[0] | e[1] << 16, e[2] | e[3] << 16, e[4] | e[5] << 16, e[6] | e[7] << 16);
  }
}

template <class T, int Dim, bool Causal, k_layout KLayout, int Slices>
__global__ void __launch_bounds__(threads, 2) forward(const kernel_args a) {
  constexpr tile_shape shape{Dim, Slices};
  constexpr int bm = shape.bm(), bn = shape.bn();
  constexpr bool k_rows = KLayout == k_layout::rows;
  constexpr frag::smem_tile q_tile{bm, Dim}, v_tile{bn, Dim};
  constexpr frag::smem_tile k_tile = k_rows ? frag::smem_tile{bn, Dim} : frag::smem_tile{Dim, bn};
  static_assert(shape.smem_bytes() <= smem_budget, "tiles exceed the shared-memory budget");
  FLASH_SHARED(128, unsigned char[shape.smem_bytes()], smem);
  const std::uint32_t sq = ptx::smem_address(smem);
  const std::uint32_t sk = sq + q_tile.bytes(), sv = sk + k_tile.bytes();

  const problem& p = a.p;
  // Causal tiles further down see more keys: start those first.
  const int q_block = Causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int h = blockIdx.y, b = blockIdx.z, kv_head = h / p.group();
  const int row0 = q_block * bm;
  const T* q = static_cast<const T*>(a.q) + p.q.at(b, h, 0, 0);
  const T* k = static_cast<const T*>(a.k) + p.k.at(b, kv_head, 0, 0);
  const T* v = static_cast<const T*>(a.v) + p.v.at(b, kv_head, 0, 0);
  T* o = static_cast<T*>(a.o) + p.o.at(b, h, 0, 0);

  auto load_k = [&](int tile) {
    if constexpr (k_rows)
      copy_rows<bn, Dim>(sk, k, p.k.seq, tile * bn, p.seq_kv);
    else
      copy_keys_transposed<Dim, bn>(sk, smem + q_tile.bytes(), k, p.k.dim, tile * bn, p.seq_kv,
                                    a.k_vectorized);
  };

  const int tiles = kv_tile_count(row0, shape, p.seq_kv, Causal);
  copy_rows<bm, Dim>(sq, q, p.q.seq, row0, p.seq_q);
  if (tiles > 0) load_k(tiles - 1);
  ptx::cp_async_commit();

  const int warp = threadIdx.x / frag::warp_size, lane = threadIdx.x % frag::warp_size;
  const frag::coord src = frag::ldmatrix_x4_source(lane);
  const float c = softmax::exp2_scale(p.scale);
  auto slice_row = [&](int s) { return s * warps * warp_rows + warp * warp_rows; };

  float acc[Slices][Dim / 8][4] = {};
  float row_max[Slices][2], row_sum[Slices][2];
#pragma unroll
  for (int s = 0; s < Slices; ++s)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_max[s][r] = -INFINITY;
      row_sum[s][r] = 0.f;
    }

  for (int tile = tiles - 1; tile >= 0; --tile) {
    ptx::cp_async_wait_all();
    __syncthreads();  // K(tile) has landed, and every warp is done with V(tile + 1)
    copy_rows<bn, Dim>(sv, v, p.v.seq, tile * bn, p.seq_kv);
    ptx::cp_async_commit();

    // S = Q·Kᵀ
    float scores[Slices][bn / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < Dim / 16; ++kk) {
      std::uint32_t qa[Slices][4];
#pragma unroll
      for (int s = 0; s < Slices; ++s)
        ptx::ldmatrix_x4(qa[s], sq + q_tile.offset(slice_row(s) + src.row, kk * 16 + src.col));
#pragma unroll
      for (int np = 0; np < bn / 16; ++np) {
        std::uint32_t kb[4];
        if constexpr (k_rows)
          ptx::ldmatrix_x4(kb, sk + k_tile.offset(np * 16 + src.row, kk * 16 + src.col));
        else
          ptx::ldmatrix_x4_trans(kb, sk + k_tile.offset(kk * 16 + src.row, np * 16 + src.col));
#pragma unroll
        for (int t = 0; t < 2; ++t)
#pragma unroll
          for (int s = 0; s < Slices; ++s)
            ptx::mma<T>(scores[s][2 * np + t], qa[s], kb[frag::b_register(!k_rows, t, 0)],
                        kb[frag::b_register(!k_rows, t, 1)]);
      }
    }

    if (tile_needs_mask(row0, tile, shape, p.seq_kv, Causal)) {
#pragma unroll
      for (int s = 0; s < Slices; ++s)
#pragma unroll
        for (int nt = 0; nt < bn / 8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const frag::coord at = frag::c_element(lane, e);
            if (masked(row0 + slice_row(s) + at.row, tile * bn + nt * 8 + at.col, p.seq_kv, Causal))
              scores[s][nt][e] = -INFINITY;
          }
    }

    ptx::cp_async_wait_all();
    __syncthreads();  // V(tile) has landed, and every warp is done with K(tile)
    if (tile > 0) {
      load_k(tile - 1);
      ptx::cp_async_commit();
    }

    // Online softmax; a row's 8·bn/8 scores sit in the four lanes of a quad.
#pragma unroll
    for (int s = 0; s < Slices; ++s)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float tile_max = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < bn / 8; ++nt)
          tile_max = fmaxf(tile_max, fmaxf(scores[s][nt][2 * r], scores[s][nt][2 * r + 1]));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
        const float new_max = fmaxf(row_max[s][r], tile_max);
        const float offset = softmax::max_offset(new_max, c);
        const float correction = ptx::ex2(softmax::exponent(row_max[s][r], c, offset));
        row_max[s][r] = new_max;
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < bn / 8; ++nt)
#pragma unroll
          for (int e = 2 * r; e < 2 * r + 2; ++e) {
            scores[s][nt][e] = ptx::ex2(softmax::exponent(scores[s][nt][e], c, offset));
            sum += scores[s][nt][e];
          }
        row_sum[s][r] = row_sum[s][r] * correction + sum;
#pragma unroll
        for (int dt = 0; dt < Dim / 8; ++dt) {
          acc[s][dt][2 * r] *= correction;
          acc[s][dt][2 * r + 1] *= correction;
        }
      }

      // O += P·V, P taken from the score registers.
#pragma unroll
    for (int kk = 0; kk < bn / 16; ++kk) {
      std::uint32_t pa[Slices][4];
#pragma unroll
      for (int s = 0; s < Slices; ++s)
#pragma unroll
        for (int pp = 0; pp < 4; ++pp) {
          const float* from = scores[s][2 * kk + frag::a_pair_source_tile(pp)];
          const int e = frag::a_pair_source_element(pp);
          pa[s][pp] = ptx::pack<T>(from[e], from[e + 1]);
        }
#pragma unroll
      for (int np = 0; np < Dim / 16; ++np) {
        std::uint32_t vb[4];
        ptx::ldmatrix_x4_trans(vb, sv + v_tile.offset(kk * 16 + src.row, np * 16 + src.col));
#pragma unroll
        for (int t = 0; t < 2; ++t)
#pragma unroll
          for (int s = 0; s < Slices; ++s)
            ptx::mma<T>(acc[s][2 * np + t], pa[s], vb[frag::b_register(true, t, 0)],
                        vb[frag::b_register(true, t, 1)]);
      }
    }
  }

  // Epilogue: O / l, rounded once, staged through the Q tile (each warp writes only its own rows)
  // so that the global stores are 16-byte and coalesced.
  ptx::cp_async_wait_all();
  __syncthreads();
#pragma unroll
  for (int s = 0; s < Slices; ++s)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float sum = row_sum[s][r];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inverse = softmax::inverse_or_zero(sum);
      const frag::coord at = frag::c_element(lane, 2 * r);
#pragma unroll
      for (int dt = 0; dt < Dim / 8; ++dt)
        *reinterpret_cast<std::uint32_t*>(smem +
                                          q_tile.offset(slice_row(s) + at.row, dt * 8 + at.col)) =
            ptx::pack<T>(acc[s][dt][2 * r] * inverse, acc[s][dt][2 * r + 1] * inverse);
    }
  __syncthreads();
  constexpr int passes = bm * q_tile.chunks_per_row() / threads;
#pragma unroll
  for (int i = 0; i < passes; ++i) {
    const frag::coord at = frag::copy_chunk(threadIdx.x, i, q_tile.chunks_per_row(), threads);
    if (row0 + at.row < p.seq_q)
      *reinterpret_cast<uint4*>(o + (row0 + at.row) * p.o.seq + at.col * 8) =
          *reinterpret_cast<const uint4*>(smem + q_tile.offset(at.row, at.col * 8));
  }
}

template <class T, int Dim, bool Causal, k_layout KLayout, int Slices>
cudaError_t launch(const kernel_args& a, cudaStream_t stream) {
  constexpr int bm = tile_shape{Dim, Slices}.bm();
  const dim3 grid(unsigned((a.p.seq_q + bm - 1) / bm), unsigned(a.p.heads), unsigned(a.p.batch));
  FLASH_LAUNCH((forward<T, Dim, Causal, KLayout, Slices>), grid, threads, stream)(a);
  return cudaGetLastError();
}

// Every instantiation for one element type: head size × causal × K layout × query tile.
template <class T>
cudaError_t dispatch(const kernel_args& a, int slices, cudaStream_t stream) {
  auto with_layout = [&]<int Dim, bool Causal>() {
    auto with_slices = [&]<k_layout L>() {
      return slices == 2 ? launch<T, Dim, Causal, L, 2>(a, stream)
                         : launch<T, Dim, Causal, L, 1>(a, stream);
    };
    return a.p.k_order() == k_layout::rows
               ? with_slices.template operator()<k_layout::rows>()
               : with_slices.template operator()<k_layout::transposed>();
  };
  auto with_causal = [&]<int Dim>() {
    return a.p.causal ? with_layout.template operator()<Dim, true>()
                      : with_layout.template operator()<Dim, false>();
  };
  switch (a.p.head_dim) {
    case 64:
      return with_causal.template operator()<64>();
    case 128:
      return with_causal.template operator()<128>();
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace flash::tiled
