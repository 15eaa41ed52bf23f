#include <cuda_fp16.h>

#include "unfused.hpp"

namespace flash::unfused {
namespace {

constexpr int block = 256;

unsigned blocks(std::size_t n) { return unsigned((n + block - 1) / block); }

__global__ void cast_to_float_kernel(const __half* in, float* out, std::size_t n) {
  const std::size_t i = blockIdx.x * std::size_t(block) + threadIdx.x;
  if (i < n) out[i] = __half2float(in[i]);
}

__global__ void multiply_kernel(float* x, float factor, std::size_t n) {
  const std::size_t i = blockIdx.x * std::size_t(block) + threadIdx.x;
  if (i < n) x[i] *= factor;
}

__global__ void cast_to_half_kernel(const float* in, __half* out, std::size_t n) {
  const std::size_t i = blockIdx.x * std::size_t(block) + threadIdx.x;
  if (i < n) out[i] = __float2half_rn(in[i]);
}

// One block per row: max, sum of exponentials, normalise.
__global__ void softmax_kernel(float* x, int cols) {
  __shared__ float partial[block];
  float* row = x + std::size_t(blockIdx.x) * cols;
  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += block) m = fmaxf(m, row[c]);
  partial[threadIdx.x] = m;
  __syncthreads();
  for (int s = block / 2; s > 0; s /= 2) {
    if (threadIdx.x < s)
      partial[threadIdx.x] = fmaxf(partial[threadIdx.x], partial[threadIdx.x + s]);
    __syncthreads();
  }
  m = partial[0];
  __syncthreads();
  float sum = 0.f;
  for (int c = threadIdx.x; c < cols; c += block) sum += row[c] = __expf(row[c] - m);
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = block / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  const float inverse = 1.f / partial[0];
  for (int c = threadIdx.x; c < cols; c += block) row[c] *= inverse;
}

}  // namespace

void cast_to_float(const void* half_in, float* out, std::size_t n, cudaStream_t stream) {
  cast_to_float_kernel<<<blocks(n), block, 0, stream>>>(static_cast<const __half*>(half_in), out,
                                                        n);
}
void multiply(float* x, float factor, std::size_t n, cudaStream_t stream) {
  multiply_kernel<<<blocks(n), block, 0, stream>>>(x, factor, n);
}
void softmax_rows(float* x, int rows, int cols, cudaStream_t stream) {
  softmax_kernel<<<unsigned(rows), block, 0, stream>>>(x, cols);
}
void cast_to_half(const float* in, void* half_out, std::size_t n, cudaStream_t stream) {
  cast_to_half_kernel<<<blocks(n), block, 0, stream>>>(in, static_cast<__half*>(half_out), n);
}

}  // namespace flash::unfused
