// Specifications of concat-folding (rules/fusekit/rules/concat_folding.hpp): a Concat of a Concat
// along the same axis becomes one Concat, and the look-alikes are left as they were.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fusekit/graph/model_builder.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "fusekit/rules/concat_folding.hpp"

namespace {

using fusekit::dtype;
using fusekit::build::model_builder;
using fusekit::build::value;
using fusekit::rewrite::fuse;
using fusekit::rules::concat_folding;

// Concat(axis outer)(Concat(axis inner)(p, q), r), the inner second where asked; p and q
// [2, 3, 4], r as the outer join needs it.
struct nested {
  std::int64_t outer = 1, inner = 1;
  bool inner_second = false, inner_read_elsewhere = false;
  fusekit::build::shape_spec r_dims{2, 3, 4};

  fusekit::model build() const {
    model_builder b(17);
    auto p = b.input("p", dtype::float32, {2, 3, 4});
    auto q = b.input("q", dtype::float32, {2, 3, 4});
    auto r = b.input("r", dtype::float32, r_dims);
    auto joined = b.op("Concat", {p, q}, {{"axis", inner}}, {.name = "inner"});
    b.output(
        b.op("Concat", inner_second ? std::vector<value>{r, joined} : std::vector<value>{joined, r},
             {{"axis", outer}}, {.name = "outer"}),
        dtype::float32);
    if (inner_read_elsewhere) b.output(joined, dtype::float32);
    return b.build_model();
  }
};

// "Concat(inputs…) axis k" per node after the rule ran.
std::string after(const nested& n) {
  fusekit::model m = n.build();
  fuse<concat_folding>(m);
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
  EXPECT_EQ(after({.inner_second = true}), "Concat(r p q) axis 1; ");
}

TEST(ConcatFolding, AxesThatNameOneAxisOfTheProvenRank) {
  // -2 of a 3-D output is axis 1; the outer's attribute stays.
  EXPECT_EQ(after({.outer = -2}), "Concat(p q r) axis -2; ");
}

TEST(ConcatFolding, LookAlikesAreLeft) {
  // p and q joined along axis 1, then that and r along axis 0: no one join of p, q and r.
  EXPECT_EQ(after({.outer = 0, .r_dims = {2, 6, 4}}),
            "Concat(p q) axis 1; Concat(inner r) axis 0; ");
  // The inner is read elsewhere: it would stay, and nothing would be saved.
  EXPECT_EQ(after({.inner_read_elsewhere = true}), "Concat(p q) axis 1; Concat(inner r) axis 1; ");
}

}  // namespace
