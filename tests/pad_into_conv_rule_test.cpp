// Specifications of pad-into-conv (rules/fusekit/rules/pad_folding.hpp): a Pad of zeros on the
// spatial axes before a Conv becomes part of the Conv's pads. The rule reports no near miss unless
// asked to explain: most Pads before a Conv that do not fold are reflections or crops.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fusekit/graph/model_builder.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "fusekit/rules/pad_folding.hpp"
#include "test_support.hpp"

namespace {

using fusekit::dtype;
using fusekit::build::attr;
using fusekit::build::model_builder;
using fusekit::rules::pad_into_conv;
using fusekit::testing::fuse_compiled;

struct padded_conv {
  std::vector<double> pads{0, 0, 1, 0, 0, 0, 2, 1};  // [N, C, H, W] begins, then ends
  std::vector<std::int64_t> conv_pads{1, 1, 1, 1};
  const char* mode = "constant";
  double fill = 0;
  bool fill_given = true;
  const char* auto_pad = nullptr;

  fusekit::model build() const {
    model_builder b(18);
    auto x = b.input("x", dtype::float32, {"N", 3, 8, 8});
    std::vector<fusekit::build::value> pad_inputs{
        x, b.initializer(dtype::int64, {std::int64_t(pads.size())}, pads)};
    if (fill_given) pad_inputs.push_back(b.scalar(dtype::float32, fill));
    auto padded = b.op("Pad", pad_inputs, {{"mode", mode}}, {.name = "pad"});
    const attr kernel{"kernel_shape", std::vector<std::int64_t>{3, 3}};
    const attr strides{"strides", std::vector<std::int64_t>{2, 2}};
    const attr padding = auto_pad ? attr{"auto_pad", auto_pad} : attr{"pads", conv_pads};
    auto w = b.initializer(dtype::float32, {4, 3, 3, 3}, std::vector<double>(108, 0.1));
    b.output(b.op("Conv", {padded, w}, {kernel, strides, padding}, {.name = "conv"}));
    return b.build_model();
  }
};

// The Conv's pads after the rule ran, "" where the Pad is still there.
std::string pads_after(fusekit::model m) {
  fuse_compiled<pad_into_conv>(m);
  const auto& g = m.proto.graph();
  if (g.node_size() != 1) return "";
  std::string out;
  for (const auto& a : g.node(0).attribute())
    if (a.name() == "pads")
      for (std::int64_t p : a.ints()) out += (out.empty() ? "" : " ") + std::to_string(p);
  return out + (g.node(0).input(0) == "x" ? "" : " (not reading x)");
}

// Why the rule leaves m as it is, asked to explain; by default it says nothing.
std::string refusal(fusekit::model m) {
  const std::string before = m.proto.SerializeAsString();
  EXPECT_TRUE(fuse_compiled<pad_into_conv>(m).near_misses.empty());
  const auto report = fuse_compiled<pad_into_conv>(m, {.explain = true});
  EXPECT_EQ(m.proto.SerializeAsString(), before);
  return report.near_misses.size() == 1 ? report.near_misses[0].reason : "";
}

constexpr const char* not_foldable = "Conv 'conv': not of pads the Conv's own can state";

TEST(PadIntoConv, ZerosOnTheSpatialAxesAddToTheConvsPads) {
  EXPECT_EQ(pads_after(padded_conv{}.build()), "2 1 3 2");
}

TEST(PadIntoConv, APadWithoutFillPadsWithZeros) {
  EXPECT_EQ(pads_after(padded_conv{.fill_given = false}.build()), "2 1 3 2");
}

TEST(PadIntoConv, AConvOfAGraphInputOrOfAnotherOpIsLeftAsItIs) {
  // Its condition is asked at every Conv, before the Pad is matched.
  model_builder b(18);
  auto x = b.input("x", dtype::float32, {1, 3, 8, 8});
  auto w = b.initializer(dtype::float32, {3, 3, 1, 1}, std::vector<double>(9, 0.1));
  auto first = b.op("Conv", {x, w});
  b.output(b.op("Conv", {b.op("Relu", {first}), w}));
  fusekit::model m = b.build_model();
  const std::string before = m.proto.SerializeAsString();
  EXPECT_TRUE(fuse_compiled<pad_into_conv>(m).fusions.empty());
  EXPECT_EQ(m.proto.SerializeAsString(), before);
}

TEST(PadIntoConv, NearMisses) {
  // Reflection pads with the input's own elements, which a Conv's pads cannot.
  EXPECT_EQ(refusal(padded_conv{.mode = "reflect"}.build()), not_foldable);
  // A fill of 1 is no zero padding.
  EXPECT_EQ(refusal(padded_conv{.fill = 1}.build()), not_foldable);
  // A negative pad crops.
  EXPECT_EQ(refusal(padded_conv{.pads = {0, 0, -1, 0, 0, 0, 0, 0}}.build()), not_foldable);
  // A pad on the channels makes more input channels than the weight reads.
  EXPECT_EQ(refusal(padded_conv{.pads = {0, 1, 0, 0, 0, 0, 0, 0}}.build()), not_foldable);
  // auto_pad pads again from the padded size: the Conv states no pads to add to.
  EXPECT_EQ(refusal(padded_conv{.auto_pad = "SAME_UPPER"}.build()), not_foldable);
}

}  // namespace
