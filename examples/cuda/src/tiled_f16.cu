#include "flash/launch.hpp"
#include "flash/tiled_kernel.cuh"

cudaError_t flash::detail::tiled_f16(const kernel_args& a, int slices, cudaStream_t stream) {
  return tiled::dispatch<__half>(a, slices, stream);
}
