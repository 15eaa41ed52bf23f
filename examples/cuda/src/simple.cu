#include "flash/launch.hpp"
#include "flash/simple_kernel.cuh"

cudaError_t flash::detail::simple(const kernel_args& a, cudaStream_t stream) {
  switch (a.p.type) {
    case element::f32:
      return simple::launch<float>(a, stream);
    case element::f16:
      return simple::launch<__half>(a, stream);
    case element::bf16:
      return simple::launch<__nv_bfloat16>(a, stream);
  }
  return cudaErrorInvalidValue;
}
