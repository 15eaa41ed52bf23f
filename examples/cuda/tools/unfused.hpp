// The elementwise steps of the unfused attention graph (Cast → Mul → Softmax → Cast), one launch
// each, as a runtime without the fused op executes them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace flash::unfused {

void cast_to_float(const void* half_in, float* out, std::size_t n, cudaStream_t stream);
void multiply(float* x, float factor, std::size_t n, cudaStream_t stream);
void softmax_rows(float* x, int rows, int cols, cudaStream_t stream);
void cast_to_half(const float* in, void* half_out, std::size_t n, cudaStream_t stream);

}  // namespace flash::unfused
