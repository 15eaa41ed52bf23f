// Specifications of the four classic passes: each fuses what it promises, and each look-alike is
// left byte for byte as it was, with the reason the report gives.
#include <gtest/gtest.h>

#include <string>

#include "fusekit/graph/model_builder.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "fusekit/rules/batch_normalization_folding.hpp"
#include "fusekit/rules/bias_folding.hpp"
#include "fusekit/rules/transpose_folding.hpp"
#include "quick_gelu.hpp"

namespace {

using fusekit::dtype;
using fusekit::build::model_builder;
using fusekit::build::value;
using fusekit::rewrite::fuse;
using i64s = std::vector<std::int64_t>;

// "Op(input, …)" per node, in graph order: what a fused graph computes, by name.
std::string nodes_of(const fusekit::model& m) {
  std::string out;
  for (const auto& n : m.proto.graph().node()) {
    out += n.op_type() + "(";
    for (int i = 0; i < n.input_size(); ++i) out += (i ? ", " : "") + n.input(i);
    out += ") ";
  }
  return out;
}

// Runs one pass, expects the model unchanged, and returns the near misses' reasons.
template <class Pass>
std::string refusal(fusekit::model m) {
  const std::string before = m.proto.SerializeAsString();
  const auto report = fuse<Pass>(m);
  EXPECT_EQ(m.proto.SerializeAsString(), before);
  EXPECT_TRUE(report.fusions.empty());
  std::string reasons;
  for (const auto& n : report.near_misses) reasons += n.anchor + ": " + n.reason + "\n";
  return reasons;
}

// ---- QuickGelu

fusekit::model quick_gelu_with(dtype type, double alpha) {
  model_builder b;
  auto x = b.input("x", type, {2, 8});
  auto sigmoid = b.op("Sigmoid", {b.op("Mul", {b.scalar(type, alpha), x})});
  b.output(b.op("Mul", {sigmoid, x}), type, {2, 8});
  return b.build_model();
}

TEST(QuickGeluPass, FusesWithItsFactor) {
  fusekit::model m = quick_gelu_with(dtype::float32, 1.702);
  const auto report = fuse<passes::quick_gelu>(m);
  EXPECT_EQ(nodes_of(m), "QuickGelu(x) ");
  EXPECT_NEAR(m.proto.graph().node(0).attribute(0).f(), 1.702, 1e-6);
  EXPECT_EQ(m.proto.graph().initializer_size(), 0);
  fusekit::rewrite::check_invariants(m);
}

TEST(QuickGeluPass, NearMissIntegerInput) {
  // QuickGelu is defined for float types only.
  EXPECT_EQ(refusal<passes::quick_gelu>(quick_gelu_with(dtype::int32, 2)),
            "Mul 'Mul_3': input 1 of Mul 'Mul_1', input 0 of Sigmoid 'Sigmoid_2', input 0 of Mul "
            "'Mul_3': graph input 'x' has dtype int32, expected float32|float16\n");
}

// ---- Transpose ∘ Transpose

struct transposes {
  std::vector<std::int64_t> first{0, 2, 1, 3}, second{0, 2, 1, 3};
  bool first_read_elsewhere = false, known_rank = true, output = false;
};

fusekit::model transposes_with(const transposes& t) {
  model_builder b;
  auto x = t.known_rank ? b.input("x", dtype::float32, {2, 3, 4, 5}) : b.input("x", dtype::float32);
  auto first =
      t.first.empty() ? b.op("Transpose", {x}) : b.op("Transpose", {x}, {{"perm", t.first}});
  auto second = b.op("Transpose", {first}, {{"perm", t.second}});
  auto y = t.output ? second : b.op("Relu", {second});
  // x's dims through both perms (the second's input is the first's output).
  const std::vector<std::int64_t> first_perm = t.first.empty() ? i64s{3, 2, 1, 0} : t.first;
  std::vector<fusekit::build::dim_spec> dims;
  for (std::int64_t i : t.second)
    dims.push_back(i64s{2, 3, 4, 5}[std::size_t(first_perm[std::size_t(i)])]);
  b.output(y, dtype::float32, fusekit::build::shape_spec(dims));
  if (t.first_read_elsewhere) b.output(b.op("Neg", {first}), dtype::float32);
  return b.build_model();
}

TEST(TransposeFolding, TwoThatUndoEachOtherLeaveNothing) {
  fusekit::model m = transposes_with({});
  fuse<fusekit::rules::transpose_folding>(m);
  // No Identity: Relu reads x itself.
  EXPECT_EQ(nodes_of(m), "Relu(x) ");
  fusekit::rewrite::check_invariants(m);
}

TEST(TransposeFolding, TwoBecomeOneWithTheComposedPerm) {
  fusekit::model m = transposes_with({.first = {0, 2, 1, 3}, .second = {3, 1, 0, 2}});
  fuse<fusekit::rules::transpose_folding>(m);
  EXPECT_EQ(nodes_of(m), "Transpose(x) Relu(Transpose_1) ");
  const auto& perm = m.proto.graph().node(0).attribute(0);
  EXPECT_EQ(i64s(perm.ints().begin(), perm.ints().end()), (i64s{3, 2, 0, 1}));
  fusekit::rewrite::check_invariants(m);
}

TEST(TransposeFolding, ADefaultPermIsTheAxesReversed) {
  fusekit::model m = transposes_with({.first = {}, .second = {3, 2, 1, 0}});
  fuse<fusekit::rules::transpose_folding>(m);
  EXPECT_EQ(nodes_of(m), "Relu(x) ");
}

TEST(TransposeFolding, AFirstReadElsewhereStaysForItsReader) {
  fusekit::model m = transposes_with({.first_read_elsewhere = true});
  fuse<fusekit::rules::transpose_folding>(m);
  EXPECT_EQ(nodes_of(m), "Transpose(x) Relu(x) Neg(Transpose_0) ");
}

TEST(TransposeFolding, AGraphOutputKeepsItsName) {
  // The model's output is named for the second Transpose: an Identity is what keeps that name.
  fusekit::model m = transposes_with({.output = true});
  fuse<fusekit::rules::transpose_folding>(m);
  EXPECT_EQ(nodes_of(m), "Identity(x) ");
  EXPECT_EQ(m.proto.graph().node(0).output(0), m.proto.graph().output(0).name());
}

TEST(TransposeFolding, NearMissDefaultPermOfUnknownRank) {
  // With no perm, the first reverses axes nobody can count.
  EXPECT_EQ(refusal<fusekit::rules::transpose_folding>(
                transposes_with({.first = {}, .known_rank = false})),
            "Transpose 'Transpose_1': Transpose 'Transpose_0' has no perm and its input no proven "
            "rank\n");
}

TEST(TransposeFolding, NearMissPermsOfOtherLengths) {
  // A second perm of three axes on a four-axis input: no model that runs, and nothing to compose.
  EXPECT_EQ(refusal<fusekit::rules::transpose_folding>(transposes_with({.second = {1, 0, 2}})),
            "Transpose 'Transpose_1': Transpose 'Transpose_1' permutes 3 axes of the 4 its input "
            "has\n");
}

// ---- MatMul + bias → Gemm

struct linear {
  fusekit::build::shape_spec a{2, 4}, bias{3};
  bool bias_first = false;
};

fusekit::model linear_with(const linear& l) {
  model_builder b;
  auto a = b.input("a", dtype::float32, l.a);
  auto w = b.initializer("w", dtype::float32, {4, 3}, std::vector<double>(12, 0.5));
  auto bias = b.input("bias", dtype::float32, l.bias);
  auto y = b.op("MatMul", {a, w});
  b.output(b.op("Add", l.bias_first ? std::vector<value>{bias, y} : std::vector<value>{y, bias}),
           dtype::float32, {2, 3});
  return b.build_model();
}

TEST(MatMulAddToGemm, ABiasVectorInEitherOrder) {
  for (bool first : {false, true}) {
    fusekit::model m = linear_with({.bias_first = first});
    fuse<fusekit::rules::matmul_add_to_gemm>(m);
    EXPECT_EQ(nodes_of(m), "Gemm(a, w, bias) ");
    fusekit::rewrite::check_invariants(m);
  }
}

TEST(MatMulAddToGemm, ABiasOfOneRowOrOneColumn) {
  for (const fusekit::build::shape_spec& bias :
       {fusekit::build::shape_spec{1, 3}, {2, 1}, {2, 3}}) {
    fusekit::model m = linear_with({.bias = bias});
    fuse<fusekit::rules::matmul_add_to_gemm>(m);
    EXPECT_EQ(nodes_of(m), "Gemm(a, w, bias) ");
  }
}

TEST(MatMulAddToGemm, NearMissABatchedProductOnlyWhenAsked) {
  // [5, 2, 4] · [4, 3]: Gemm multiplies matrices only. A Linear of 3-D input is no Gemm missed,
  // so the report tells it only to a run that asks for every anchor.
  fusekit::model m = linear_with({.a = {5, 2, 4}});
  EXPECT_EQ(refusal<fusekit::rules::matmul_add_to_gemm>(m), "");
  const auto report = fuse<fusekit::rules::matmul_add_to_gemm>(m, {.explain = true});
  ASSERT_EQ(report.near_misses.size(), 1u);
  EXPECT_EQ(report.near_misses[0].reason,
            "input 0 of MatMul 'MatMul_0', input 0 of Add 'Add_1': graph input 'a' is not proven "
            "rank 2: it is [5, 2, 4]");
}

TEST(MatMulAddToGemm, NearMissABiasThatGrowsTheProduct) {
  // [4, 2, 3] broadcasts the [2, 3] product to three dims: the Add is no Gemm's C.
  EXPECT_EQ(refusal<fusekit::rules::matmul_add_to_gemm>(linear_with({.bias = {4, 2, 3}})),
            "Add 'Add_1': input 1 of Add 'Add_1': graph input 'bias' is [4, 2, 3], which does not "
            "broadcast to 'y' [2, 3]\n");
}

TEST(MatMulAddToGemm, NearMissABiasOfUnknownLength) {
  // A bias of length B might be 1 or 3 or another: not proven to broadcast.
  EXPECT_EQ(refusal<fusekit::rules::matmul_add_to_gemm>(linear_with({.bias = {"B"}})),
            "Add 'Add_1': input 1 of Add 'Add_1': graph input 'bias' is [B], not proven to "
            "broadcast to 'y' [2, 3]\n");
}

// ---- BatchNormalization into Conv

struct conv_bn {
  std::int64_t opset = 15;
  bool conv_bias = true, training = false, gamma_per_input_channel = false;
  dtype type = dtype::float32;
};

fusekit::model conv_bn_with(const conv_bn& c) {
  model_builder b(c.opset);
  auto x = b.input("x", c.type, {1, 2, 5, 5});
  auto w = b.initializer("w", c.type, {3, 2, 1, 1}, {1, 2, 3, 4, 5, 6});
  std::vector<value> conv_in{x, w};
  if (c.conv_bias) conv_in.push_back(b.initializer("b", c.type, {3}, {0.5, -1, 2}));
  auto conv = b.op("Conv", conv_in, {{"kernel_shape", i64s{1, 1}}, {"pads", i64s{0, 0, 0, 0}}});
  const std::int64_t n = c.gamma_per_input_channel ? 2 : 3;
  auto vec = [&](std::string name, double v) {
    return b.initializer(name, c.type, {n}, std::vector<double>(std::size_t(n), v));
  };
  std::vector<fusekit::build::attr> attrs{{"epsilon", 1e-3}};
  auto bn = c.training
                ? b.op("BatchNormalization",
                       {conv, vec("gamma", 2), vec("beta", 0.25), vec("mean", 1), vec("var", 4)},
                       {{"epsilon", 1e-3}, {"training_mode", 1}})
                : b.op("BatchNormalization",
                       {conv, vec("gamma", 2), vec("beta", 0.25), vec("mean", 1), vec("var", 4)},
                       {{"epsilon", 1e-3}});
  b.output(bn, c.type, {1, 3, 5, 5});
  return b.build_model();
}

TEST(FoldBatchNormIntoConv, WeightsAndBiasTakeTheNormalization) {
  fusekit::model m = conv_bn_with({});
  const auto report = fuse<fusekit::rules::batch_normalization_into_conv>(m);
  ASSERT_EQ(m.proto.graph().node_size(), 1);
  const auto& conv = m.proto.graph().node(0);
  EXPECT_EQ(conv.op_type(), "Conv");
  EXPECT_EQ(conv.attribute_size(), 2);  // kernel_shape and pads, copied
  // s = 2/√(4 + 1e-3); W' = W·s; b' = (b − 1)·s + 0.25
  const fusekit::graph g(m);
  const double s = 2 / std::sqrt(4.001);
  const fusekit::array w(g, g.constant_tensor(g.input(0, 1)));
  const fusekit::array bias(g, g.constant_tensor(g.input(0, 2)));
  EXPECT_FLOAT_EQ(w[5], float(6 * s));
  EXPECT_FLOAT_EQ(bias[1], float(-2 * s + 0.25));
  EXPECT_EQ(m.proto.graph().initializer_size(), 2);  // the old ones went with their readers
  fusekit::rewrite::check_invariants(m);
}

TEST(FoldBatchNormIntoConv, AConvWithoutBiasGetsOne) {
  fusekit::model m = conv_bn_with({.conv_bias = false});
  fuse<fusekit::rules::batch_normalization_into_conv>(m);
  ASSERT_EQ(m.proto.graph().node_size(), 1);
  EXPECT_EQ(m.proto.graph().node(0).input_size(), 3);
}

TEST(FoldBatchNormIntoConv, Float16IsFoldedInItsOwnType) {
  fusekit::model m = conv_bn_with({.type = dtype::float16});
  fuse<fusekit::rules::batch_normalization_into_conv>(m);
  ASSERT_EQ(m.proto.graph().node_size(), 1);
  for (const auto& t : m.proto.graph().initializer()) EXPECT_EQ(t.data_type(), int(dtype::float16));
}

TEST(FoldBatchNormIntoConv, BeforeOpset14ThereIsNoTrainingModeToAskFor) {
  // BatchNormalization-9 runs in inference mode only: training_mode(0) holds of it.
  fusekit::model m = conv_bn_with({.opset = 9});
  fuse<fusekit::rules::batch_normalization_into_conv>(m);
  EXPECT_EQ(nodes_of(m).substr(0, 5), "Conv(");
}

TEST(FoldBatchNormIntoConv, NearMissTrainingMode) {
  // In training mode the statistics are the batch's, not the constants.
  EXPECT_EQ(
      refusal<fusekit::rules::batch_normalization_into_conv>(conv_bn_with({.training = true})),
      "BatchNormalization 'BatchNormalization_1': BatchNormalization "
      "'BatchNormalization_1': training_mode = 1, expected 0\n");
}

TEST(FoldBatchNormIntoConv, NearMissStatisticsOfAnotherLength) {
  // Two numbers for three output channels: no channel's factor is known.
  EXPECT_EQ(
      refusal<fusekit::rules::batch_normalization_into_conv>(
          conv_bn_with({.gamma_per_input_channel = true})),
      "BatchNormalization 'BatchNormalization_1': input 1 of BatchNormalization "
      "'BatchNormalization_1': initializer 'gamma': dim 0 is not equal to dim 0 of 'w': [2] vs "
      "[3, 2, 1, 1]\n");
}

}  // namespace
