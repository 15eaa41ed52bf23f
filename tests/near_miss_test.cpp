// Which failed anchors a rule reports as near misses, and which reason each carries: the policy
// of rewrite/rule.hpp, and an explanation that does not depend on the order a pattern lists its
// commutative operands or any_of branches in.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fusekit/graph/model_builder.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/driver.hpp"

namespace {

using namespace fusekit::pattern;
using fusekit::dtype;
using fusekit::graph;
using fusekit::model;
using fusekit::node_id;
using fusekit::build::attr;
using fusekit::build::model_builder;
using fusekit::rewrite::emitter;
using fusekit::rewrite::fuse;

void replace_by_x(const auto& m, emitter& e) { e.replace_root(e.value(get<"x">(m))); }

std::vector<std::string> reasons(const fusekit::rewrite::report& r) {
  std::vector<std::string> out;
  for (const auto& y : r.near_misses) out.push_back(y.reason);
  return out;
}

// A LayerNormalization over the last axis: a check on the root itself.
struct last_axis_norm {
  static constexpr std::string_view name = "last-axis-norm";
  static constexpr auto pattern =
      op<"LayerNormalization">(capture<"x">, capture<"scale">, maybe(capture<"bias">))
          .attr<"axis">(last_axis);
  static void emit(const graph&, const auto& m, emitter& e) { replace_by_x(m, e); }
};

model layer_norm_model(std::int64_t axis) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {2, 4, 8});
  auto scale = b.initializer("scale", dtype::float32, {8}, std::vector<double>(8, 1.0));
  b.output(b.op("LayerNormalization", {x, scale}, {attr("axis", axis)}), dtype::float32);
  return b.build_model();
}

TEST(NearMiss, ARefusalAtTheRootIsReported) {
  model m = layer_norm_model(1);
  const auto report = fuse<last_axis_norm>(m);
  EXPECT_EQ(reasons(report), std::vector<std::string>{
                                 "LayerNormalization 'LayerNormalization_0': axis = 1, expected "
                                 "the last axis"});
}

// x / (1 + e^-x) written as x · Reciprocal(…): anchored on any Mul.
struct reciprocal_product {
  static constexpr std::string_view name = "reciprocal-product";
  static constexpr auto pattern =
      commutative(op<"Mul">(capture<"x">, op<"Reciprocal">(capture<"d">)));
  static void emit(const graph&, const auto& m, emitter& e) { replace_by_x(m, e); }
};

model silu_model() {
  model_builder b;
  auto x = b.input("x", dtype::float32, {2, 4});
  b.output(b.op("Mul", {x, b.op("Sigmoid", {x})}), dtype::float32);
  return b.build_model();
}

TEST(NearMiss, AGenericRootWhoseInputIsAnotherOpIsNone) {
  // A SiLU's Mul is no reciprocal product that went wrong: nothing past the root matched.
  model m = silu_model();
  EXPECT_TRUE(fuse<reciprocal_product>(m).near_misses.empty());
}

TEST(NearMiss, ExplainListsEveryAnchor) {
  model m = silu_model();
  const auto report = fuse<reciprocal_product>(m, {.explain = true});
  EXPECT_EQ(reasons(report),
            std::vector<std::string>{"input 0 of Mul 'Mul_1': expected Reciprocal, found graph "
                                     "input 'x'"});
}

// (a · b) · Reciprocal(d): two Muls deep before the Reciprocal.
template <std::size_t Depth>
struct scaled_reciprocal_product {
  static constexpr std::string_view name = "scaled-reciprocal-product";
  static constexpr std::size_t near_miss_depth = Depth;
  static constexpr auto pattern =
      op<"Mul">(op<"Mul">(capture<"x">, capture<"w">), op<"Reciprocal">(capture<"d">));
  static void emit(const graph&, const auto& m, emitter& e) { replace_by_x(m, e); }
};

model gated_silu_model() {
  model_builder b;
  auto x = b.input("x", dtype::float32, {2, 4});
  auto up = b.input("up", dtype::float32, {2, 4});
  b.output(b.op("Mul", {b.op("Mul", {x, up}), b.op("Sigmoid", {x})}), dtype::float32);
  return b.build_model();
}

TEST(NearMiss, TheDepthCountsTheNodesAFailureGotInto) {
  // Two nodes matched before the Sigmoid: a near miss by default ...
  model m = gated_silu_model();
  EXPECT_EQ(reasons(fuse<scaled_reciprocal_product<2>>(m)),
            std::vector<std::string>{
                "input 1 of Mul 'Mul_2': expected Reciprocal, found Sigmoid 'Sigmoid_1'"});
  // ... and none for a rule that says two Muls are not yet its block.
  EXPECT_TRUE(fuse<scaled_reciprocal_product<3>>(m).near_misses.empty());
}

TEST(NearMiss, AGraphWithoutAnOpEveryMatchHoldsIsStillExplained) {
  // No Reciprocal anywhere: the driver tries no match at any Mul, and yet explains the one that
  // may be a near miss, as the match would have failed.
  model m = gated_silu_model();
  constexpr auto required = required_ops_of(scaled_reciprocal_product<2>::pattern);
  EXPECT_FALSE(holds_every(graph(m), required));
  EXPECT_EQ(reasons(fuse<scaled_reciprocal_product<2>>(m)),
            std::vector<std::string>{
                "input 1 of Mul 'Mul_2': expected Reciprocal, found Sigmoid 'Sigmoid_1'"});
}

// The same product, whose anchors the rule knows to be its block whatever else they read.
struct every_mul_is_its_block : scaled_reciprocal_product<3> {
  static bool is_its_block(const graph&, node_id) { return true; }
};

TEST(NearMiss, AnAnchorThatIsSurelyTheBlockIsReportedHoweverEarlyItFailed) {
  model m = silu_model();
  EXPECT_EQ(
      reasons(fuse<every_mul_is_its_block>(m)),
      std::vector<std::string>{"input 0 of Mul 'Mul_1': expected Mul, found graph input 'x'"});
}

// A rule that resembles nothing reports nothing, however far a match got.
struct resembles_nothing : scaled_reciprocal_product<1> {
  static bool resembles(const graph&, node_id) { return false; }
};

TEST(NearMiss, AnAnchorThatResemblesNothingIsNone) {
  model m = gated_silu_model();
  EXPECT_TRUE(fuse<resembles_nothing>(m).near_misses.empty());
}

// Bias + MatMul, the bias of rank 1, with the operands in either order.
constexpr auto bias = capture<"bias">.proven_rank<1>();
constexpr auto projection = op<"MatMul">(capture<"x">, capture<"w">);
struct bias_first {
  static constexpr std::string_view name = "bias-first";
  static constexpr auto pattern = commutative(op<"Add">(bias, projection));
  static void emit(const graph&, const auto& m, emitter& e) { replace_by_x(m, e); }
};
struct bias_second {
  static constexpr std::string_view name = "bias-second";
  static constexpr auto pattern = commutative(op<"Add">(projection, bias));
  static void emit(const graph&, const auto& m, emitter& e) { replace_by_x(m, e); }
};

model projection_with_rank_2_bias() {
  model_builder b;
  auto x = b.input("x", dtype::float32, {2, 4, 8});
  auto w = b.initializer("w", dtype::float32, {8, 8}, std::vector<double>(64, 0.5));
  auto bias = b.initializer("bias", dtype::float32, {1, 8}, std::vector<double>(8, 0.0));
  b.output(b.op("Add", {b.op("MatMul", {x, w}), bias}), dtype::float32);
  return b.build_model();
}

TEST(NearMiss, TheReasonDoesNotDependOnTheOrderOfCommutativeOperands) {
  // Whichever operand the pattern lists first, the reason is the bias, past the MatMul that did
  // match: not the MatMul's output failing to be a rank-1 bias.
  const std::string expected =
      "input 1 of Add 'Add_1': initializer 'bias' is not proven rank 1: it is [1, 8]";
  model a = projection_with_rank_2_bias();
  model b = projection_with_rank_2_bias();
  EXPECT_EQ(reasons(fuse<bias_first>(a)), std::vector<std::string>{expected});
  EXPECT_EQ(reasons(fuse<bias_second>(b)), std::vector<std::string>{expected});
}

// Neg of Relu or Sigmoid, the branches in either order.
struct relu_or_sigmoid {
  static constexpr std::string_view name = "relu-or-sigmoid";
  static constexpr std::size_t near_miss_depth = 1;
  static constexpr auto pattern =
      op<"Neg">(any_of(op<"Relu">(capture<"x">), op<"Sigmoid">(capture<"x">)));
  static void emit(const graph&, const auto& m, emitter& e) { replace_by_x(m, e); }
};
struct sigmoid_or_relu {
  static constexpr std::string_view name = "sigmoid-or-relu";
  static constexpr std::size_t near_miss_depth = 1;
  static constexpr auto pattern =
      op<"Neg">(any_of(op<"Sigmoid">(capture<"x">), op<"Relu">(capture<"x">)));
  static void emit(const graph&, const auto& m, emitter& e) { replace_by_x(m, e); }
};

TEST(NearMiss, TheReasonDoesNotDependOnTheOrderOfAnyOfBranches) {
  // Both branches fail at the same place: the reason is the same whichever is listed first.
  auto make = [] {
    model_builder b;
    auto x = b.input("x", dtype::float32, {4});
    b.output(b.op("Neg", {b.op("Tanh", {x})}), dtype::float32);
    return b.build_model();
  };
  model a = make();
  model b = make();
  const auto first = reasons(fuse<relu_or_sigmoid>(a));
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first, reasons(fuse<sigmoid_or_relu>(b)));
  EXPECT_EQ(first[0], "input 0 of Neg 'Neg_1': expected Relu, found Tanh 'Tanh_0'");
}

}  // namespace
