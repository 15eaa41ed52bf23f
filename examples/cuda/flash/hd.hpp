// Index math and softmax steps are shared by the kernels and by the host-side tests and tools:
// under nvcc they are __host__ __device__, for a host compiler (the tests, the emulator) plain C++.
#pragma once

#if defined(__CUDACC__)
#define FLASH_HD __host__ __device__ __forceinline__
#else
#define FLASH_HD inline
#endif
