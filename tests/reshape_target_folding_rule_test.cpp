// Specifications of reshape target folding (rules/fusekit/rules/reshape_folding.hpp): a Reshape
// whose target is computed gets a constant target. An element proven a number is written as it is,
// one proven the input's dim at its index as 0, one other as -1 where every other element is a
// positive number. The rule reports no near miss unless asked to explain: most computed targets
// are no fold.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "fusekit/graph/model_builder.hpp"
#include "fusekit/graph/tensor.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "fusekit/rewrite/invariants.hpp"
#include "fusekit/rules/reshape_folding.hpp"
#include "test_support.hpp"

namespace {

using fusekit::dtype;
using fusekit::build::model_builder;
using fusekit::build::value;
using fusekit::rules::reshape_target_folding;
using fusekit::testing::fuse_compiled;

// The elements of the initializer the only node's input 1 reads.
std::vector<std::int64_t> target_of(const fusekit::model& m) {
  const auto& g = m.proto.graph();
  for (const auto& t : g.initializer())
    if (t.name() == g.node(g.node_size() - 1).input(1)) {
      const fusekit::tensor_values v(t, {});
      std::vector<std::int64_t> out;
      for (std::int64_t i = 0; i < v.size(); ++i) out.push_back(v.as_int64(i));
      return out;
    }
  return {};
}

// Why the rule leaves m as it is, asked to explain: by default it says nothing, and neither run
// changes the model.
std::string refusal(fusekit::model m) {
  const std::string before = m.proto.SerializeAsString();
  EXPECT_TRUE(fuse_compiled<reshape_target_folding>(m).near_misses.empty());
  const auto report = fuse_compiled<reshape_target_folding>(m, {.explain = true});
  EXPECT_EQ(m.proto.SerializeAsString(), before);
  EXPECT_EQ(report.near_misses.size(), 1u);
  return report.near_misses.empty() ? "" : report.near_misses[0].reason;
}

constexpr const char* no_constant_target = "Reshape 'r': not of a target a constant states";

value int64s(model_builder& b, std::vector<double> v) {
  return b.initializer(dtype::int64, {std::int64_t(v.size())}, v);
}

// Dim `axis` of x as a vector of one element, as TorchScript computes it.
value dim_of(model_builder& b, value x, std::int64_t axis) {
  auto d = b.op("Gather", {b.op("Shape", {x}), b.initializer(dtype::int64, {}, {double(axis)})});
  return b.op("Unsqueeze", {d, int64s(b, {0})});
}

// x [B, S, 32] ── Reshape(x, Concat(`parts`)) ── out
fusekit::model reshaped_by(std::vector<value> (*parts)(model_builder&, value),
                           fusekit::build::shape_spec out, std::int64_t allowzero = 0) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {"B", "S", 32});
  auto target = b.op("Concat", parts(b, x), {{"axis", std::int64_t(0)}});
  b.output(b.op("Reshape", {x, target}, {{"allowzero", allowzero}}, {.name = "r"}), dtype::float32,
           out);
  return b.build_model();
}

// [B, S, 4, 8]: a head split.
std::vector<value> heads(model_builder& b, value x) {
  return {dim_of(b, x, 0), dim_of(b, x, 1), int64s(b, {4, 8})};
}

TEST(ReshapeTargetFolding, DimsAtTheirIndexAreCopied) {
  fusekit::model m = reshaped_by(heads, {"B", "S", 4, 8});
  fuse_compiled<reshape_target_folding>(m);
  // The shape computation is read no more: only the Reshape is left.
  ASSERT_EQ(m.proto.graph().node_size(), 1);
  EXPECT_EQ(m.proto.graph().node(0).input(0), "x");
  EXPECT_EQ(target_of(m), (std::vector<std::int64_t>{0, 0, 4, 8}));
  fusekit::rewrite::check_invariants(m);
  // A second run changes nothing: the target is a constant.
  const std::string once = m.proto.SerializeAsString();
  fuse_compiled<reshape_target_folding>(m);
  EXPECT_EQ(m.proto.SerializeAsString(), once);
}

TEST(ReshapeTargetFolding, OneOtherElementIsSolved) {
  // [B·S, 32]: B·S is no dim of x at index 0, and 32 is a positive number.
  fusekit::model m = reshaped_by(
      [](model_builder& b, value x) {
        return std::vector<value>{b.op("Mul", {dim_of(b, x, 0), dim_of(b, x, 1)}), int64s(b, {32})};
      },
      {"BS", 32});
  fuse_compiled<reshape_target_folding>(m);
  ASSERT_EQ(m.proto.graph().node_size(), 1);
  EXPECT_EQ(target_of(m), (std::vector<std::int64_t>{-1, 32}));
  fusekit::rewrite::check_invariants(m);
}

TEST(ReshapeTargetFolding, NearMissTwoElementsNoConstantStates) {
  // [S, B, 32]: neither dim is x's at its index, and one -1 stands for one of them.
  fusekit::model m = reshaped_by(
      [](model_builder& b, value x) {
        return std::vector<value>{dim_of(b, x, 1), dim_of(b, x, 0), int64s(b, {32})};
      },
      {"S", "B", 32});
  EXPECT_EQ(refusal(std::move(m)), no_constant_target);
}

TEST(ReshapeTargetFolding, NearMissACopyBesideTheSolvedElement) {
  // [B, S·32]: -1 for S·32 would divide by B, which may be 0.
  fusekit::model m = reshaped_by(
      [](model_builder& b, value x) {
        return std::vector<value>{dim_of(b, x, 0), b.op("Mul", {dim_of(b, x, 1), int64s(b, {32})})};
      },
      {"B", "S32"});
  EXPECT_EQ(refusal(std::move(m)), no_constant_target);
}

TEST(ReshapeTargetFolding, NearMissACopyWithAllowzero) {
  // allowzero 1: a 0 is a dim of size 0, never a copy, so B and S both need the one -1.
  fusekit::model m = reshaped_by(heads, {"B", "S", 4, 8}, 1);
  EXPECT_EQ(refusal(std::move(m)), no_constant_target);
}

TEST(ReshapeTargetFolding, NearMissATargetOfUnknownLength) {
  // The target is the model's input, of no known length.
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, 3, 4});
  auto shape = b.input("shape", dtype::int64, {"N"});
  b.output(b.op("Reshape", {x, shape}, {}, {.name = "r"}), dtype::float32,
           fusekit::build::unknown_shape);
  fusekit::model m = b.build_model();
  EXPECT_EQ(refusal(std::move(m)), no_constant_target);
}

}  // namespace
