// One attention problem as the kernels see it: O = softmax(scale · Q Kᵀ [+ causal mask]) V per
// (batch, head), every tensor addressed through element strides so that BNSH, BSNH and a
// pre-transposed K (BNHS) are all the same problem with different numbers.
#pragma once

#include <cstdint>
#include <string_view>

#include "flash/hd.hpp"

namespace flash {

enum class element : std::uint8_t { f16, bf16, f32 };

constexpr std::string_view element_name(element e) {
  switch (e) {
    case element::f16:
      return "float16";
    case element::bf16:
      return "bfloat16";
    case element::f32:
      return "float32";
  }
  return "?";
}

constexpr int element_bytes(element e) { return e == element::f32 ? 4 : 2; }

// How K is stored: one key per row (BNSH, BSNH), or transposed with the keys contiguous (BNHS,
// as F5-TTS exports Kᵀ).
enum class k_layout : std::uint8_t { rows, transposed };

// Element strides of a [batch, head, sequence, head dim] view.
struct strides {
  std::int64_t batch = 0, head = 0, seq = 0, dim = 0;

  FLASH_HD constexpr std::int64_t at(std::int64_t b, std::int64_t h, std::int64_t s,
                                     std::int64_t d) const {
    return b * batch + h * head + s * seq + d * dim;
  }
  constexpr bool operator==(const strides&) const = default;
};

// Packed layouts by name: the shape is [B, N, S, H] (BNSH), [B, S, N, H] (BSNH), [B, N, H, S]
// (BNHS); the strides always index (b, n, s, h).
constexpr strides bnsh(std::int64_t heads, std::int64_t seq, std::int64_t dim) {
  return {.batch = heads * seq * dim, .head = seq * dim, .seq = dim, .dim = 1};
}
constexpr strides bsnh(std::int64_t heads, std::int64_t seq, std::int64_t dim) {
  return {.batch = seq * heads * dim, .head = dim, .seq = heads * dim, .dim = 1};
}
constexpr strides bnhs(std::int64_t heads, std::int64_t seq, std::int64_t dim) {
  return {.batch = heads * dim * seq, .head = dim * seq, .seq = 1, .dim = seq};
}

struct problem {
  element type = element::f16;
  int batch = 1, heads = 1, kv_heads = 1;  // query heads h read K/V head h / (heads / kv_heads)
  int seq_q = 0, seq_kv = 0, head_dim = 0;
  float scale = 0;  // > 0
  // Query i sees keys j <= i (ONNX Attention's is_causal without a past: upper-left aligned).
  bool causal = false;
  strides q, k, v, o;

  FLASH_HD constexpr k_layout k_order() const {
    return k.dim == 1 ? k_layout::rows : k_layout::transposed;
  }
  FLASH_HD constexpr int group() const { return heads / kv_heads; }
};

}  // namespace flash
