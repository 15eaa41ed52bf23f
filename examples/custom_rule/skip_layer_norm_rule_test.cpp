// The second example rule's test: the forms it must fuse, then look-alikes it must leave alone,
// each with the reason the report gives.
#include "skip_layer_norm_rule.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fusekit/graph/model_builder.hpp"
#include "fusekit/rewrite/driver.hpp"

namespace {

using fusekit::dtype;
using fusekit::build::dim_spec;
using fusekit::build::model_builder;
using fusekit::build::value;
using fusekit::rewrite::fuse;

// A residual block, y = LayerNormalization(x (+ bias) + skip, gamma, beta), with one thing changed.
struct change {
  dtype type = dtype::float32;
  bool bias = true;
  bool beta = true;
  std::vector<std::int64_t> bias_dims = {4};
  std::vector<std::int64_t> gamma_dims = {4};
  std::vector<dim_spec> shape = {"B", "S", 4};  // of x, y and, unless skip_shape is given, skip
  std::vector<dim_spec> skip_shape = {};
  std::int64_t axis = -1;
  bool skip_reshaped = false;    // skip comes out of a Reshape to a shape known only at run time
  bool next_layer = false;       // a second block, whose residual is x + bias + skip
  bool sum_read_before = false;  // a node before the LayerNormalization reads x + bias + skip
  bool mean_read = false;        // the LayerNormalization's Mean is a graph output
};

// first, first + 0.25, …: weights that tell gamma, beta and the biases apart.
std::vector<double> ramp(const std::vector<std::int64_t>& dims, double first) {
  std::int64_t n = 1;
  for (std::int64_t d : dims) n *= d;
  std::vector<double> values;
  for (std::int64_t i = 0; i < n; ++i) values.push_back(first + 0.25 * double(i));
  return values;
}

fusekit::model block_with(change c) {
  model_builder b;
  const value x = b.input("x", c.type, c.shape);
  value skip = b.input("skip", c.type, c.skip_shape.empty() ? c.shape : c.skip_shape);
  if (c.skip_reshaped) skip = b.op("Reshape", {skip, b.input("shape", dtype::int64, {3})});
  auto output = [&](const value& v) { b.output(v, c.type, c.shape); };
  auto weight = [&](std::string name, std::vector<std::int64_t> dims, double first) {
    return b.initializer(std::move(name), c.type, dims, ramp(dims, first));
  };
  const value sum =
      b.op("Add", {skip, c.bias ? b.op("Add", {weight("bias", c.bias_dims, -1), x}) : x});
  if (c.sum_read_before) output(b.op("Neg", {sum}));
  // LayerNormalization(sum, gamma, beta?)
  std::vector<value> inputs{sum, weight("gamma", c.gamma_dims, 1)};
  if (c.beta) inputs.push_back(weight("beta", {4}, 0.5));
  const auto outs = b.ops("LayerNormalization", inputs, {{"axis", c.axis}, {"epsilon", 1e-6}},
                          {.outputs = c.mean_read ? 2 : 1});
  const value y = outs[0];
  if (c.mean_read) b.output(outs[1], dtype::float32, {"B", "S", 1});
  if (!c.next_layer) {
    output(y);
    return b.build_model();
  }
  const value linear =
      b.op("Add", {b.op("MatMul", {y, weight("w", {4, 4}, -2)}), weight("bias2", {4}, 0.1)});
  inputs[0] = b.op("Add", {sum, linear});
  output(b.op("LayerNormalization", inputs));
  return b.build_model();
}

// "Op(in, …) -> out, …" for each node, in graph order.
std::string nodes_of(const fusekit::model& m) {
  std::string text;
  for (const auto& n : m.proto.graph().node()) {
    text += n.op_type() + "(";
    for (int i = 0; i < n.input_size(); ++i) text += (i ? ", " : "") + n.input(i);
    text += ") ->";
    for (const auto& out : n.output()) text += " " + out;
    text += "\n";
  }
  return text;
}

TEST(SkipLayerNormRule, FoldsTheBiasAdd) {
  fusekit::model m = block_with({});
  const auto report = fuse<my_rules::skip_layer_norm>(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params.dump(), R"({"bias":true})");
  ASSERT_EQ(nodes_of(m),
            "SkipLayerNormalization(x, skip, gamma, beta, bias) -> LayerNormalization_2\n");
  const auto& fused = m.proto.graph().node(0);
  EXPECT_EQ(fused.domain(), "com.microsoft");
  EXPECT_FLOAT_EQ(fused.attribute(0).f(), 1e-6f);
  fusekit::rewrite::check_invariants(m);
}

TEST(SkipLayerNormRule, WithoutBiasOrBeta) {
  fusekit::model m = block_with({.bias = false, .beta = false});
  const auto report = fuse<my_rules::skip_layer_norm>(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params.dump(), R"({"bias":false})");
  // Input and skip are interchangeable, the kernel adds them: the first operand is the input.
  EXPECT_EQ(nodes_of(m), "SkipLayerNormalization(skip, x, gamma, , ) -> LayerNormalization_1\n");
  fusekit::rewrite::check_invariants(m);
}

TEST(SkipLayerNormRule, SumReadOnIsOutput3) {
  // The second block's residual reads the first one's sum: output 3 of the first fused op takes
  // its place, under its old name, and the Add goes. The second block folds the Linear's bias.
  fusekit::model m = block_with({.next_layer = true});
  const auto report = fuse<my_rules::skip_layer_norm>(m);
  ASSERT_EQ(report.fusions.size(), 2u);
  EXPECT_EQ(
      nodes_of(m),
      "SkipLayerNormalization(x, skip, gamma, beta, bias) -> LayerNormalization_2 "
      "skip-layer-norm/SkipLayerNormalization_0/out_1 "
      "skip-layer-norm/SkipLayerNormalization_0/out_2 Add_1\n"
      "MatMul(LayerNormalization_2, w) -> MatMul_3\n"
      "SkipLayerNormalization(MatMul_3, Add_1, gamma, beta, bias2) -> LayerNormalization_6\n");
  // The second LayerNormalization states no epsilon: it gets its default, not the fused op's.
  EXPECT_FLOAT_EQ(m.proto.graph().node(2).attribute(0).f(), 1e-5f);
  fusekit::rewrite::check_invariants(m);
}

TEST(SkipLayerNormRule, BiasOfRankTwoStaysAnAdd) {
  // ONNX Runtime takes a bias of rank 1 only. Checked in the pattern, a [1, 4] bias lets the
  // alternative without a bias match; a guard's refusal would have refused the whole block.
  fusekit::model m = block_with({.bias_dims = {1, 4}});
  const auto report = fuse<my_rules::skip_layer_norm>(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params.dump(), R"({"bias":false})");
  EXPECT_EQ(nodes_of(m),
            "Add(bias, x) -> Add_0\n"
            "SkipLayerNormalization(skip, Add_0, gamma, beta, ) -> LayerNormalization_2\n");
  fusekit::rewrite::check_invariants(m);
}

// ------------------------------------------------------------------------------------------------
// Near misses: the model stays as it was, and the report says why.

std::string refusal(fusekit::model m) {
  const std::string before = m.proto.SerializeAsString();
  const auto report = fuse<my_rules::skip_layer_norm>(m);
  EXPECT_EQ(m.proto.SerializeAsString(), before);
  EXPECT_TRUE(report.fusions.empty());
  std::string reasons;
  for (const auto& n : report.near_misses) reasons += n.anchor + ": " + n.reason + "\n";
  return reasons;
}

TEST(SkipLayerNormRuleNearMiss, AxisIsNotLast) {
  // Normalising over [S, 4] is not what the fused op does. The check is on the root, so the
  // report lists it however little else matched.
  EXPECT_EQ(refusal(block_with({.axis = 1})),
            "LayerNormalization 'LayerNormalization_2': LayerNormalization 'LayerNormalization_2': "
            "axis = 1, expected the last axis\n");
}

TEST(SkipLayerNormRuleNearMiss, Bfloat16) {
  // The fused op takes float and float16 only. Checked on the root, the refusal is reported.
  EXPECT_EQ(refusal(block_with({.type = dtype::bfloat16})),
            "LayerNormalization 'LayerNormalization_2': LayerNormalization 'LayerNormalization_2' "
            "has dtype bfloat16, expected float32|float16\n");
}

TEST(SkipLayerNormRuleNearMiss, RankFour) {
  // The kernel reads [batch, sequence, hidden] or [tokens, hidden].
  EXPECT_EQ(refusal(block_with({.shape = {2, "B", "S", 4}})),
            "LayerNormalization 'LayerNormalization_2': graph input 'x' is [2, B, S, 4], "
            "SkipLayerNormalization takes rank 2 or 3\n");
}

TEST(SkipLayerNormRuleNearMiss, SkipBroadcasts) {
  // Add broadcasts a [S, 4] skip over the batch; the fused op does not.
  EXPECT_EQ(refusal(block_with({.skip_shape = {"S", 4}})),
            "LayerNormalization 'LayerNormalization_2': graph input 'skip' is [S, 4] and graph "
            "input 'x' is [B, S, 4]: not the same shape\n");
}

TEST(SkipLayerNormRuleNearMiss, SkipDimsUnknown) {
  // Nothing proves the reshaped skip [B, S, 4]: unknown is never equal.
  EXPECT_EQ(refusal(block_with({.skip_reshaped = true})),
            "LayerNormalization 'LayerNormalization_3': Reshape 'Reshape_0' is [dim 0 of "
            "'Reshape_0', dim 1 of 'Reshape_0', dim 2 of 'Reshape_0'] and graph input 'x' is [B, "
            "S, 4]: not proven the same shape; dim 0 of 'Reshape_0' is unknown: Reshape "
            "'Reshape_0' reads input 1 'shape', whose element 0 is not folded: graph input "
            "'shape' is known only at run time\n");
}

TEST(SkipLayerNormRuleNearMiss, GammaOfRankTwo) {
  // LayerNormalization broadcasts a [1, 4] scale; the fused op takes a vector.
  EXPECT_EQ(refusal(block_with({.gamma_dims = {1, 4}})),
            "LayerNormalization 'LayerNormalization_2': gamma (initializer 'gamma') is [1, 4], "
            "SkipLayerNormalization takes a vector of the hidden size, [4]\n");
}

TEST(SkipLayerNormRuleNearMiss, SumReadBeforeTheLayerNorm) {
  // Output 3 is computed where the LayerNormalization was: a reader before it would read it
  // before it exists.
  EXPECT_EQ(refusal(block_with({.sum_read_before = true})),
            "LayerNormalization 'LayerNormalization_3': emit replaces 'Add_1', which Neg 'Neg_2' "
            "reads before the insertion point LayerNormalization 'LayerNormalization_3', nothing "
            "changed\n");
}

TEST(SkipLayerNormRuleNearMiss, MeanIsRead) {
  // Emit replaces Y alone: a root output still read without a replacement refuses the match.
  EXPECT_EQ(refusal(block_with({.mean_read = true})),
            "LayerNormalization 'LayerNormalization_2': emit gave no replacement for output "
            "'LayerNormalization_2_1', nothing changed\n");
}

}  // namespace
