// The scale of the scaled dot-product attention rules: factors on q, on kᵀ or on the scores,
// constant or folded by the facts, their product (the fused op's scale) and, for the report,
// where the block applies them.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "fusekit/graph/facts.hpp"
#include "fusekit/pattern/pattern.hpp"

namespace fusekit::rules::sdpa {

using namespace pattern;

// A scale factor the facts fold to one number: a constant, or computed from q's shape at run
// time as torch's SDPA decomposition does (Shape → Slice → Cast → Sqrt → Div → Sqrt). A tensor of
// several elements is not one; one whose value the facts do not reach is not proven one.
inline constexpr auto folded_scalar = [](const facts& f, value_id v) {
  if (f.real_scalar(v)) return truth::yes;
  const shape_fact& s = f.shape(v);
  if (!s.known) return truth::unknown;
  for (const sym& d : s.dims)
    if (const auto k = d.constant(); k && *k != 1) return truth::no;
  return truth::unknown;
};

// The scale the block applies to QKᵀ: the product of its factors on q, kᵀ and the scores.
template <class M>
double scale_of(const graph& g, const M& m) {
  const facts& f = facts_of(g);
  double scale = 1.0;
  if (has<"q_factor">(m)) scale *= *f.real_scalar(get<"q_factor">(m));
  if (has<"k_factor">(m)) scale *= *f.real_scalar(get<"k_factor">(m));
  if (has<"q_divisor">(m)) scale /= *f.real_scalar(get<"q_divisor">(m));
  if (has<"k_divisor">(m)) scale /= *f.real_scalar(get<"k_divisor">(m));
  if (has<"scale">(m)) scale *= get<"scale">(m);
  if (has<"divisor">(m)) scale /= get<"divisor">(m);
  if (has<"scale_folded">(m)) scale *= *f.real_scalar(get<"scale_folded">(m));
  if (has<"divisor_folded">(m)) scale /= *f.real_scalar(get<"divisor_folded">(m));
  return scale;
}

// Where the block applies its scale, for the report: "on q and kᵀ", "on the scores", "none".
template <class M>
std::string scale_form(const M& m) {
  std::vector<const char*> on;
  if (has<"q_factor">(m) || has<"q_divisor">(m)) on.push_back("q");
  if (has<"k_factor">(m) || has<"k_divisor">(m)) on.push_back("kᵀ");
  if (has<"scale">(m) || has<"divisor">(m) || has<"scale_folded">(m) || has<"divisor_folded">(m))
    on.push_back("the scores");
  if (on.empty()) return "none";
  std::string out = "on";
  for (std::size_t i = 0; i < on.size(); ++i)
    out += std::string(i == 0 ? " " : i + 1 == on.size() ? " and " : ", ") + on[i];
  return out;
}

}  // namespace fusekit::rules::sdpa
