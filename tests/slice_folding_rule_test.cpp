// Specifications of slice-folding (rules/fusekit/rules/slice_folding.hpp): two Slices on different
// axes become one Slice of x, and the look-alikes are left as they were. The rule reports no near
// miss unless asked to explain: most Slices of a Slice slice the same axis twice.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "fusekit/graph/array.hpp"
#include "fusekit/graph/model_builder.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "fusekit/rules/slice_folding.hpp"

namespace {

using fusekit::dtype;
using fusekit::build::model_builder;
using fusekit::build::value;
using fusekit::rewrite::fuse;
using fusekit::rules::slice_folding;
using i64s = std::vector<double>;

// x [2, 6, 6, 4] ── Slice(axes a1) ── Slice(axes a2) ── y, each of one axis from 0 to 100 (past
// the end) step 2, axes omitted where empty.
struct sliced_twice {
  i64s axes1{1}, axes2{2};
  bool first_read_elsewhere = false;

  fusekit::model build() const {
    model_builder b(17);
    auto x = b.input("x", dtype::float32, {2, 6, 6, 4});
    auto slice = [&](value in, const i64s& axes, const char* name) {
      auto vec = [&](double v) { return b.initializer(dtype::int64, {1}, {v}); };
      std::vector<value> inputs{in, vec(0), vec(100)};
      inputs.push_back(axes.empty() ? value{""} : b.initializer(dtype::int64, {1}, axes));
      inputs.push_back(vec(2));
      return b.op("Slice", inputs, {}, {.name = name});
    };
    auto first = slice(x, axes1, "first");
    b.output(slice(first, axes2, "second"), dtype::float32);
    if (first_read_elsewhere) b.output(first, dtype::float32);
    return b.build_model();
  }
};

// "Op(input …)" per node with the elements of each constant input: what the graph computes.
std::string nodes_of(const fusekit::model& m) {
  const fusekit::graph g(m);
  std::string out;
  for (fusekit::node_id n = 0; n < g.node_count(); ++n) {
    out += std::string(g.op_type(n)) + "(" + std::string(g.name(g.input(n, 0)));
    for (std::size_t slot = 1; slot < g.inputs(n).size(); ++slot) {
      out += " [";
      const fusekit::array a(g, g.constant_tensor(g.input(n, slot)));
      for (std::int64_t i = 0; i < a.size(); ++i)
        out += (i ? " " : "") + std::to_string(std::int64_t(a[i]));
      out += "]";
    }
    out += ") ";
  }
  return out;
}

TEST(SliceFolding, SlicesOfTwoAxesAreOneSlice) {
  fusekit::model m = sliced_twice{}.build();
  fuse<slice_folding>(m);
  EXPECT_EQ(nodes_of(m), "Slice(x [0 0] [100 100] [1 2] [2 2]) ");
}

TEST(SliceFolding, OmittedAxesAreTheFirstOnes) {
  fusekit::model m = sliced_twice{.axes1 = {}}.build();
  fuse<slice_folding>(m);
  EXPECT_EQ(nodes_of(m), "Slice(x [0 0] [100 100] [0 2] [2 2]) ");
}

TEST(SliceFolding, ANegativeAxisCountsFromTheRank) {
  fusekit::model m = sliced_twice{.axes2 = {-1}}.build();
  fuse<slice_folding>(m);
  EXPECT_EQ(nodes_of(m), "Slice(x [0 0] [100 100] [1 3] [2 2]) ");
}

TEST(SliceFolding, AFirstReadElsewhereStaysForItsReader) {
  fusekit::model m = sliced_twice{.first_read_elsewhere = true}.build();
  fuse<slice_folding>(m);
  EXPECT_EQ(m.proto.graph().node_size(), 2);
  EXPECT_EQ(m.proto.graph().node(1).input(0), "x");
}

TEST(SliceFolding, ToTheEndIsWrittenAsTwoToThe62) {
  // torch writes INT64_MAX for "to the end", which the emitter's doubles cannot hold exactly.
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(fusekit::rules::slices::written({max, -max - 1, -5, 7}),
            (std::vector<double>{0x1p62, -0x1p62, -5, 7}));
}

TEST(SliceFolding, NearMissOnlyWhenAsked) {
  // Both slice axis 1: the second's bounds count in the first's output, not in x.
  fusekit::model m = sliced_twice{.axes2 = {1}}.build();
  const std::string before = m.proto.SerializeAsString();
  EXPECT_TRUE(fuse<slice_folding>(m).near_misses.empty());
  const auto report = fuse<slice_folding>(m, {.explain = true});
  EXPECT_EQ(m.proto.SerializeAsString(), before);
  ASSERT_EQ(report.near_misses.size(), 2u);
  EXPECT_EQ(report.near_misses[1].reason,
            "Slice 'second': not of other axes than the Slice it reads");
}

}  // namespace
