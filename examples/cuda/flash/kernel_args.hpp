// What a kernel launch receives: the problem and its four tensors.
#pragma once

#include "flash/problem.hpp"

namespace flash {

struct kernel_args {
  problem p;
  const void* q;
  const void* k;
  const void* v;
  void* o;
  bool k_vectorized;  // transposed K only: 16-byte copies allowed
};

}  // namespace flash
