// Specifications of the BatchNormalization folds into a ConvTranspose and a Gemm
// (rules/fusekit/rules/batch_normalization_folding.hpp): the weight scaled along the output
// channels, the bias shifted, and the look-alikes left as they were with the reason. The fold into
// a Conv is specified beside the passes it was written with (examples/passes/passes_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "fusekit/graph/model_builder.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "fusekit/rewrite/invariants.hpp"
#include "fusekit/rules/batch_normalization_folding.hpp"
#include "test_support.hpp"

namespace {

using fusekit::dtype;
using fusekit::build::model_builder;
using fusekit::build::value;
using fusekit::rules::batch_normalization_into_conv_transpose;
using fusekit::rules::batch_normalization_into_gemm;
using fusekit::testing::fuse_compiled;

// s = 2/√(4 + 1e-3) for every channel; b' = (b − μ)·s + β with μ 1 and β 0.25.
const double s = 2 / std::sqrt(4.001);

// The statistics of `n` channels, and the norm of `x` they give.
value normalized(model_builder& b, value x, std::int64_t n) {
  auto vec = [&](std::string name, double v) {
    return b.initializer(name, dtype::float32, {n}, std::vector<double>(std::size_t(n), v));
  };
  return b.op("BatchNormalization",
              {x, vec("gamma", 2), vec("beta", 0.25), vec("mean", 1), vec("var", 4)},
              {{"epsilon", 1e-3}}, {.name = "norm"});
}

// The elements of input `slot` of the model's only node, a constant.
fusekit::array input_of(const fusekit::model& m, std::size_t slot) {
  const fusekit::graph g(m);
  return fusekit::array(g, g.constant_tensor(g.input(0, slot)));
}

// Runs the rule, expects the model unchanged, and returns the near misses' reasons.
template <class Rule>
std::string refusal(fusekit::model m) {
  const std::string before = m.proto.SerializeAsString();
  const auto report = fuse_compiled<Rule>(m);
  EXPECT_EQ(m.proto.SerializeAsString(), before);
  std::string reasons;
  for (const auto& n : report.near_misses) reasons += n.anchor + ": " + n.reason + "\n";
  return reasons;
}

// ---- ConvTranspose: W [C_in, C_out / group, k, k], the output channels its dim 1 (one group)

struct conv_transpose_bn {
  std::int64_t group = 1;
  std::int64_t statistics = 3;  // as many as the output channels
  bool bias = true;

  fusekit::model build() const {
    model_builder b(17);
    auto x = b.input("x", dtype::float32, {1, 3, 4, 4});
    const std::int64_t out_per_group = 3 / group;
    std::vector<double> w(std::size_t(3 * out_per_group * 4));
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = double(i + 1);
    std::vector<value> in{x, b.initializer("w", dtype::float32, {3, out_per_group, 2, 2}, w)};
    if (bias) in.push_back(b.initializer("b", dtype::float32, {3}, {0.5, -1, 2}));
    auto up = b.op("ConvTranspose", in,
                   {{"kernel_shape", std::vector<std::int64_t>{2, 2}},
                    {"strides", std::vector<std::int64_t>{2, 2}},
                    {"group", group}},
                   {.name = "up"});
    b.output(normalized(b, up, statistics), dtype::float32, {1, 3, 8, 8});
    return b.build_model();
  }
};

TEST(BatchNormIntoConvTranspose, TheWeightScalesAlongItsOutputChannels) {
  fusekit::model m = conv_transpose_bn{}.build();
  fuse_compiled<batch_normalization_into_conv_transpose>(m);
  ASSERT_EQ(m.proto.graph().node_size(), 1);
  const auto& up = m.proto.graph().node(0);
  EXPECT_EQ(up.op_type(), "ConvTranspose");
  EXPECT_EQ(up.attribute_size(), 3);  // kernel_shape, strides and group, copied
  // W[1, 2, 1, 1] is element 1·12 + 2·4 + 3 = 23, holding 24; the bias of channel 1 was −1.
  EXPECT_FLOAT_EQ(input_of(m, 1)[23], float(24 * s));
  EXPECT_FLOAT_EQ(input_of(m, 2)[1], float(-2 * s + 0.25));
  fusekit::rewrite::check_invariants(m);
}

TEST(BatchNormIntoConvTranspose, AConvTransposeWithoutBiasGetsOne) {
  fusekit::model m = conv_transpose_bn{.bias = false}.build();
  fuse_compiled<batch_normalization_into_conv_transpose>(m);
  ASSERT_EQ(m.proto.graph().node_size(), 1);
  EXPECT_FLOAT_EQ(input_of(m, 2)[0], float(-s + 0.25));
}

TEST(BatchNormIntoConvTranspose, NearMisses) {
  // Three groups: each group's output channels are a block of W's dims 0 and 1, no one axis.
  EXPECT_EQ(refusal<batch_normalization_into_conv_transpose>(conv_transpose_bn{.group = 3}.build()),
            "BatchNormalization 'norm': input 0 of BatchNormalization 'norm': ConvTranspose 'up': "
            "group = 3, expected 1\n");
  // Two numbers for three output channels: no channel's factor is known.
  EXPECT_EQ(
      refusal<batch_normalization_into_conv_transpose>(conv_transpose_bn{.statistics = 2}.build()),
      "BatchNormalization 'norm': input 1 of BatchNormalization 'norm': initializer 'gamma': dim "
      "0 is not equal to dim 1 of 'w': [2] vs [3, 3, 2, 2]\n");
}

// ---- Gemm: a [M, K] by W [K, N] (or [N, K] with transB), the output channels the N columns

struct gemm_bn {
  bool transposed = false;
  double beta = 0.5;
  bool bias = true;
  bool bias_a_row = false;  // c as [1, N], which Gemm broadcasts as well
  std::int64_t statistics = 3;
  bool weight_given = true;  // W a constant, else a graph input

  fusekit::model build() const {
    model_builder b(17);
    auto a = b.input("a", dtype::float32, {"M", 2});
    std::vector<double> w{1, 2, 3, 4, 5, 6};  // [2, 3], or [3, 2] transposed
    const std::vector<std::int64_t> w_dims =
        transposed ? std::vector<std::int64_t>{3, 2} : std::vector<std::int64_t>{2, 3};
    std::vector<value> in{a, weight_given ? b.initializer("w", dtype::float32, w_dims, w)
                                          : b.input("w", dtype::float32, {w_dims[0], w_dims[1]})};
    if (bias)
      in.push_back(
          b.initializer("c", dtype::float32,
                        bias_a_row ? std::vector<std::int64_t>{1, 3} : std::vector<std::int64_t>{3},
                        {0.5, -1, 2}));
    auto product =
        b.op("Gemm", in, {{"alpha", 2.0}, {"beta", beta}, {"transB", transposed ? 1 : 0}},
             {.name = "linear"});
    b.output(normalized(b, product, statistics), dtype::float32, {"M", 3});
    return b.build_model();
  }
};

TEST(BatchNormIntoGemm, TheColumnsScaleAndTheBiasTakesGemmsBeta) {
  fusekit::model m = gemm_bn{}.build();
  fuse_compiled<batch_normalization_into_gemm>(m);
  ASSERT_EQ(m.proto.graph().node_size(), 1);
  const auto& gemm = m.proto.graph().node(0);
  EXPECT_EQ(gemm.op_type(), "Gemm");
  const fusekit::graph g(m);
  EXPECT_EQ(g.attribute_float(0, "alpha"), 2.0f);  // α scales the product alone: kept
  EXPECT_EQ(g.attribute_float(0, "beta"), 1.0f);
  // W [2, 3]: column 2 of row 1 held 6. c' = (0.5·c − 1)·s + 0.25, channel 1's c −1.
  EXPECT_FLOAT_EQ(input_of(m, 1)[5], float(6 * s));
  EXPECT_FLOAT_EQ(input_of(m, 2)[1], float(-1.5 * s + 0.25));
  fusekit::rewrite::check_invariants(m);
}

TEST(BatchNormIntoGemm, ATransposedWeightScalesAlongItsRows) {
  fusekit::model m = gemm_bn{.transposed = true, .bias = false}.build();
  fuse_compiled<batch_normalization_into_gemm>(m);
  ASSERT_EQ(m.proto.graph().node_size(), 1);
  // W [3, 2]: row 2 is output channel 2, elements 4 and 5 holding 5 and 6.
  EXPECT_FLOAT_EQ(input_of(m, 1)[4], float(5 * s));
  EXPECT_FLOAT_EQ(input_of(m, 2)[2], float(-s + 0.25));
}

TEST(BatchNormIntoGemm, NearMisses) {
  // W a graph input: its columns are no constants to scale.
  EXPECT_EQ(refusal<batch_normalization_into_gemm>(gemm_bn{.weight_given = false}.build()),
            "BatchNormalization 'norm': input 1 of Gemm 'linear', input 0 of BatchNormalization "
            "'norm': expected constant 'w', graph input 'w' is not a constant\n");
  // c of one row, which Gemm broadcasts too: the fold writes a vector per channel.
  EXPECT_EQ(refusal<batch_normalization_into_gemm>(gemm_bn{.bias_a_row = true}.build()),
            "BatchNormalization 'norm': input 2 of Gemm 'linear', input 0 of BatchNormalization "
            "'norm': initializer 'c' is not proven rank 1: it is [1, 3]\n");
  // Two numbers for three columns.
  EXPECT_EQ(refusal<batch_normalization_into_gemm>(gemm_bn{.statistics = 2}.build()),
            "BatchNormalization 'norm': input 1 of BatchNormalization 'norm': initializer 'gamma': "
            "dim 0 is not equal to dim 1 of 'product': [2] vs [M, 3]\n");
}

}  // namespace
