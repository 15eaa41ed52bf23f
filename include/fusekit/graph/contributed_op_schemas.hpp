// onnx schemas for the ONNX Runtime contrib ops of contributed_ops.hpp. No onnx release defines
// them, so onnx's checker would fail their nodes (SimplifiedLayerNormalization, which ONNX Runtime
// registers in the ai.onnx domain, as it does LayerNormalization below opset 17) or skip them
// unchecked (the com.microsoft ops). With
// `schemas()` as its schema registry the checker holds each such node to ONNX Runtime's own
// contract: its inputs, outputs and attributes. The schemas mirror ONNX Runtime 1.23.2's
// registrations (the newest version of each op, or the one below onnx's own);
// tests/python/test_contributed_op_schemas.py keeps them equal to those of the ONNX Runtime the
// tests run.
//
// Not registered in onnx::OpSchemaRegistry: ONNX Runtime, in the same process, registers its own.
// No shape inference functions: onnx's shape inference checks these ops' input and output element
// types against the type constraints and gives outputs the element types the inputs bind, no
// shapes.
#pragma once

#include <onnx/defs/schema.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fusekit/engine.hpp"

namespace fusekit {

// One schema per op of contributed_ops.hpp, finalised (input and output counts, parsed types).
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE const std::vector<onnx::OpSchema>& contributed_op_schemas() {
  static const std::vector<onnx::OpSchema> all = [] {
    using onnx::OpSchema;
    constexpr auto optional = OpSchema::Optional;
    constexpr auto INT = onnx::AttributeProto::INT;
    constexpr auto INTS = onnx::AttributeProto::INTS;
    constexpr auto FLOAT = onnx::AttributeProto::FLOAT;
    constexpr bool required = true;
    constexpr const char* com_microsoft = "com.microsoft";

    std::vector<OpSchema> schemas;
    const auto add = [&](OpSchema& schema) {
      schema.Finalize();
      schemas.push_back(std::move(schema));
    };

    add(OpSchema()
            .SetName("SimplifiedLayerNormalization")
            .SetDomain(onnx::ONNX_DOMAIN)
            .SinceVersion(1)
            .SetSupportLevel(OpSchema::SupportType::EXPERIMENTAL)
            .Input(0, "X", "", "T")
            .Input(1, "scale", "", "V")
            .Output(0, "Y", "", "V")
            .Output(1, "inv_std_var", "", "U", optional)
            .Attr("axis", "", INT, int64_t{-1})
            .Attr("epsilon", "", FLOAT, 1e-5f)
            .Attr("stash_type", "", INT, int64_t{1})
            .TypeConstraint(
                "T", {"tensor(float16)", "tensor(float)", "tensor(double)", "tensor(bfloat16)"}, "")
            .TypeConstraint("U", {"tensor(float)", "tensor(double)"}, "")
            .TypeConstraint(
                "V", {"tensor(float16)", "tensor(float)", "tensor(double)", "tensor(bfloat16)"},
                ""));

    // ONNX Runtime's LayerNormalization below opset 17, where onnx has none: the op a decomposed
    // LayerNorm of an older export becomes for target ort. onnx's own (17) answers from 17 on.
    add(OpSchema()
            .SetName("LayerNormalization")
            .SetDomain(onnx::ONNX_DOMAIN)
            .SinceVersion(1)
            .SetSupportLevel(OpSchema::SupportType::EXPERIMENTAL)
            .Input(0, "X", "", "T")
            .Input(1, "Scale", "", "V")
            .Input(2, "B", "", "V", optional)
            .Output(0, "Y", "", "V")
            .Output(1, "Mean", "", "U", optional)
            .Output(2, "InvStdDev", "", "U", optional)
            .Attr("axis", "", INT, int64_t{-1})
            .Attr("epsilon", "", FLOAT, 1e-5f)
            .Attr("stash_type", "", INT, int64_t{1})
            .TypeConstraint(
                "T", {"tensor(float16)", "tensor(float)", "tensor(double)", "tensor(bfloat16)"}, "")
            .TypeConstraint("U", {"tensor(float)", "tensor(double)"}, "")
            .TypeConstraint(
                "V", {"tensor(float16)", "tensor(float)", "tensor(double)", "tensor(bfloat16)"},
                ""));

    add(OpSchema()
            .SetName("Attention")
            .SetDomain(com_microsoft)
            .SinceVersion(1)
            .Input(0, "input", "", "T")
            .Input(1, "weights", "", "T")
            .Input(2, "bias", "", "T", optional)
            .Input(3, "mask_index", "", "M", optional)
            .Input(4, "past", "", "T", optional)
            .Input(5, "attention_bias", "", "T", optional)
            .Input(6, "past_sequence_length", "", "M", optional)
            .Output(0, "output", "", "T")
            .Output(1, "present", "", "T", optional)
            .Attr("do_rotary", "", INT, !required)
            .Attr("mask_filter_value", "", FLOAT, !required)
            .Attr("num_heads", "", INT, required)
            .Attr("past_present_share_buffer", "", INT, !required)
            .Attr("qkv_hidden_sizes", "", INTS, !required)
            .Attr("rotary_embedding_dim", "", INT, !required)
            .Attr("scale", "", FLOAT, !required)
            .Attr("unidirectional", "", INT, int64_t{0})
            .TypeConstraint("T", {"tensor(float)", "tensor(float16)"}, "")
            .TypeConstraint("M", {"tensor(int32)"}, ""));

    add(OpSchema()
            .SetName("BiasAdd")
            .SetDomain(com_microsoft)
            .SinceVersion(1)
            .Input(0, "X", "", "T")
            .Input(1, "bias", "", "T")
            .Input(2, "skip", "", "T")
            .Output(0, "Y", "", "T")
            .TypeConstraint("T", {"tensor(float16)", "tensor(float)"}, ""));

    add(OpSchema()
            .SetName("BiasGelu")
            .SetDomain(com_microsoft)
            .SinceVersion(1)
            .Input(0, "A", "", "T")
            .Input(1, "B", "", "T")
            .Output(0, "C", "", "T")
            .TypeConstraint(
                "T", {"tensor(float16)", "tensor(float)", "tensor(double)", "tensor(bfloat16)"},
                ""));

    add(OpSchema()
            .SetName("BiasSplitGelu")
            .SetDomain(com_microsoft)
            .SinceVersion(1)
            .Input(0, "X", "", "T")
            .Input(1, "bias", "", "T")
            .Output(0, "Y", "", "T")
            .TypeConstraint("T", {"tensor(float16)", "tensor(float)"}, ""));

    add(OpSchema()
            .SetName("FastGelu")
            .SetDomain(com_microsoft)
            .SinceVersion(1)
            .Input(0, "X", "", "T")
            .Input(1, "bias", "", "T", optional)
            .Output(0, "Y", "", "T")
            .TypeConstraint(
                "T", {"tensor(float)", "tensor(double)", "tensor(float16)", "tensor(bfloat16)"},
                ""));

    add(OpSchema()
            .SetName("FusedMatMul")
            .SetDomain(com_microsoft)
            .SinceVersion(1)
            .Input(0, "A", "", "T")
            .Input(1, "B", "", "T")
            .Output(0, "Y", "", "T")
            .Attr("alpha", "", FLOAT, 1.0f)
            .Attr("transA", "", INT, int64_t{0})
            .Attr("transB", "", INT, int64_t{0})
            .Attr("transBatchA", "", INT, int64_t{0})
            .Attr("transBatchB", "", INT, int64_t{0})
            .TypeConstraint(
                "T", {"tensor(float16)", "tensor(float)", "tensor(double)", "tensor(bfloat16)"},
                ""));

    add(OpSchema()
            .SetName("Gelu")
            .SetDomain(com_microsoft)
            .SinceVersion(1)
            .Input(0, "X", "", "T")
            .Output(0, "Y", "", "T")
            .TypeConstraint(
                "T", {"tensor(float16)", "tensor(float)", "tensor(double)", "tensor(bfloat16)"},
                ""));

    add(OpSchema()
            .SetName("GroupNorm")
            .SetDomain(com_microsoft)
            .SinceVersion(1)
            .Input(0, "X", "", "T")
            .Input(1, "gamma", "", "M")
            .Input(2, "beta", "", "M")
            .Output(0, "Y", "", "T")
            .Attr("activation", "", INT, required)
            .Attr("channels_last", "", INT, int64_t{1})
            .Attr("epsilon", "", FLOAT, 1e-5f)
            .Attr("groups", "", INT, required)
            .TypeConstraint("T", {"tensor(float16)", "tensor(float)"}, "")
            .TypeConstraint("M", {"tensor(float16)", "tensor(float)"}, ""));

    add(OpSchema()
            .SetName("GroupQueryAttention")
            .SetDomain(com_microsoft)
            .SinceVersion(1)
            .Input(0, "query", "", "T")
            .Input(1, "key", "", "T", optional)
            .Input(2, "value", "", "T", optional)
            .Input(3, "past_key", "", "T", optional)
            .Input(4, "past_value", "", "T", optional)
            .Input(5, "seqlens_k", "", "M")
            .Input(6, "total_sequence_length", "", "M")
            .Input(7, "cos_cache", "", "T", optional)
            .Input(8, "sin_cache", "", "T", optional)
            .Input(9, "position_ids", "", "tensor(int64)", optional)
            .Input(10, "attention_bias", "", "T", optional)
            .Input(11, "head_sink", "", "T", optional)
            .Output(0, "output", "", "T")
            .Output(1, "present_key", "", "T")
            .Output(2, "present_value", "", "T")
            .Output(3, "output_qk", "", "T", optional)
            .Attr("do_rotary", "", INT, !required)
            .Attr("kv_num_heads", "", INT, required)
            .Attr("local_window_size", "", INT, int64_t{-1})
            .Attr("num_heads", "", INT, required)
            .Attr("qk_output", "", INT, int64_t{0})
            .Attr("rotary_interleaved", "", INT, !required)
            .Attr("scale", "", FLOAT, !required)
            .Attr("smooth_softmax", "", INT, int64_t{-1})
            .Attr("softcap", "", FLOAT, !required)
            .TypeConstraint("T", {"tensor(float16)", "tensor(bfloat16)", "tensor(float)"}, "")
            .TypeConstraint("M", {"tensor(int32)"}, ""));

    add(OpSchema()
            .SetName("MultiHeadAttention")
            .SetDomain(com_microsoft)
            .SinceVersion(1)
            .Input(0, "query", "", "T")
            .Input(1, "key", "", "T", optional)
            .Input(2, "value", "", "T", optional)
            .Input(3, "bias", "", "T", optional)
            .Input(4, "key_padding_mask", "", "M", optional)
            .Input(5, "attention_bias", "", "T", optional)
            .Input(6, "past_key", "", "T", optional)
            .Input(7, "past_value", "", "T", optional)
            .Input(8, "past_sequence_length", "", "M", optional)
            .Input(9, "cache_indirection", "", "M", optional)
            .Output(0, "output", "", "T")
            .Output(1, "present_key", "", "T", optional)
            .Output(2, "present_value", "", "T", optional)
            .Output(3, "qk", "", "QK", optional)
            .Attr("mask_filter_value", "", FLOAT, !required)
            .Attr("num_heads", "", INT, required)
            .Attr("scale", "", FLOAT, !required)
            .Attr("unidirectional", "", INT, int64_t{0})
            .TypeConstraint("T", {"tensor(float)", "tensor(float16)"}, "")
            .TypeConstraint("QK", {"tensor(float)", "tensor(float16)"}, "")
            .TypeConstraint("M", {"tensor(int32)"}, ""));

    add(OpSchema()
            .SetName("QuickGelu")
            .SetDomain(com_microsoft)
            .SinceVersion(1)
            .Input(0, "X", "", "T")
            .Output(0, "Y", "", "T")
            .Attr("alpha", "", FLOAT, 1.702f)
            .TypeConstraint(
                "T", {"tensor(float16)", "tensor(float)", "tensor(double)", "tensor(bfloat16)"},
                ""));

    add(OpSchema()
            .SetName("RotaryEmbedding")
            .SetDomain(com_microsoft)
            .SinceVersion(1)
            .Input(0, "input", "", "T")
            .Input(1, "position_ids", "", "M")
            .Input(2, "cos_cache", "", "T")
            .Input(3, "sin_cache", "", "T")
            .Output(0, "output", "", "T")
            .Attr("interleaved", "", INT, !required)
            .Attr("is_packed_batching", "", INT, !required)
            .Attr("num_heads", "", INT, !required)
            .Attr("rotary_embedding_dim", "", INT, !required)
            .Attr("scale", "", FLOAT, !required)
            .TypeConstraint("T", {"tensor(float)", "tensor(float16)", "tensor(bfloat16)"}, "")
            .TypeConstraint("M", {"tensor(int64)"}, ""));

    add(OpSchema()
            .SetName("SkipLayerNormalization")
            .SetDomain(com_microsoft)
            .SinceVersion(1)
            .Input(0, "input", "", "T")
            .Input(1, "skip", "", "T")
            .Input(2, "gamma", "", "T")
            .Input(3, "beta", "", "T", optional)
            .Input(4, "bias", "", "T", optional)
            .Output(0, "output", "", "T")
            .Output(1, "mean", "", "U", optional)
            .Output(2, "inv_std_var", "", "U", optional)
            .Output(3, "input_skip_bias_sum", "", "T", optional)
            .Attr("epsilon", "", FLOAT, 1e-12f)
            .TypeConstraint("T", {"tensor(float)", "tensor(float16)"}, "")
            .TypeConstraint("U", {"tensor(float)"}, ""));

    add(OpSchema()
            .SetName("SkipSimplifiedLayerNormalization")
            .SetDomain(com_microsoft)
            .SinceVersion(1)
            .Input(0, "input", "", "T")
            .Input(1, "skip", "", "T")
            .Input(2, "gamma", "", "T")
            .Input(3, "bias", "", "T", optional)
            .Output(0, "output", "", "T")
            .Output(1, "mean", "", "U", optional)
            .Output(2, "inv_std_var", "", "U", optional)
            .Output(3, "input_skip_bias_sum", "", "T", optional)
            .Attr("epsilon", "", FLOAT, 1e-12f)
            .TypeConstraint("T", {"tensor(float)", "tensor(float16)", "tensor(bfloat16)"}, "")
            .TypeConstraint("U", {"tensor(float)"}, ""));

    return schemas;
  }();
  return all;
}
#else
const std::vector<onnx::OpSchema>& contributed_op_schemas();
#endif

// onnx's registry with the contributed ops added, for onnx::checker::CheckerContext and shape
// inference. For a contributed op "" and "ai.onnx" name one domain, as in ONNX Runtime; every other
// lookup is answered by onnx's registry as it stands.
class schema_registry final : public onnx::ISchemaRegistry {
 public:
  // Answers are remembered, per thread, for the ops found: a model asks for the same few schemas
  // once per node, and onnx's registry answers each through three maps (an op registered later is
  // still found: a miss is asked again). The default domain is onnx's, so that a call through
  // either type means the same.
  const onnx::OpSchema* GetSchema(const std::string& key, int max_inclusive_version,
                                  const std::string& domain = onnx::ONNX_DOMAIN) const override {
    thread_local std::unordered_map<std::string, const onnx::OpSchema*> found;
    std::string asked = domain;
    asked += '\0';
    asked += key;
    asked += '\0';
    asked += std::to_string(max_inclusive_version);
    if (auto it = found.find(asked); it != found.end()) return it->second;
    const onnx::OpSchema* schema = look_up(key, max_inclusive_version, domain);
    if (schema != nullptr) found.emplace(std::move(asked), schema);
    return schema;
  }

 private:
  static const onnx::OpSchema* look_up(const std::string& key, int max_inclusive_version,
                                       const std::string& domain) {
    const std::string_view wanted =
        domain == onnx::AI_ONNX_DOMAIN ? std::string_view(onnx::ONNX_DOMAIN) : domain;
    const onnx::OpSchema* onnx_own =
        onnx::OpSchemaRegistry::Instance()->GetSchema(key, max_inclusive_version, domain);
    // The newer of the two where both define the op (LayerNormalization: ONNX Runtime's below
    // 17, onnx's from 17).
    for (const onnx::OpSchema& schema : contributed_op_schemas()) {
      if (schema.Name() == key && schema.domain() == wanted &&
          schema.since_version() <= max_inclusive_version &&
          (onnx_own == nullptr || onnx_own->since_version() < schema.since_version())) {
        return &schema;
      }
    }
    return onnx_own;
  }
};

// The process's one registry: what a CheckerContext or shape inference is given.
inline const schema_registry& schemas() {
  static const schema_registry registry;
  return registry;
}

}  // namespace fusekit
