// How fusekit derives an output's element type when the model does not declare it. Covers the ops
// attention blocks and their surroundings are made of; anything else stays undefined rather than
// guessed.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "fusekit/graph/op_table.hpp"

namespace fusekit {

enum class type_rule : std::uint8_t {
  unknown,
  same_as_input0,       // output 0 (every output for Split)
  same_as_input1,       // Where: the condition is input 0
  same_as_first_known,  // Concat, Max, Min, Sum, Mean: first input whose type is known
  boolean,              // comparisons and logic
  int64,                // Shape, Size, NonZero, ArgMax, ArgMin
  cast_to,              // Cast: the `to` attribute
  cast_like,            // CastLike: input 1's type
  value_attribute,      // ConstantOfShape: its `value` tensor's type, float32 when absent
};

namespace detail {

inline constexpr std::string_view keeps_input0_type[] = {"Abs",
                                                         "Acos",
                                                         "Add",
                                                         "Asin",
                                                         "Atan",
                                                         "Attention",
                                                         "AveragePool",
                                                         "BatchNormalization",
                                                         "Ceil",
                                                         "Clip",
                                                         "Compress",
                                                         "Conv",
                                                         "ConvTranspose",
                                                         "Cos",
                                                         "Cosh",
                                                         "CumSum",
                                                         "DepthToSpace",
                                                         "Div",
                                                         "Dropout",
                                                         "Einsum",
                                                         "Elu",
                                                         "Erf",
                                                         "Exp",
                                                         "Expand",
                                                         "Flatten",
                                                         "Floor",
                                                         "Gather",
                                                         "GatherElements",
                                                         "GatherND",
                                                         "Gelu",
                                                         "Gemm",
                                                         "GlobalAveragePool",
                                                         "GlobalMaxPool",
                                                         "GroupNormalization",
                                                         "Hardmax",
                                                         "HardSigmoid",
                                                         "HardSwish",
                                                         "Identity",
                                                         "InstanceNormalization",
                                                         "LayerNormalization",
                                                         "LeakyRelu",
                                                         "Log",
                                                         "LogSoftmax",
                                                         "MatMul",
                                                         "MaxPool",
                                                         "Mish",
                                                         "Mod",
                                                         "Mul",
                                                         "Neg",
                                                         "Pad",
                                                         "Pow",
                                                         "PRelu",
                                                         "Range",
                                                         "Reciprocal",
                                                         "ReduceL1",
                                                         "ReduceL2",
                                                         "ReduceLogSum",
                                                         "ReduceLogSumExp",
                                                         "ReduceMax",
                                                         "ReduceMean",
                                                         "ReduceMin",
                                                         "ReduceProd",
                                                         "ReduceSum",
                                                         "ReduceSumSquare",
                                                         "Relu",
                                                         "Reshape",
                                                         "Resize",
                                                         "ReverseSequence",
                                                         "RMSNormalization",
                                                         "RotaryEmbedding",
                                                         "Round",
                                                         "ScatterElements",
                                                         "ScatterND",
                                                         "Selu",
                                                         "Sigmoid",
                                                         "Sign",
                                                         "SimplifiedLayerNormalization",
                                                         "Sin",
                                                         "Sinh",
                                                         "Slice",
                                                         "Softmax",
                                                         "Softplus",
                                                         "Softsign",
                                                         "SpaceToDepth",
                                                         "Split",
                                                         "Sqrt",
                                                         "Squeeze",
                                                         "Sub",
                                                         "Swish",
                                                         "Tan",
                                                         "Tanh",
                                                         "Tile",
                                                         "TopK",
                                                         "Transpose",
                                                         "Trilu",
                                                         "Unsqueeze"};

inline constexpr std::string_view contrib_keeps_input0_type[] = {
    "Attention",
    "BiasGelu",
    "FastGelu",
    "FusedMatMul",
    "Gelu",
    "GroupQueryAttention",
    "MultiHeadAttention",
    "QuickGelu",
    "RotaryEmbedding",
    "SkipLayerNormalization",
    "SkipSimplifiedLayerNormalization"};

inline constexpr std::string_view first_known_input_type[] = {"Concat", "Max", "Mean", "Min",
                                                              "Sum"};
inline constexpr std::string_view boolean_output[] = {"And",   "Equal", "Greater", "GreaterOrEqual",
                                                      "IsInf", "IsNaN", "Less",    "LessOrEqual",
                                                      "Not",   "Or",    "Xor"};
inline constexpr std::string_view int64_output[] = {"ArgMax", "ArgMin", "NonZero", "Shape", "Size"};

template <std::size_t N>
constexpr void assign(std::array<type_rule, known_op_count>& rules, std::string_view domain,
                      const std::string_view (&names)[N], type_rule rule) {
  for (std::string_view name : names) rules[*find_known_op(domain, name)] = rule;
}

constexpr std::array<type_rule, known_op_count> make_type_rules() {
  std::array<type_rule, known_op_count> rules{};
  assign(rules, "", keeps_input0_type, type_rule::same_as_input0);
  assign(rules, "com.microsoft", contrib_keeps_input0_type, type_rule::same_as_input0);
  assign(rules, "", first_known_input_type, type_rule::same_as_first_known);
  assign(rules, "", boolean_output, type_rule::boolean);
  assign(rules, "", int64_output, type_rule::int64);
  rules[*find_known_op("", "Where")] = type_rule::same_as_input1;
  rules[*find_known_op("", "Cast")] = type_rule::cast_to;
  rules[*find_known_op("", "CastLike")] = type_rule::cast_like;
  rules[*find_known_op("", "ConstantOfShape")] = type_rule::value_attribute;
  return rules;
}

inline constexpr std::array<type_rule, known_op_count> type_rules = make_type_rules();

}  // namespace detail

// The rule for output `slot` of an op: most ops only say what their first output is.
constexpr type_rule output_type_rule(op_id op, std::size_t slot) {
  if (op >= known_op_count) return type_rule::unknown;
  const type_rule rule = detail::type_rules[op];
  if (slot == 0) return rule;
  if (op == *find_known_op("", "Split")) return rule;
  // The residual norms' output 3 is the sum they normalised, of the input's type.
  if (slot == 3 && (op == *find_known_op("com.microsoft", "SkipLayerNormalization") ||
                    op == *find_known_op("com.microsoft", "SkipSimplifiedLayerNormalization")))
    return type_rule::same_as_input0;
  if (op == *find_known_op("", "TopK") && slot == 1) return type_rule::int64;
  return type_rule::unknown;
}

}  // namespace fusekit
