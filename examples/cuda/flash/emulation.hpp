// The tiled kernel's algorithm on the CPU, step for step: the same query and K/V tiles visited in
// the same order (last K/V tile first), the mask applied only where the kernel applies it, scores
// accumulated in fp32, the online softmax through the same exp2-domain functions, P rounded to
// the element type before P·V (the kernel keeps it in registers as f16/bf16), l summed from the
// unrounded P, and O rounded once after the 1/l of the epilogue.
//
// What it cannot copy is the order of the fp32 sums inside mma.sync; it is the model the kernel's
// numerics are argued from, and the reference checks it.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "flash/problem.hpp"
#include "flash/reference.hpp"
#include "flash/schedule.hpp"
#include "flash/softmax.hpp"

namespace flash {

// Writes O through p.o. Inputs hold values of p.type (f16 or bf16) as floats.
inline void emulate_tiled(const problem& p, int slices, const float* q, const float* k,
                          const float* v, float* o) {
  const tile_shape t{p.head_dim, slices};
  const float c = softmax::exp2_scale(p.scale);
  const int bm = t.bm(), bn = t.bn(), dim = p.head_dim;
  std::vector<float> m(bm), l(bm), acc(std::size_t(bm) * dim), s(bn);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads; ++h) {
      const int kvh = h / p.group();
      for (int row0 = 0; row0 < p.seq_q; row0 += bm) {
        const int rows = std::min(bm, p.seq_q - row0);
        std::fill(m.begin(), m.end(), -INFINITY);
        std::fill(l.begin(), l.end(), 0.f);
        std::fill(acc.begin(), acc.end(), 0.f);
        for (int tile = kv_tile_count(row0, t, p.seq_kv, p.causal) - 1; tile >= 0; --tile) {
          const bool mask = tile_needs_mask(row0, tile, t, p.seq_kv, p.causal);
          const int key0 = tile * bn;
          for (int r = 0; r < rows; ++r) {
            const int i = row0 + r;
            float tile_max = -INFINITY;
            for (int j = 0; j < bn; ++j) {
              const int key = key0 + j;
              float dot = 0;
              if (key < p.seq_kv)  // the kernel's zero-filled rows past the end score 0
                for (int d = 0; d < dim; ++d)
                  dot += q[p.q.at(b, h, i, d)] * k[p.k.at(b, kvh, key, d)];
              s[j] = mask && masked(i, key, p.seq_kv, p.causal) ? -INFINITY : dot;
              tile_max = std::max(tile_max, s[j]);
            }
            const float new_max = std::max(m[r], tile_max);
            const float offset = softmax::max_offset(new_max, c);
            const float correction = std::exp2(softmax::exponent(m[r], c, offset));
            m[r] = new_max;
            float* out = &acc[std::size_t(r) * dim];
            for (int d = 0; d < dim; ++d) out[d] *= correction;
            float sum = 0;
            for (int j = 0; j < bn; ++j) {
              const float prob = std::exp2(softmax::exponent(s[j], c, offset));
              sum += prob;
              const float rounded = round_to(p.type, prob);
              if (key0 + j < p.seq_kv)
                for (int d = 0; d < dim; ++d) out[d] += rounded * v[p.v.at(b, kvh, key0 + j, d)];
            }
            l[r] = l[r] * correction + sum;
          }
        }
        for (int r = 0; r < rows; ++r) {
          const float inverse = softmax::inverse_or_zero(l[r]);
          for (int d = 0; d < dim; ++d)
            o[p.o.at(b, h, row0 + r, d)] =
                round_to(p.type, acc[std::size_t(r) * dim + d] * inverse);
        }
      }
    }
}

}  // namespace flash
