// Which kernel runs a problem: the tiled mma.sync kernel where its shapes and alignment allow,
// else the simple kernel, which takes any strides, any head size up to 256, and fp32.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "flash/problem.hpp"
#include "flash/schedule.hpp"

namespace flash {

inline constexpr int simple_max_head_dim = 256;

struct addresses {
  std::uintptr_t q = 0, k = 0, v = 0, o = 0;
};

struct kernel_choice {
  enum class kernel : std::uint8_t { tiled, simple };
  kernel which = kernel::simple;
  int slices = 1;              // tiled: 16-row query slices per warp
  bool k_vectorized = true;    // tiled with transposed K: 16-byte cp.async, else element loads
  std::string why_not_faster;  // why the simple kernel, or why K is loaded element by element
};

// Why no kernel here computes `p`; nothing when one does.
inline std::optional<std::string> unsupported(const problem& p) {
  if (p.head_dim <= 0 || p.head_dim > simple_max_head_dim)
    return "head size " + std::to_string(p.head_dim) + " (the kernels take 1 to " +
           std::to_string(simple_max_head_dim) + ")";
  if (!(p.scale > 0)) return "scale " + std::to_string(p.scale) + " is not positive";
  if (p.kv_heads <= 0 || p.heads % p.kv_heads != 0)
    return std::to_string(p.heads) + " query heads do not share " + std::to_string(p.kv_heads) +
           " K/V heads evenly";
  if (p.batch < 0 || p.seq_q < 0 || p.seq_kv < 0) return "negative dimension";
  return std::nullopt;
}

namespace detail {
constexpr bool aligned16(std::int64_t element_stride) { return element_stride % 8 == 0; }
constexpr bool aligned16(std::uintptr_t address) { return address % 16 == 0; }
// Head-dim-contiguous rows that 16-byte copies can read.
constexpr bool vector_rows(const strides& s, std::uintptr_t address) {
  return s.dim == 1 && aligned16(s.seq) && aligned16(s.head) && aligned16(s.batch) &&
         aligned16(address);
}
}  // namespace detail

inline kernel_choice choose_kernel(const problem& p, const addresses& at, int sm_count) {
  kernel_choice c;
  auto simple = [&](std::string why) {
    c.why_not_faster = std::move(why);
    return c;
  };
  if (p.type == element::f32) return simple("fp32 inputs");
  if (p.head_dim != 64 && p.head_dim != 128)
    return simple("head size " + std::to_string(p.head_dim) + " (tiled: 64 or 128)");
  if (!detail::vector_rows(p.q, at.q) || !detail::vector_rows(p.v, at.v) ||
      !detail::vector_rows(p.o, at.o))
    return simple("Q, V or O rows are not contiguous and 16-byte aligned");
  if (p.k.dim != 1 && p.k.seq != 1)
    return simple("K has neither its head dim nor its keys contiguous");
  if (p.k_order() == k_layout::rows && !detail::vector_rows(p.k, at.k))
    return simple("K rows are not 16-byte aligned");
  c.which = kernel_choice::kernel::tiled;
  c.slices = query_slices(std::int64_t(p.batch) * p.heads, p.seq_q, sm_count);
  if (p.k_order() == k_layout::transposed) {
    c.k_vectorized = p.seq_kv % 8 == 0 && detail::aligned16(p.k.dim) &&
                     detail::aligned16(p.k.head) && detail::aligned16(p.k.batch) &&
                     detail::aligned16(at.k);
    if (!c.k_vectorized)
      c.why_not_faster = "transposed K: keys not a multiple of 8 or not 16-byte aligned";
  }
  return c;
}

}  // namespace flash
