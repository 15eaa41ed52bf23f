// Specifications of pad-into-max-pool and pad-into-average-pool
// (rules/fusekit/rules/pad_folding.hpp): a Pad filling what a pool's own pads stand for becomes
// part of the pool's pads. Neither reports a near miss unless asked to explain.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
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
using fusekit::rules::pad_into_average_pool;
using fusekit::rules::pad_into_max_pool;
using fusekit::testing::fuse_compiled;
using i64s = std::vector<std::int64_t>;

constexpr double minus_infinity = -std::numeric_limits<double>::infinity();

// x [N, 3, 8, 8] ── Pad(0 0 1 0 | 0 0 1 1, fill) ── pool(3×3, stride 2) ── y
struct padded_pool {
  const char* pool = "MaxPool";
  double fill = minus_infinity;
  i64s own_pads{0, 0, 0, 0};
  std::int64_t count_include_pad = 0, ceil_mode = 0;
  std::vector<double> pads{0, 0, 1, 0, 0, 0, 1, 1};
  bool indices_read = false;

  fusekit::model build() const {
    model_builder b(18);
    auto x = b.input("x", dtype::float32, {"N", 3, 8, 8});
    auto padded =
        b.op("Pad", {x, b.initializer(dtype::int64, {8}, pads), b.scalar(dtype::float32, fill)}, {},
             {.name = "pad"});
    std::vector<attr> attrs{{"kernel_shape", i64s{3, 3}},
                            {"strides", i64s{2, 2}},
                            {"pads", own_pads},
                            {"ceil_mode", ceil_mode}};
    if (std::string(pool) == "AveragePool")
      attrs.push_back({"count_include_pad", count_include_pad});
    if (indices_read) {
      auto outs = b.ops("MaxPool", {padded}, {}, {.name = "pool", .outputs = 2});
      b.output(outs[0]);
      b.output(outs[1]);
    } else {
      b.output(b.op(pool, {padded}, {}, {.name = "pool"}));
    }
    fusekit::model m = b.build_model();
    auto& node = *m.proto.mutable_graph()->mutable_node(1);
    for (const attr& a : attrs) *node.add_attribute() = a.proto;
    return m;
  }
};

// The pool's pads and count_include_pad after the rule ran; "" where the Pad is still there.
template <class Rule>
std::string after(const padded_pool& p) {
  fusekit::model m = p.build();
  fuse_compiled<Rule>(m);
  const auto& g = m.proto.graph();
  if (g.node_size() != 1) return "";
  std::string out;
  for (const auto& a : g.node(0).attribute()) {
    if (a.name() == "pads")
      for (std::int64_t v : a.ints()) out += std::to_string(v) + " ";
    if (a.name() == "count_include_pad") out += "counting " + std::to_string(a.i()) + " ";
  }
  return out + (g.node(0).input(0) == "x" ? "" : "(not reading x)");
}

TEST(PadIntoMaxPool, MinusInfinityOnTheSpatialAxesAddsToThePoolsPads) {
  EXPECT_EQ(after<pad_into_max_pool>({}), "1 0 1 1 ");
  EXPECT_EQ(after<pad_into_max_pool>({.own_pads = {1, 1, 0, 0}}), "2 1 1 1 ");
}

TEST(PadIntoAveragePool, ZerosBecomePadsTheMeanCounts) {
  // The zeros were elements of the input: each mean counts them, and the pool's pads now.
  EXPECT_EQ(after<pad_into_average_pool>({.pool = "AveragePool", .fill = 0}),
            "1 0 1 1 counting 1 ");
  EXPECT_EQ(
      after<pad_into_average_pool>(
          {.pool = "AveragePool", .fill = 0, .own_pads = {1, 1, 1, 1}, .count_include_pad = 1}),
      "2 1 2 2 counting 1 ");
}

TEST(PadIntoPool, LookAlikesAreLeft) {
  // Zeros can win a maximum: a MaxPool's pads never do.
  EXPECT_EQ(after<pad_into_max_pool>({.fill = 0}), "");
  // −∞ is no zero of a mean.
  EXPECT_EQ(after<pad_into_average_pool>({.pool = "AveragePool"}), "");
  // Pads of its own that the mean leaves out, while it would count the Pad's.
  EXPECT_EQ(
      after<pad_into_average_pool>({.pool = "AveragePool", .fill = 0, .own_pads = {1, 1, 1, 1}}),
      "");
  // A pad of 3 reaches the window's size: ONNX Runtime refuses such a pool.
  EXPECT_EQ(after<pad_into_max_pool>({.pads = {0, 0, 3, 0, 0, 0, 0, 0}}), "");
  // ceil_mode's last window depends on where the input ends.
  EXPECT_EQ(after<pad_into_max_pool>({.ceil_mode = 1}), "");
  // The indices count in the padded input.
  EXPECT_EQ(after<pad_into_max_pool>({.indices_read = true}), "");
}

TEST(PadIntoPool, NearMissOnlyWhenAsked) {
  fusekit::model m = padded_pool{.fill = 0}.build();
  EXPECT_TRUE(fuse_compiled<pad_into_max_pool>(m).near_misses.empty());
  const auto report = fuse_compiled<pad_into_max_pool>(m, {.explain = true});
  ASSERT_EQ(report.near_misses.size(), 1u);
  EXPECT_EQ(report.near_misses[0].reason, "MaxPool 'pool': not of pads the pool's own can state");
}

}  // namespace
