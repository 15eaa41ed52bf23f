// The fp64 reference everything is judged against, and the host-side helpers it and the tests
// need: tensor extents under strides, and rounding to the element type.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "flash/problem.hpp"
#include "flash/schedule.hpp"
#include "fusekit/graph/dtype.hpp"

namespace flash {

// Elements a buffer needs for a [batch, heads, seq, dim] view with these strides.
inline std::int64_t extent(const strides& s, std::int64_t batch, std::int64_t heads,
                           std::int64_t seq, std::int64_t dim) {
  if (batch == 0 || heads == 0 || seq == 0 || dim == 0) return 0;
  return s.at(batch - 1, heads - 1, seq - 1, dim - 1) + 1;
}
inline std::int64_t q_extent(const problem& p) {
  return extent(p.q, p.batch, p.heads, p.seq_q, p.head_dim);
}
inline std::int64_t k_extent(const problem& p) {
  return extent(p.k, p.batch, p.kv_heads, p.seq_kv, p.head_dim);
}
inline std::int64_t v_extent(const problem& p) {
  return extent(p.v, p.batch, p.kv_heads, p.seq_kv, p.head_dim);
}
inline std::int64_t o_extent(const problem& p) {
  return extent(p.o, p.batch, p.heads, p.seq_q, p.head_dim);
}

// x rounded to the nearest value of type `e` (ties to even), as the GPU converts.
inline float round_to(element e, float x) {
  switch (e) {
    case element::f16:
      return fusekit::half_to_float(fusekit::float_to_half(x));
    case element::bf16:
      return fusekit::bfloat16_to_float(fusekit::float_to_bfloat16(x));
    case element::f32:
      return x;
  }
  return x;
}

// softmax(scale·QKᵀ, masked) V in fp64, packed as [batch, heads, seq_q, head_dim]. Inputs hold
// values of p.type already (the caller rounded them). Rows with every key masked are 0.
inline std::vector<double> reference(const problem& p, const float* q, const float* k,
                                     const float* v) {
  std::vector<double> out(std::size_t(p.batch) * p.heads * p.seq_q * p.head_dim, 0.0);
  std::vector<double> scores(std::size_t(p.seq_kv));
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads; ++h) {
      const int kvh = h / p.group();
      for (int i = 0; i < p.seq_q; ++i) {
        double max = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < p.seq_kv; ++j) {
          if (masked(i, j, p.seq_kv, p.causal)) {
            scores[j] = -std::numeric_limits<double>::infinity();
            continue;
          }
          double dot = 0;
          for (int d = 0; d < p.head_dim; ++d)
            dot += double(q[p.q.at(b, h, i, d)]) * double(k[p.k.at(b, kvh, j, d)]);
          scores[j] = dot * double(p.scale);
          max = std::max(max, scores[j]);
        }
        if (max == -std::numeric_limits<double>::infinity()) continue;
        double sum = 0;
        for (int j = 0; j < p.seq_kv; ++j) sum += scores[j] = std::exp(scores[j] - max);
        double* row = &out[((std::size_t(b) * p.heads + h) * p.seq_q + i) * p.head_dim];
        for (int j = 0; j < p.seq_kv; ++j)
          for (int d = 0; d < p.head_dim; ++d)
            row[d] += scores[j] / sum * double(v[p.v.at(b, kvh, j, d)]);
      }
    }
  return out;
}

}  // namespace flash
