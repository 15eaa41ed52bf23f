#include "flash/launch.hpp"

namespace flash {

cudaError_t attention_forward(const problem& p, const buffers& t, const kernel_choice& choice,
                              cudaStream_t stream) {
  if (unsupported(p)) return cudaErrorInvalidValue;
  if (p.batch == 0 || p.heads == 0 || p.seq_q == 0) return cudaSuccess;
  const kernel_args a{p, t.q, t.k, t.v, t.o, choice.k_vectorized};
  if (choice.which == kernel_choice::kernel::simple) return detail::simple(a, stream);
  switch (p.type) {
    case element::f16:
      return detail::tiled_f16(a, choice.slices, stream);
    case element::bf16:
      return detail::tiled_bf16(a, choice.slices, stream);
    case element::f32:
      break;
  }
  return cudaErrorInvalidValue;
}

cudaError_t attention_forward(const problem& p, const buffers& t, cudaStream_t stream) {
  int device = 0, sm_count = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (const cudaError_t e =
          cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device);
      e != cudaSuccess)
    return e;
  return attention_forward(p, t, choose_kernel(p, addresses_of(t), sm_count), stream);
}

}  // namespace flash
