// The steps of the online softmax, in the exp2 domain: exp(scale·(s − m)) = exp2(s·c − m·c) with
// c = scale·log2(e), so each probability costs one FMA and one ex2. Both kernels call these
// same functions, so both round at the same points.
#pragma once

#include <math.h>

#include "flash/hd.hpp"

namespace flash::softmax {

inline constexpr float log2e = 1.4426950408889634f;

FLASH_HD constexpr float exp2_scale(float scale) { return scale * log2e; }

// The row max in the exp2 domain. A row that has so far seen only masked scores (max −inf) uses
// 0, so that its probabilities are exp2(−inf) = 0 and never exp2(−inf + inf) = NaN.
FLASH_HD float max_offset(float row_max, float c) {
  return row_max == -INFINITY ? 0.f : row_max * c;
}

// exp2's argument for score s: one FMA.
FLASH_HD float exponent(float s, float c, float offset) { return fmaf(s, c, -offset); }

// 1/l, and 0 for a row whose every key was masked (l = 0): such rows output 0.
FLASH_HD float inverse_or_zero(float l) { return l > 0.f ? 1.f / l : 0.f; }

}  // namespace flash::softmax
