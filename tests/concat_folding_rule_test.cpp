// Specifications of concat-folding (rules/fusekit/rules/concat_folding.hpp): a Concat of a Concat
// along the same axis becomes one Concat, and the look-alikes are left as they were.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fusekit/graph/model_builder.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "fusekit/rules/concat_folding.hpp"
#include "test_support.hpp"

namespace {

using fusekit::dtype;
using fusekit::build::model_builder;
using fusekit::build::value;
using fusekit::rules::concat_folding;
using fusekit::testing::fuse_compiled;

// Concat(axis outer)(Concat(axis inner)(p, q), r), or with the inner at `at` among the outer's
// `others` (r, s …); p and q [2, 3, 4], the others as the outer join needs them.
struct nested {
  std::int64_t outer = 1, inner = 1;
  std::size_t at = 0, others = 1;
  bool inner_read_elsewhere = false;
  fusekit::build::shape_spec other_dims{2, 3, 4};

  fusekit::model build() const {
    model_builder b(17);
    auto p = b.input("p", dtype::float32, {2, 3, 4});
    auto q = b.input("q", dtype::float32, {2, 3, 4});
    std::vector<value> inputs;
    for (std::size_t i = 0; i < others; ++i)
      inputs.push_back(b.input(std::string(1, char('r' + i)), dtype::float32, other_dims));
    auto joined = b.op("Concat", {p, q}, {{"axis", inner}}, {.name = "inner"});
    inputs.insert(inputs.begin() + std::ptrdiff_t(at), joined);
    b.output(b.op("Concat", inputs, {{"axis", outer}}, {.name = "outer"}), dtype::float32);
    if (inner_read_elsewhere) b.output(joined, dtype::float32);
    return b.build_model();
  }
};

// "Concat(inputs…) axis k" per node after the rule ran.
std::string after(const nested& n) {
  fusekit::model m = n.build();
  fuse_compiled<concat_folding>(m);
  std::string out;
  for (const auto& node : m.proto.graph().node()) {
    out += node.op_type() + "(";
    for (int i = 0; i < node.input_size(); ++i) out += (i ? " " : "") + node.input(i);
    out += ") axis " + std::to_string(node.attribute(0).i()) + "; ";
  }
  return out;
}

TEST(ConcatFolding, TheInnersInputsTakeItsPlace) {
  EXPECT_EQ(after({}), "Concat(p q r) axis 1; ");
  EXPECT_EQ(after({.at = 1}), "Concat(r p q) axis 1; ");
  EXPECT_EQ(after({.at = 1, .others = 3}), "Concat(r p q s t) axis 1; ");
  EXPECT_EQ(after({.at = 3, .others = 3}), "Concat(r s t p q) axis 1; ");
}

TEST(ConcatFolding, EveryInnerFolds) {
  // Concat(Concat(p, q), r, Concat(p, q)) along one axis: each inner is one of its own.
  model_builder b(17);
  auto p = b.input("p", dtype::float32, {2, 3, 4});
  auto q = b.input("q", dtype::float32, {2, 3, 4});
  auto r = b.input("r", dtype::float32, {2, 3, 4});
  auto first = b.op("Concat", {p, q}, {{"axis", 1}});
  auto second = b.op("Concat", {q, p}, {{"axis", 1}});
  b.output(b.op("Concat", {first, r, second}, {{"axis", 1}}), dtype::float32);
  fusekit::model m = b.build_model();
  fuse_compiled<concat_folding>(m);
  ASSERT_EQ(m.proto.graph().node_size(), 1);
  std::string inputs;
  for (const auto& in : m.proto.graph().node(0).input()) inputs += in + " ";
  EXPECT_EQ(inputs, "p q r q p ");
}

TEST(ConcatFolding, AxesThatNameOneAxisOfTheProvenRank) {
  // -2 of a 3-D output is axis 1; the outer's attribute stays.
  EXPECT_EQ(after({.outer = -2}), "Concat(p q r) axis -2; ");
}

TEST(ConcatFolding, LookAlikesAreLeft) {
  // p and q joined along axis 1, then that and r along axis 0: no one join of p, q and r.
  EXPECT_EQ(after({.outer = 0, .other_dims = {2, 6, 4}}),
            "Concat(p q) axis 1; Concat(inner r) axis 0; ");
  // The inner is read elsewhere: it would stay, and nothing would be saved.
  EXPECT_EQ(after({.inner_read_elsewhere = true}), "Concat(p q) axis 1; Concat(inner r) axis 1; ");
}

TEST(ConcatFolding, NearMissOnlyWhenAsked) {
  // Joined along axis 1, then along axis 0: told only where a run asks to explain.
  fusekit::model m = nested{.outer = 0, .other_dims = {2, 6, 4}}.build();
  EXPECT_TRUE(fuse_compiled<concat_folding>(m).near_misses.empty());
  const auto report = fuse_compiled<concat_folding>(m, {.explain = true});
  ASSERT_FALSE(report.near_misses.empty());
  EXPECT_EQ(report.near_misses.back().reason,
            "input 0 of Concat 'outer': Concat 'inner': not joined again along its own axis");
}

}  // namespace
