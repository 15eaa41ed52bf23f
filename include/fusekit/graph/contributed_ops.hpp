// The ops of the op table that no onnx release defines: ONNX Runtime's contrib ops that the
// bundled rules emit or match, kept by hand. Every ai.onnx op comes from the linked onnx release's
// schemas instead (known_ops_generator.cpp), so that the table cannot drift from them.
#pragma once

#include "fusekit/graph/op_info.hpp"

namespace fusekit {

inline constexpr op_info contributed_ops[] = {
    // ONNX Runtime registers this one in the ai.onnx domain, not in com.microsoft.
    {"", "SimplifiedLayerNormalization", 2, 2},
    {"com.microsoft", "Attention", 2, 7},
    {"com.microsoft", "BiasAdd", 3, 3},
    {"com.microsoft", "BiasGelu", 2, 2},
    {"com.microsoft", "BiasSplitGelu", 2, 2},
    {"com.microsoft", "FastGelu", 1, 2},
    {"com.microsoft", "FusedMatMul", 2, 2},
    {"com.microsoft", "Gelu", 1, 1},
    {"com.microsoft", "GroupNorm", 3, 3},
    {"com.microsoft", "GroupQueryAttention", 7, 12},
    {"com.microsoft", "MultiHeadAttention", 1, 10},
    {"com.microsoft", "QuickGelu", 1, 1},
    {"com.microsoft", "RotaryEmbedding", 4, 4},
    {"com.microsoft", "SkipLayerNormalization", 3, 5},
    {"com.microsoft", "SkipSimplifiedLayerNormalization", 3, 4},
};

}  // namespace fusekit
