// The example rule's test: a synthetic GELU it must fuse, then look-alikes it must leave alone.
#include "gelu_rule.hpp"

#include <gtest/gtest.h>

#include <string>

#include "fusekit/graph/model_builder.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "gelu_sample.hpp"

namespace {

using fusekit::dtype;
using fusekit::build::model_builder;
using fusekit::rewrite::fuse;

TEST(GeluRule, FusesTheErfGelu) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {2, 8});
  auto erf = b.op("Erf", {b.op("Div", {x, b.scalar(dtype::float32, 1.4142135)})});
  auto y = b.op("Mul", {b.op("Mul", {x, b.scalar(dtype::float32, 0.5)}),
                        b.op("Add", {erf, b.scalar(dtype::float32, 1.0)})});
  b.output(y, dtype::float32, {2, 8});
  fusekit::model m = b.build_model();
  const auto report = fuse<my_rules::gelu>(m);
  ASSERT_EQ(m.proto.graph().node_size(), 1);
  const auto& gelu = m.proto.graph().node(0);
  EXPECT_EQ(gelu.domain() + "." + gelu.op_type() + "(" + gelu.input(0) + ") -> " + gelu.output(0),
            "com.microsoft.Gelu(x) -> " + y.name);
  EXPECT_EQ(report.fusions.at(0).params.dump(), R"({"form":0})");
}

// ------------------------------------------------------------------------------------------------
// Below: every accepted form, then near misses, each with the reason the report gives for it.

TEST(GeluRule, FusesEveryFormOfTheSample) {
  fusekit::model m{.proto = my_rules::sample::make_gelu_model(), .path = {}};
  const auto report = fuse<my_rules::gelu>(m);
  ASSERT_EQ(report.fusions.size(), std::size_t(my_rules::sample::gelu_count));
  std::string forms;
  for (const auto& f : report.fusions) forms += f.params["form"].dump();
  EXPECT_EQ(forms, "01120");
  for (const auto& node : m.proto.graph().node()) EXPECT_EQ(node.op_type(), "Gelu");
  EXPECT_EQ(m.proto.graph().initializer_size(), 0);
  EXPECT_TRUE(report.near_misses.empty());
  fusekit::rewrite::check_invariants(m);
}

// A GELU built like the one above, with one thing changed.
struct change {
  double half = 0.5;
  double sqrt2 = 1.4142135;
  dtype type = dtype::float32;
  bool erf_read_elsewhere = false;
  bool add_is_output = false;
};

fusekit::model gelu_with(change c) {
  model_builder b;
  auto x = b.input("x", c.type, {2, 8});
  auto erf = b.op("Erf", {b.op("Div", {x, b.scalar(dtype::float32, c.sqrt2)})});
  auto add = b.op("Add", {erf, b.scalar(dtype::float32, 1.0)});
  b.output(b.op("Mul", {b.op("Mul", {x, b.scalar(dtype::float32, c.half)}), add}), c.type);
  if (c.erf_read_elsewhere) b.output(b.op("Neg", {erf}));
  if (c.add_is_output) b.output(add);
  return b.build_model();
}

// Fuses, expects the model to come out unchanged, and returns the reasons of the near misses.
std::string refusal(fusekit::model m) {
  const std::string before = m.proto.SerializeAsString();
  const auto report = fuse<my_rules::gelu>(m);
  EXPECT_EQ(m.proto.SerializeAsString(), before);
  EXPECT_TRUE(report.fusions.empty());
  std::string reasons;
  for (const auto& n : report.near_misses) reasons += n.anchor + ": " + n.reason + "\n";
  return reasons;
}

TEST(GeluRuleNearMiss, ScaleIsNotAHalf) {
  // x·0.6·(1 + erf(x/√2)) is not GELU.
  EXPECT_EQ(
      refusal(gelu_with({.half = 0.6})),
      "Mul 'Mul_7': input 1 of Mul 'Mul_6', input 0 of Mul 'Mul_7': constant scalar 'half' is "
      "0.6, expected 0.5\n");
}

TEST(GeluRuleNearMiss, DivisorIsNotSqrt2) {
  // erf(x/2) is not the normal CDF.
  EXPECT_EQ(refusal(gelu_with({.sqrt2 = 2})),
            "Mul 'Mul_7': input 1 of Div 'Div_1', input 0 of Erf 'Erf_2', input 0 of Add 'Add_4', "
            "input 1 of Mul 'Mul_7': constant scalar 'sqrt2' is 2, expected 1.4142136\n");
}

TEST(GeluRuleNearMiss, IntegerInput) {
  // Gelu is defined for float types only. Every read of x fails; the one told is where the match
  // got furthest, past the Add, Erf and Div of the CDF.
  EXPECT_EQ(refusal(gelu_with({.type = dtype::int32})),
            "Mul 'Mul_7': input 0 of Div 'Div_1', input 0 of Erf 'Erf_2', input 0 of Add 'Add_4', "
            "input 1 of Mul 'Mul_7': graph input 'x' has dtype int32, expected "
            "float32|float16|bfloat16\n");
}

TEST(GeluRuleNearMiss, ErfAlsoReadElsewhere) {
  // Another node reads the Erf: fusing could not remove it, so the rule refuses.
  EXPECT_EQ(
      refusal(gelu_with({.erf_read_elsewhere = true})),
      "Mul 'Mul_7': output of Erf 'Erf_2' is also read by Neg 'Neg_8', outside the pattern\n");
}

TEST(GeluRuleNearMiss, InteriorValueIsAGraphOutput) {
  // 1 + erf(x/√2) is itself a model output, so it cannot be fused away.
  EXPECT_EQ(refusal(gelu_with({.add_is_output = true})),
            "Mul 'Mul_7': output of Add 'Add_4' is a graph output, so it cannot be fused away\n");
}

}  // namespace
