// Specifications of unsqueeze folding (rules/fusekit/rules/unsqueeze_folding.hpp): two Unsqueezes
// in a row are one, of every axis both insert numbered in the output; where either's axes or x's
// rank are not proven, the two stay.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fusekit/graph/model_builder.hpp"
#include "fusekit/graph/tensor.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "fusekit/rewrite/invariants.hpp"
#include "fusekit/rules/unsqueeze_folding.hpp"
#include "test_support.hpp"

namespace {

using fusekit::dtype;
using fusekit::build::model_builder;
using fusekit::build::value;
using fusekit::rules::unsqueeze_folding;
using fusekit::testing::fuse_compiled;

value int64s(model_builder& b, std::vector<double> v) {
  return b.initializer(dtype::int64, {std::int64_t(v.size())}, v);
}

// The axes the one Unsqueeze left inserts.
std::vector<double> axes_of(const fusekit::model& m) {
  const auto& g = m.proto.graph();
  for (const auto& t : g.initializer())
    if (t.name() == g.node(0).input(1)) {
      const fusekit::tensor_values values(t, {});
      std::vector<double> out;
      for (std::int64_t i = 0; i < values.size(); ++i) out.push_back(values.as_double(i));
      return out;
    }
  return {};
}

// x [2, 3] ── Unsqueeze(`first`) ── Unsqueeze(`second`) ── out of shape `out`
fusekit::model unsqueezed_twice(std::vector<double> first, std::vector<double> second,
                                fusekit::build::shape_spec out) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, 3});
  auto once = b.op("Unsqueeze", {x, int64s(b, first)}, {}, {.name = "first"});
  b.output(b.op("Unsqueeze", {once, int64s(b, second)}, {}, {.name = "second"}), dtype::float32,
           out);
  return b.build_model();
}

TEST(UnsqueezeFolding, TwoAreOneOfBothAxes) {
  // [2, 3] → [1, 2, 3] → [1, 2, 3, 1]: axes 0 and 3 of the output.
  fusekit::model m = unsqueezed_twice({0}, {3}, {1, 2, 3, 1});
  fuse_compiled<unsqueeze_folding>(m);
  ASSERT_EQ(m.proto.graph().node_size(), 1);
  EXPECT_EQ(m.proto.graph().node(0).input(0), "x");
  EXPECT_EQ(axes_of(m), (std::vector<double>{0, 3}));
  fusekit::rewrite::check_invariants(m);
}

TEST(UnsqueezeFolding, TheFirstsAxesMoveWhereTheSecondInsertsBeforeThem) {
  // [2, 3] → [2, 3, 1] (axis −1) → [2, 1, 3, 1] (axis 1): the first's axis is now 3.
  fusekit::model m = unsqueezed_twice({-1}, {1}, {2, 1, 3, 1});
  fuse_compiled<unsqueeze_folding>(m);
  ASSERT_EQ(m.proto.graph().node_size(), 1);
  EXPECT_EQ(axes_of(m), (std::vector<double>{1, 3}));
}

TEST(UnsqueezeFolding, AFirstReadElsewhereStays) {
  // The first is also a graph output: it stays, and the second reads x.
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, 3});
  auto once = b.op("Unsqueeze", {x, int64s(b, {0})});
  b.output(once, dtype::float32, {1, 2, 3});
  b.output(b.op("Unsqueeze", {once, int64s(b, {0})}), dtype::float32, {1, 1, 2, 3});
  fusekit::model m = b.build_model();
  fuse_compiled<unsqueeze_folding>(m);
  ASSERT_EQ(m.proto.graph().node_size(), 2);
  EXPECT_EQ(m.proto.graph().node(1).input(0), "x");
  fusekit::rewrite::check_invariants(m);
}

// Fuses m, asked to explain; expects it unchanged and returns why Unsqueeze 'second' did not fold.
std::string refusal(fusekit::model m) {
  const std::string before = m.proto.SerializeAsString();
  const auto report = fuse_compiled<unsqueeze_folding>(m, {.explain = true});
  EXPECT_EQ(m.proto.SerializeAsString(), before);
  if (report.near_misses.empty() || report.near_misses.back().anchor != "Unsqueeze 'second'")
    return "no near miss at Unsqueeze 'second'";
  return report.near_misses.back().reason;
}

TEST(UnsqueezeFolding, NearMissAxesThatAreNoConstant) {
  // The second's axes are the model's input: which axes it inserts is known only at run time.
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, 3});
  auto axes = b.input("axes", dtype::int64, {1});
  auto once = b.op("Unsqueeze", {x, int64s(b, {0})}, {}, {.name = "first"});
  b.output(b.op("Unsqueeze", {once, axes}, {}, {.name = "second"}), dtype::float32,
           fusekit::build::unknown_shape);
  EXPECT_EQ(refusal(b.build_model()),
            "the axes of Unsqueeze 'first' or Unsqueeze 'second' are not proven distinct numbers "
            "within its output's rank");
}

TEST(UnsqueezeFolding, NearMissXOfUnknownRank) {
  // x's rank is unknown: the axes cannot be numbered in the output.
  model_builder b(17);
  auto x = b.input("x", dtype::float32, fusekit::build::unknown_shape);
  auto once = b.op("Unsqueeze", {x, int64s(b, {0})});
  b.output(b.op("Unsqueeze", {once, int64s(b, {-1})}, {}, {.name = "second"}), dtype::float32,
           fusekit::build::unknown_shape);
  EXPECT_EQ(refusal(b.build_model()), "the rank of 'x' is not proven");
}

}  // namespace
