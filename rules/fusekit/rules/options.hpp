// What the attention rules are asked for, and what a caller knows that the model does not say.
// The engine knows nothing of these: they belong to the rule family (rewrite/rule.hpp).
#pragma once

#include <cstdint>

namespace fusekit::rules {

struct attention_options {
  enum class target : std::uint8_t {
    ort,   // com.microsoft contrib ops (MultiHeadAttention …): ONNX Runtime's fused kernels
    onnx,  // standard ops (ai.onnx Attention, opset 23): any runtime
  };
  target fused_target = target::ort;
  std::int64_t num_heads = 0;  // 0: infer from the model
};

}  // namespace fusekit::rules
