// What the kernels take from the machine they run on, in one place: under nvcc, CUDA's own
// headers and the PTX of flash/ptx.cuh; under a host compiler, the SIMT emulator's versions of the
// same names (emulator/device.hpp), so that the kernel sources compile unchanged for both.
//   FLASH_SHARED(align, type, name)           a __shared__ array
//   FLASH_LAUNCH(kernel, grid, block, stream)  kernel<<<grid, block, 0, stream>>>
#pragma once

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "flash/ptx.cuh"

#define FLASH_SHARED(align, type, name) __shared__ alignas(align) std::type_identity_t<type> name
#define FLASH_LAUNCH(kernel, grid, block, stream) kernel<<<grid, block, 0, stream>>>
#else
#include "emulator/device.hpp"
#endif
