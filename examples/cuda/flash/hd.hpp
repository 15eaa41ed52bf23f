// Index math and softmax steps are shared by the kernels (nvcc) and by their CPU emulation and
// unit tests (any C++20 compiler): under nvcc they are __host__ __device__, elsewhere plain C++.
#pragma once

#if defined(__CUDACC__)
#define FLASH_HD __host__ __device__ __forceinline__
#else
#define FLASH_HD inline
#endif
