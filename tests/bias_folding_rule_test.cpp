// Specifications of bias-into-conv and bias-into-gemm (rules/fusekit/rules/bias_folding.hpp): a
// constant added after a Conv or a Gemm becomes part of its bias, and the look-alikes are left as
// they were with the reason. matmul-add-to-gemm, of the same family, is specified beside the
// passes it was written with (examples/passes/passes_test.cpp).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fusekit/graph/array.hpp"
#include "fusekit/graph/model_builder.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "fusekit/rewrite/invariants.hpp"
#include "fusekit/rules/bias_folding.hpp"
#include "test_support.hpp"

namespace {

using fusekit::dtype;
using fusekit::build::model_builder;
using fusekit::build::value;
using fusekit::rules::bias_into_conv;
using fusekit::rules::bias_into_gemm;
using fusekit::testing::fuse_compiled;

// The elements of input `slot` of the model's only node, a constant; empty where there are more
// nodes.
std::vector<double> input_of(const fusekit::model& m, std::size_t slot) {
  if (m.proto.graph().node_size() != 1) return {};
  const fusekit::graph g(m);
  const fusekit::array a(g, g.constant_tensor(g.input(0, slot)));
  return a.values();
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

// ---- Conv [1, 3, 4, 4] → [1, 2, 4, 4], and a constant added to it

struct conv_add {
  std::vector<std::int64_t> c{1, 2, 1, 1};
  std::vector<double> values{10, 20};
  bool conv_bias = true, constant_first = false;

  fusekit::model build() const {
    model_builder b(17);
    auto x = b.input("x", dtype::float32, {1, 3, 4, 4});
    std::vector<value> in{
        x, b.initializer("w", dtype::float32, {2, 3, 1, 1}, std::vector<double>(6, 0.5))};
    if (conv_bias) in.push_back(b.initializer("b", dtype::float32, {2}, {1, 2}));
    auto y =
        b.op("Conv", in, {{"kernel_shape", std::vector<std::int64_t>{1, 1}}}, {.name = "conv"});
    auto constant = b.initializer("c", dtype::float32, c, values);
    b.output(
        b.op("Add",
             constant_first ? std::vector<value>{constant, y} : std::vector<value>{y, constant}, {},
             {.name = "add"}),
        dtype::float32, {1, 2, 4, 4});
    return b.build_model();
  }
};

std::vector<double> conv_bias_after(const conv_add& c) {
  fusekit::model m = c.build();
  fuse_compiled<bias_into_conv>(m);
  fusekit::rewrite::check_invariants(m);
  return input_of(m, 2);
}

TEST(BiasIntoConv, AVectorPerChannelJoinsTheConvsBias) {
  EXPECT_EQ(conv_bias_after({}), (std::vector<double>{11, 22}));
  EXPECT_EQ(conv_bias_after({.c = {2, 1, 1}, .constant_first = true}),
            (std::vector<double>{11, 22}));
}

TEST(BiasIntoConv, AConvWithoutBiasTakesTheConstant) {
  EXPECT_EQ(conv_bias_after({.conv_bias = false}), (std::vector<double>{10, 20}));
}

TEST(BiasIntoConv, AScalarIsAddedToEveryChannel) {
  EXPECT_EQ(conv_bias_after({.c = {}, .values = {5}}), (std::vector<double>{6, 7}));
  EXPECT_EQ(conv_bias_after({.c = {1, 1, 1, 1}, .values = {5}}), (std::vector<double>{6, 7}));
}

TEST(BiasIntoConv, NearMisses) {
  // A number per column is no number per channel: the Conv's bias cannot hold it.
  EXPECT_EQ(refusal<bias_into_conv>(conv_add{.c = {4}, .values = {1, 2, 3, 4}}.build()),
            "Add 'add': input 1 of Add 'add': initializer 'c': not one number per output "
            "channel\n");
  // [2, 1, 1, 1] lays along the batch: it broadcasts the output to a batch of two.
  EXPECT_EQ(refusal<bias_into_conv>(conv_add{.c = {2, 1, 1, 1}}.build()),
            "Add 'add': input 1 of Add 'add': initializer 'c' is [2, 1, 1, 1], which does not "
            "broadcast to 'y' [1, 2, 4, 4]\n");
}

// ---- Gemm [2, 4] · [4, 3], and a constant added to it

struct gemm_add {
  std::vector<std::int64_t> d{3};
  std::vector<double> values{10, 20, 30};
  bool gemm_bias = true;

  fusekit::model build() const {
    model_builder b(17);
    auto a = b.input("a", dtype::float32, {2, 4});
    std::vector<value> in{a,
                          b.initializer("w", dtype::float32, {4, 3}, std::vector<double>(12, 0.5))};
    if (gemm_bias) in.push_back(b.initializer("c", dtype::float32, {3}, {1, 2, 3}));
    auto y = b.op("Gemm", in, {{"alpha", 2.0}, {"beta", 0.5}}, {.name = "gemm"});
    b.output(b.op("Add", {y, b.initializer("d", dtype::float32, d, values)}, {}, {.name = "add"}),
             dtype::float32, {2, 3});
    return b.build_model();
  }
};

TEST(BiasIntoGemm, TheConstantJoinsCScaledByBeta) {
  fusekit::model m = gemm_add{}.build();
  fuse_compiled<bias_into_gemm>(m);
  fusekit::rewrite::check_invariants(m);
  // c' = β·c + d, written with β 1; α stays.
  EXPECT_EQ(input_of(m, 2), (std::vector<double>{10.5, 21, 31.5}));
  const fusekit::graph g(m);
  EXPECT_EQ(g.attribute_float(0, "beta"), 1.0f);
  EXPECT_EQ(g.attribute_float(0, "alpha"), 2.0f);
}

TEST(BiasIntoGemm, AGemmWithoutCTakesTheConstantAsItIs) {
  // A column [2, 1] broadcasts to the product as C does.
  fusekit::model m = gemm_add{.d = {2, 1}, .values = {7, 8}, .gemm_bias = false}.build();
  fuse_compiled<bias_into_gemm>(m);
  EXPECT_EQ(input_of(m, 2), (std::vector<double>{7, 8}));
}

TEST(BiasIntoGemm, NearMissAConstantThatGrowsTheProduct) {
  // [2, 2, 3] broadcasts the [2, 3] product to three dims: no C of a Gemm.
  EXPECT_EQ(refusal<bias_into_gemm>(
                gemm_add{.d = {2, 2, 3}, .values = std::vector<double>(12, 1)}.build()),
            "Add 'add': input 1 of Add 'add': initializer 'd' is [2, 2, 3], which does not "
            "broadcast to 'y' [2, 3]\n");
}

}  // namespace
