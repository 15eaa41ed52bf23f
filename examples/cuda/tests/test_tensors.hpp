// Random attention inputs laid out as a problem's strides say, for the CPU and GPU tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "flash/problem.hpp"
#include "flash/reference.hpp"

namespace flash::testing {

// Values of the problem's element type (stored as floats), N(0, 1); unused gaps hold NaN so a
// kernel that reads outside the view shows it.
struct inputs {
  std::vector<float> q, k, v;
};

inline std::vector<float> random_view(const problem& p, std::int64_t size, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> out(static_cast<std::size_t>(size));
  for (float& x : out) x = round_to(p.type, normal(rng));
  return out;
}

inline inputs random_inputs(const problem& p, unsigned seed) {
  std::mt19937 rng(seed);
  return {random_view(p, q_extent(p), rng), random_view(p, k_extent(p), rng),
          random_view(p, v_extent(p), rng)};
}

enum class layout { bnsh, bsnh, bnhs_k };

inline std::string layout_name(layout l) {
  return l == layout::bnsh ? "BNSH" : l == layout::bsnh ? "BSNH" : "BNSH, K as BNHS";
}

inline problem make_problem(element type, int batch, int heads, int kv_heads, int seq_q, int seq_kv,
                            int dim, float scale, bool causal, layout l) {
  const bool bs = l == layout::bsnh;
  const strides q = bs ? bsnh(heads, seq_q, dim) : bnsh(heads, seq_q, dim);
  const strides v = bs ? bsnh(kv_heads, seq_kv, dim) : bnsh(kv_heads, seq_kv, dim);
  const strides k = l == layout::bnhs_k ? bnhs(kv_heads, seq_kv, dim) : v;
  return {.type = type,
          .batch = batch,
          .heads = heads,
          .kv_heads = kv_heads,
          .seq_q = seq_q,
          .seq_kv = seq_kv,
          .head_dim = dim,
          .scale = scale,
          .causal = causal,
          .q = q,
          .k = k,
          .v = v,
          .o = q};
}

// max |a − b| over the output, a read through p.o, b packed [B, N, S, H].
inline double max_error(const problem& p, const std::vector<float>& a,
                        const std::vector<double>& b) {
  double worst = 0;
  for (int bi = 0; bi < p.batch; ++bi)
    for (int h = 0; h < p.heads; ++h)
      for (int i = 0; i < p.seq_q; ++i)
        for (int d = 0; d < p.head_dim; ++d) {
          const double x = a[std::size_t(p.o.at(bi, h, i, d))];
          const double y = b[((std::size_t(bi) * p.heads + h) * p.seq_q + i) * p.head_dim + d];
          if (std::isnan(x)) return INFINITY;
          worst = std::max(worst, std::abs(x - y));
        }
  return worst;
}

// Outputs are convex combinations of V rows (|v| ≲ 4): f16 keeps 11 significant bits, bf16 8;
// P is rounded once and O once, so a few units in the last place of the output's scale.
inline double tolerance(element type) {
  return type == element::f16 ? 6e-3 : type == element::bf16 ? 5e-2 : 1e-4;
}

}  // namespace flash::testing
