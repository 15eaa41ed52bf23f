// Specifications of squeeze-unsqueeze-elimination (rules/fusekit/rules/unsqueeze_folding.hpp): an
// Unsqueeze that puts back what a Squeeze took, or the reverse, leaves its readers reading x.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fusekit/graph/model_builder.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "fusekit/rules/unsqueeze_folding.hpp"
#include "test_support.hpp"

namespace {

using fusekit::dtype;
using fusekit::build::model_builder;
using fusekit::rules::squeeze_unsqueeze_elimination;
using fusekit::testing::fuse_compiled;

// x [2, 3, 1] ── first(axes a) ── second(axes b) ── Relu ── y
struct round_trip {
  const char* first = "Squeeze";
  const char* second = "Unsqueeze";
  double a = -1, b = -1;

  fusekit::model build() const {
    model_builder g(17);
    auto x = g.input("x", dtype::float32, {2, 3, 1});
    auto axes = [&](double v) { return g.initializer(dtype::int64, {1}, {v}); };
    auto there = g.op(first, {x, axes(a)}, {}, {.name = "first"});
    auto back = g.op(second, {there, axes(b)}, {}, {.name = "second"});
    g.output(g.op("Relu", {back}, {}, {.name = "relu"}), dtype::float32);
    return g.build_model();
  }
};

// The ops left, and what the Relu reads.
std::string after(const round_trip& r) {
  fusekit::model m = r.build();
  fuse_compiled<squeeze_unsqueeze_elimination>(m);
  std::string out;
  for (const auto& n : m.proto.graph().node()) out += n.op_type() + " ";
  return out + "reading " + m.proto.graph().node(m.proto.graph().node_size() - 1).input(0);
}

TEST(SqueezeUnsqueezeElimination, AnAxisTakenAndPutBackIsNoNode) {
  EXPECT_EQ(after({}), "Relu reading x");
  // -1 and 2 are one axis of the rank 3 both count in.
  EXPECT_EQ(after({.b = 2}), "Relu reading x");
}

TEST(SqueezeUnsqueezeElimination, AnAxisPutInAndTakenAwayIsNoNode) {
  EXPECT_EQ(after({.first = "Unsqueeze", .second = "Squeeze", .a = 0, .b = 0}), "Relu reading x");
}

TEST(SqueezeUnsqueezeElimination, AnotherAxisIsLeft) {
  // [2, 3, 1] → [2, 3] → [1, 2, 3]: the axis comes back first, not last.
  EXPECT_EQ(after({.b = 0}), "Squeeze Unsqueeze Relu reading second");
}

}  // namespace
