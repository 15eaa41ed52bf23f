// Op types as small integers. Every ai.onnx op (through opset 24) and the com.microsoft ops
// attention fusion meets have a fixed id known at compile time, so a pattern's op test is one
// integer compare and an unknown op name can fail to compile. Other ops get ids per model.
#pragma once

#include <climits>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace fusekit {

using op_id = std::uint32_t;

inline constexpr int variadic = INT_MAX;

// Input counts are the widest over all opset versions of the op (Clip had 1 input, has 3).
struct op_info {
  std::string_view domain;
  std::string_view name;
  int min_inputs;
  int max_inputs;
};

// Sorted by (domain, name).
inline constexpr op_info known_ops[] = {
    {"", "Abs", 1, 1},
    {"", "Acos", 1, 1},
    {"", "Acosh", 1, 1},
    {"", "Add", 2, 2},
    {"", "AffineGrid", 2, 2},
    {"", "And", 2, 2},
    {"", "ArgMax", 1, 1},
    {"", "ArgMin", 1, 1},
    {"", "Asin", 1, 1},
    {"", "Asinh", 1, 1},
    {"", "Atan", 1, 1},
    {"", "Atanh", 1, 1},
    {"", "Attention", 3, 6},
    {"", "AveragePool", 1, 1},
    {"", "BatchNormalization", 5, 5},
    {"", "Bernoulli", 1, 1},
    {"", "BitShift", 2, 2},
    {"", "BitwiseAnd", 2, 2},
    {"", "BitwiseNot", 1, 1},
    {"", "BitwiseOr", 2, 2},
    {"", "BitwiseXor", 2, 2},
    {"", "BlackmanWindow", 1, 1},
    {"", "Cast", 1, 1},
    {"", "CastLike", 2, 2},
    {"", "Ceil", 1, 1},
    {"", "Celu", 1, 1},
    {"", "CenterCropPad", 2, 2},
    {"", "Clip", 1, 3},
    {"", "Col2Im", 3, 3},
    {"", "Compress", 2, 2},
    {"", "Concat", 1, variadic},
    {"", "ConcatFromSequence", 1, 1},
    {"", "Constant", 0, 0},
    {"", "ConstantOfShape", 1, 1},
    {"", "Conv", 2, 3},
    {"", "ConvInteger", 2, 4},
    {"", "ConvTranspose", 2, 3},
    {"", "Cos", 1, 1},
    {"", "Cosh", 1, 1},
    {"", "CumSum", 2, 2},
    {"", "DFT", 1, 3},
    {"", "DeformConv", 3, 5},
    {"", "DepthToSpace", 1, 1},
    {"", "DequantizeLinear", 2, 3},
    {"", "Det", 1, 1},
    {"", "Div", 2, 2},
    {"", "Dropout", 1, 3},
    {"", "DynamicQuantizeLinear", 1, 1},
    {"", "Einsum", 1, variadic},
    {"", "Elu", 1, 1},
    {"", "Equal", 2, 2},
    {"", "Erf", 1, 1},
    {"", "Exp", 1, 1},
    {"", "Expand", 2, 2},
    {"", "EyeLike", 1, 1},
    {"", "Flatten", 1, 1},
    {"", "Floor", 1, 1},
    {"", "GRU", 3, 6},
    {"", "Gather", 2, 2},
    {"", "GatherElements", 2, 2},
    {"", "GatherND", 2, 2},
    {"", "Gelu", 1, 1},
    {"", "Gemm", 2, 3},
    {"", "GlobalAveragePool", 1, 1},
    {"", "GlobalLpPool", 1, 1},
    {"", "GlobalMaxPool", 1, 1},
    {"", "Greater", 2, 2},
    {"", "GreaterOrEqual", 2, 2},
    {"", "GridSample", 2, 2},
    {"", "GroupNormalization", 3, 3},
    {"", "HammingWindow", 1, 1},
    {"", "HannWindow", 1, 1},
    {"", "HardSigmoid", 1, 1},
    {"", "HardSwish", 1, 1},
    {"", "Hardmax", 1, 1},
    {"", "Identity", 1, 1},
    {"", "If", 1, 1},
    {"", "ImageDecoder", 1, 1},
    {"", "InstanceNormalization", 3, 3},
    {"", "IsInf", 1, 1},
    {"", "IsNaN", 1, 1},
    {"", "LRN", 1, 1},
    {"", "LSTM", 3, 8},
    {"", "LayerNormalization", 2, 3},
    {"", "LeakyRelu", 1, 1},
    {"", "Less", 2, 2},
    {"", "LessOrEqual", 2, 2},
    {"", "Log", 1, 1},
    {"", "LogSoftmax", 1, 1},
    {"", "Loop", 2, variadic},
    {"", "LpNormalization", 1, 1},
    {"", "LpPool", 1, 1},
    {"", "MatMul", 2, 2},
    {"", "MatMulInteger", 2, 4},
    {"", "Max", 1, variadic},
    {"", "MaxPool", 1, 1},
    {"", "MaxRoiPool", 2, 2},
    {"", "MaxUnpool", 2, 3},
    {"", "Mean", 1, variadic},
    {"", "MeanVarianceNormalization", 1, 1},
    {"", "MelWeightMatrix", 5, 5},
    {"", "Min", 1, variadic},
    {"", "Mish", 1, 1},
    {"", "Mod", 2, 2},
    {"", "Mul", 2, 2},
    {"", "Multinomial", 1, 1},
    {"", "Neg", 1, 1},
    {"", "NegativeLogLikelihoodLoss", 2, 3},
    {"", "NonMaxSuppression", 2, 5},
    {"", "NonZero", 1, 1},
    {"", "Not", 1, 1},
    {"", "OneHot", 3, 3},
    {"", "Optional", 0, 1},
    {"", "OptionalGetElement", 1, 1},
    {"", "OptionalHasElement", 1, 1},
    {"", "Or", 2, 2},
    {"", "PRelu", 2, 2},
    {"", "Pad", 1, 4},
    {"", "Pow", 2, 2},
    {"", "QLinearConv", 8, 9},
    {"", "QLinearMatMul", 8, 8},
    {"", "QuantizeLinear", 2, 4},
    {"", "RMSNormalization", 2, 2},
    {"", "RNN", 3, 6},
    {"", "RandomNormal", 0, 0},
    {"", "RandomNormalLike", 1, 1},
    {"", "RandomUniform", 0, 0},
    {"", "RandomUniformLike", 1, 1},
    {"", "Range", 3, 3},
    {"", "Reciprocal", 1, 1},
    {"", "ReduceL1", 1, 2},
    {"", "ReduceL2", 1, 2},
    {"", "ReduceLogSum", 1, 2},
    {"", "ReduceLogSumExp", 1, 2},
    {"", "ReduceMax", 1, 2},
    {"", "ReduceMean", 1, 2},
    {"", "ReduceMin", 1, 2},
    {"", "ReduceProd", 1, 2},
    {"", "ReduceSum", 1, 2},
    {"", "ReduceSumSquare", 1, 2},
    {"", "RegexFullMatch", 1, 1},
    {"", "Relu", 1, 1},
    {"", "Reshape", 1, 2},
    {"", "Resize", 1, 4},
    {"", "ReverseSequence", 2, 2},
    {"", "RoiAlign", 3, 3},
    {"", "RotaryEmbedding", 3, 4},
    {"", "Round", 1, 1},
    {"", "STFT", 2, 4},
    {"", "Scan", 1, variadic},
    {"", "Scatter", 3, 3},
    {"", "ScatterElements", 3, 3},
    {"", "ScatterND", 3, 3},
    {"", "Selu", 1, 1},
    {"", "SequenceAt", 2, 2},
    {"", "SequenceConstruct", 1, variadic},
    {"", "SequenceEmpty", 0, 0},
    {"", "SequenceErase", 1, 2},
    {"", "SequenceInsert", 2, 3},
    {"", "SequenceLength", 1, 1},
    {"", "SequenceMap", 1, variadic},
    {"", "Shape", 1, 1},
    {"", "Shrink", 1, 1},
    {"", "Sigmoid", 1, 1},
    {"", "Sign", 1, 1},
    {"", "SimplifiedLayerNormalization", 2, 2},
    {"", "Sin", 1, 1},
    {"", "Sinh", 1, 1},
    {"", "Size", 1, 1},
    {"", "Slice", 1, 5},
    {"", "Softmax", 1, 1},
    {"", "SoftmaxCrossEntropyLoss", 2, 3},
    {"", "Softplus", 1, 1},
    {"", "Softsign", 1, 1},
    {"", "SpaceToDepth", 1, 1},
    {"", "Split", 1, 2},
    {"", "SplitToSequence", 1, 2},
    {"", "Sqrt", 1, 1},
    {"", "Squeeze", 1, 2},
    {"", "StringConcat", 2, 2},
    {"", "StringNormalizer", 1, 1},
    {"", "StringSplit", 1, 1},
    {"", "Sub", 2, 2},
    {"", "Sum", 1, variadic},
    {"", "Swish", 1, 1},
    {"", "Tan", 1, 1},
    {"", "Tanh", 1, 1},
    {"", "TensorScatter", 2, 3},
    {"", "TfIdfVectorizer", 1, 1},
    {"", "ThresholdedRelu", 1, 1},
    {"", "Tile", 2, 3},
    {"", "TopK", 1, 2},
    {"", "Transpose", 1, 1},
    {"", "Trilu", 1, 2},
    {"", "Unique", 1, 1},
    {"", "Unsqueeze", 1, 2},
    {"", "Upsample", 1, 2},
    {"", "Where", 3, 3},
    {"", "Xor", 2, 2},
    {"com.microsoft", "Attention", 1, 8},
    {"com.microsoft", "BiasAdd", 3, 3},
    {"com.microsoft", "BiasGelu", 2, 2},
    {"com.microsoft", "BiasSplitGelu", 2, 2},
    {"com.microsoft", "FastGelu", 1, 2},
    {"com.microsoft", "FusedMatMul", 2, 2},
    {"com.microsoft", "Gelu", 1, 1},
    {"com.microsoft", "GroupNorm", 3, 3},
    {"com.microsoft", "GroupQueryAttention", 1, 12},
    {"com.microsoft", "MultiHeadAttention", 1, 10},
    {"com.microsoft", "QuickGelu", 1, 1},
    {"com.microsoft", "RotaryEmbedding", 4, 4},
    {"com.microsoft", "SkipLayerNormalization", 3, 5},
    {"com.microsoft", "SkipSimplifiedLayerNormalization", 3, 4},
};

inline constexpr std::size_t known_op_count = std::size(known_ops);

// "ai.onnx" and "" name the same domain.
constexpr std::string_view canonical_domain(std::string_view domain) {
  return domain == "ai.onnx" ? std::string_view{} : domain;
}

constexpr std::optional<op_id> find_known_op(std::string_view domain, std::string_view name) {
  domain = canonical_domain(domain);
  for (std::size_t i = 0; i < known_op_count; ++i)
    if (known_ops[i].domain == domain && known_ops[i].name == name) return op_id(i);
  return std::nullopt;
}

// Known ops first, then whatever else a model uses, in order of first appearance: ids are
// deterministic for a given model.
class op_interner {
 public:
  op_interner() {
    for (std::size_t i = 0; i < known_op_count; ++i)
      ids_.emplace(key(known_ops[i].domain, known_ops[i].name), op_id(i));
  }

  op_id intern(std::string_view domain, std::string_view name) {
    std::string k = key(canonical_domain(domain), name);
    if (auto it = ids_.find(k); it != ids_.end()) return it->second;
    const op_id id = op_id(known_op_count + extra_.size());
    extra_.push_back({std::string(canonical_domain(domain)), std::string(name)});
    ids_.emplace(std::move(k), id);
    return id;
  }

  std::optional<op_id> find(std::string_view domain, std::string_view name) const {
    if (auto it = ids_.find(key(canonical_domain(domain), name)); it != ids_.end())
      return it->second;
    return std::nullopt;
  }

  std::string_view domain(op_id id) const {
    return id < known_op_count ? known_ops[id].domain : extra_[id - known_op_count].domain;
  }
  std::string_view name(op_id id) const {
    return id < known_op_count ? known_ops[id].name : extra_[id - known_op_count].name;
  }
  std::size_t size() const { return known_op_count + extra_.size(); }

 private:
  struct entry {
    std::string domain;
    std::string name;
  };
  static std::string key(std::string_view domain, std::string_view name) {
    std::string k(domain);
    k += '\0';
    k += name;
    return k;
  }

  std::unordered_map<std::string, op_id> ids_;
  std::deque<entry> extra_;
};

}  // namespace fusekit
