// Specifications of reshape folding (rules/fusekit/rules/reshape_folding.hpp): a Reshape of a
// view (Reshape, Flatten, Squeeze, Unsqueeze) is one Reshape of what the view read, where the
// target's elements are proven not to copy a dim of the view that x does not share.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fusekit/graph/model_builder.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "fusekit/rewrite/invariants.hpp"
#include "fusekit/rules/reshape_folding.hpp"
#include "test_support.hpp"

namespace {

using fusekit::dtype;
using fusekit::build::model_builder;
using fusekit::build::value;
using fusekit::rules::reshape_folding;
using fusekit::testing::fuse_compiled;

std::string nodes_of(const fusekit::model& m) {
  std::string out;
  for (const auto& n : m.proto.graph().node()) {
    out += n.op_type() + "(";
    for (int i = 0; i < n.input_size(); ++i) out += (i ? ", " : "") + n.input(i);
    out += ") ";
  }
  return out;
}

value int64s(model_builder& b, std::vector<double> v) {
  return b.initializer(dtype::int64, {std::int64_t(v.size())}, v);
}

// x [B, 4, 8] ── Reshape(`inner`) ── v ── Reshape(`outer`) ── out
fusekit::model reshaped_twice(std::vector<double> inner, std::vector<double> outer,
                              fusekit::build::shape_spec out, std::int64_t allowzero = 0) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {"B", 4, 8});
  auto v = b.op("Reshape", {x, int64s(b, inner)}, {}, {.name = "view"});
  b.output(b.op("Reshape", {v, int64s(b, outer)}, {{"allowzero", allowzero}}, {.name = "outer"}),
           dtype::float32, out);
  return b.build_model();
}

TEST(ReshapeFolding, AReshapeOfAReshapeIsOne) {
  // The 0 copies B from v, and v's dim 0 is x's: the outer target reads the same on x.
  fusekit::model m = reshaped_twice({0, 0, 2, 4}, {0, 32}, {"B", 32});
  fuse_compiled<reshape_folding>(m);
  ASSERT_EQ(m.proto.graph().node_size(), 1);
  EXPECT_EQ(m.proto.graph().node(0).input(0), "x");
  fusekit::rewrite::check_invariants(m);
  // A second run changes nothing.
  const std::string once = m.proto.SerializeAsString();
  fuse_compiled<reshape_folding>(m);
  EXPECT_EQ(m.proto.SerializeAsString(), once);
}

TEST(ReshapeFolding, EveryViewFolds) {
  // Flatten, Unsqueeze and Squeeze keep the elements in order too; the target has no 0.
  for (std::string op : {"Flatten", "Unsqueeze", "Squeeze"}) {
    model_builder b(17);
    auto x = b.input("x", dtype::float32, {2, 1, 12});
    std::vector<value> args = {x};
    if (op != "Flatten") args.push_back(int64s(b, {1}));
    b.output(b.op("Reshape", {b.op(op, args), int64s(b, {4, -1})}), dtype::float32, {4, 6});
    fusekit::model m = b.build_model();
    fuse_compiled<reshape_folding>(m);
    ASSERT_EQ(m.proto.graph().node_size(), 1) << op;
    EXPECT_EQ(m.proto.graph().node(0).input(0), "x") << op;
    fusekit::rewrite::check_invariants(m);
  }
}

TEST(ReshapeFolding, AZeroThatMeansZeroNeedsNoProof) {
  // allowzero 1: a 0 is a dim of size 0, never a copy of v's.
  fusekit::model m = reshaped_twice({4, -1}, {0, 2, -1}, {0, 2, "M"}, 1);
  fuse_compiled<reshape_folding>(m);
  ASSERT_EQ(m.proto.graph().node_size(), 1);
  EXPECT_EQ(m.proto.graph().node(0).input(0), "x");
}

TEST(ReshapeFolding, AViewReadElsewhereStays) {
  // v is also a graph output: it stays for that reader, and the Reshape reads x.
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, 3, 4});
  auto v = b.op("Flatten", {x});
  b.output(v, dtype::float32, {2, 12});
  b.output(b.op("Reshape", {v, int64s(b, {6, 4})}), dtype::float32, {6, 4});
  fusekit::model m = b.build_model();
  fuse_compiled<reshape_folding>(m);
  EXPECT_EQ(nodes_of(m), "Flatten(x) Reshape(x, " + m.proto.graph().node(1).input(1) + ") ");
  fusekit::rewrite::check_invariants(m);
}

TEST(ReshapeFolding, NearMissAZeroCopyingADimXLacks) {
  // v is [4, 8·B]: its 0 copies 4, where on x it would copy B.
  fusekit::model m = reshaped_twice({4, -1}, {0, 2, -1}, {4, 2, "M"});
  const std::string before = m.proto.SerializeAsString();
  const auto report = fuse_compiled<reshape_folding>(m, {.explain = true});
  EXPECT_EQ(m.proto.SerializeAsString(), before);
  // Asked to explain, the rule also says why the view itself, reading x, is no Reshape of a view.
  ASSERT_EQ(report.near_misses.size(), 2u);
  EXPECT_EQ(report.near_misses[1].anchor, "Reshape 'outer'");
  EXPECT_EQ(report.near_misses[1].reason,
            "element 0 of the target shape of Reshape 'outer' may be 0, which copies dim 0 of "
            "'view', not proven dim 0 of 'x'");
}

TEST(ReshapeFolding, NearMissATargetOfUnknownLength) {
  // The target is the model's input, of no known length: any element may copy any dim.
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, 3, 4});
  auto shape = b.input("shape", dtype::int64, {"N"});
  b.output(b.op("Reshape", {b.op("Flatten", {x}), shape}, {}, {.name = "outer"}), dtype::float32,
           fusekit::build::unknown_shape);
  fusekit::model m = b.build_model();
  const std::string before = m.proto.SerializeAsString();
  const auto report = fuse_compiled<reshape_folding>(m, {.explain = true});
  EXPECT_EQ(m.proto.SerializeAsString(), before);
  ASSERT_EQ(report.near_misses.size(), 1u);
  EXPECT_EQ(report.near_misses[0].reason,
            "the length of the target shape of Reshape 'outer' is not proven");
}

}  // namespace
