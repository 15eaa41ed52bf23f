// What the bundled rules are asked for, and what a caller knows that the model does not say.
// The engine knows nothing of these: they belong to the rule library (rewrite/rule.hpp).
#pragma once

#include <cstdint>

namespace fusekit::rules {

// Which runtime's ops every rule of the library writes.
enum class target : std::uint8_t {
  ort,   // ONNX Runtime's fused kernels: com.microsoft contrib ops (MultiHeadAttention,
         // SkipLayerNormalization …) and the ones it registers in ai.onnx
  onnx,  // standard ops only (ai.onnx Attention, LayerNormalization, Gelu …): any runtime
};

inline constexpr target every_target[] = {target::ort, target::onnx};

// Which of ONNX Runtime's execution providers runs the fused model (target ort), where a fused
// form pays on one and costs on the other: skip_normalization.hpp says where, and what was
// measured.
enum class provider : std::uint8_t { cpu, cuda };

struct attention_options {
  using target = rules::target;
  target fused_target = target::ort;
  provider runs_on = provider::cpu;
  std::int64_t num_heads = 0;  // 0: infer from the model
  // The largest tensor constant-evaluation writes, in bytes; 0: any (constant_evaluation.hpp).
  std::int64_t fold_limit_bytes = 0;
};

// The options of every rule of the library: the norm and activation rules read the target alone.
using fusion_options = attention_options;

}  // namespace fusekit::rules
