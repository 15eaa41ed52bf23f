// The backend's entry point: run one attention problem on the GPU.
#pragma once

#include <cuda_runtime_api.h>

#include "flash/choice.hpp"
#include "flash/kernel_args.hpp"
#include "flash/problem.hpp"

namespace flash {

struct buffers {
  const void* q;
  const void* k;
  const void* v;
  void* o;
};

inline addresses addresses_of(const buffers& t) {
  return {reinterpret_cast<std::uintptr_t>(t.q), reinterpret_cast<std::uintptr_t>(t.k),
          reinterpret_cast<std::uintptr_t>(t.v), reinterpret_cast<std::uintptr_t>(t.o)};
}

// Runs the kernel `choice` names; tests use it to force one.
cudaError_t attention_forward(const problem& p, const buffers& t, const kernel_choice& choice,
                              cudaStream_t stream);

// Chooses the kernel for the current device (choose_kernel) and runs it.
cudaError_t attention_forward(const problem& p, const buffers& t, cudaStream_t stream);

namespace detail {
// One translation unit each (src/), so the instantiations compile in parallel.
cudaError_t tiled_f16(const kernel_args& a, int slices, cudaStream_t stream);
cudaError_t tiled_bf16(const kernel_args& a, int slices, cudaStream_t stream);
cudaError_t simple(const kernel_args& a, cudaStream_t stream);
}  // namespace detail

}  // namespace flash
