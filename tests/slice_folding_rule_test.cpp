// Specifications of slice-folding (rules/fusekit/rules/slice_folding.hpp): two Slices on different
// axes become one Slice of x, and the look-alikes are left as they were. The rule reports no near
// miss unless asked to explain: most Slices of a Slice slice the same axis twice.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "fusekit/graph/model_builder.hpp"
#include "fusekit/graph/tensor.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "fusekit/rules/slice_folding.hpp"
#include "test_support.hpp"

namespace {

using fusekit::dtype;
using fusekit::build::model_builder;
using fusekit::build::value;
using fusekit::rules::slice_folding;
using fusekit::testing::fuse_compiled;
using i64s = std::vector<std::int64_t>;

// x [2, 6, 6, 4] ── Slice(axes a1) ── Slice(axes a2) ── y, each of one axis from start to end
// step (by default 0 to 100, past the end, step 2), axes omitted where empty.
struct sliced_twice {
  i64s axes1{1}, axes2{2};
  bool first_read_elsewhere = false;
  i64s range1{0, 100, 2}, range2{0, 100, 2};
  fusekit::build::shape_spec x_dims{2, 6, 6, 4};

  fusekit::model build() const {
    model_builder b(17);
    auto x = b.input("x", dtype::float32, x_dims);
    auto slice = [&](value in, const i64s& axes, const i64s& range, const char* name) {
      std::vector<value> inputs{in, b.ints({range[0]}), b.ints({range[1]})};
      inputs.push_back(axes.empty() ? value{""} : b.ints(axes));
      inputs.push_back(b.ints({range[2]}));
      return b.op("Slice", inputs, {}, {.name = name});
    };
    auto first = slice(x, axes1, range1, "first");
    b.output(slice(first, axes2, range2, "second"), dtype::float32);
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
      const fusekit::tensor_values a(*g.constant_tensor(g.input(n, slot)));
      for (std::int64_t i = 0; i < a.size(); ++i)
        out += (i ? " " : "") + std::to_string(a.as_int64(i));
      out += "]";
    }
    out += ") ";
  }
  return out;
}

TEST(SliceFolding, SlicesOfTwoAxesAreOneSlice) {
  fusekit::model m = sliced_twice{}.build();
  fuse_compiled<slice_folding>(m);
  EXPECT_EQ(nodes_of(m), "Slice(x [0 0] [100 100] [1 2] [2 2]) ");
}

TEST(SliceFolding, OmittedAxesAreTheFirstOnes) {
  fusekit::model m = sliced_twice{.axes1 = {}}.build();
  fuse_compiled<slice_folding>(m);
  EXPECT_EQ(nodes_of(m), "Slice(x [0 0] [100 100] [0 2] [2 2]) ");
}

TEST(SliceFolding, ANegativeAxisCountsFromTheRank) {
  fusekit::model m = sliced_twice{.axes2 = {-1}}.build();
  fuse_compiled<slice_folding>(m);
  EXPECT_EQ(nodes_of(m), "Slice(x [0 0] [100 100] [1 3] [2 2]) ");
}

TEST(SliceFolding, AFirstReadElsewhereStaysForItsReader) {
  fusekit::model m = sliced_twice{.first_read_elsewhere = true}.build();
  fuse_compiled<slice_folding>(m);
  EXPECT_EQ(m.proto.graph().node_size(), 2);
  EXPECT_EQ(m.proto.graph().node(1).input(0), "x");
}

TEST(SliceFolding, ToTheEndIsWrittenExactly) {
  // torch writes INT64_MAX for "to the end", which no double holds: the bounds are written as ints.
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  fusekit::model m = sliced_twice{.range1 = {0, max, 2}, .range2 = {0, max, 2}}.build();
  fuse_compiled<slice_folding>(m);
  EXPECT_EQ(nodes_of(m), "Slice(x [0 0] [" + std::to_string(max) + " " + std::to_string(max) +
                             "] [1 2] [2 2]) ");
}

TEST(SliceFolding, SlicesOfOneAxisAreOneRangeOfIt) {
  // Elements 0, 2, 4 of 6, then 0 and 2 of those: 0 and 4.
  fusekit::model m = sliced_twice{.axes2 = {1}}.build();
  fuse_compiled<slice_folding>(m);
  EXPECT_EQ(nodes_of(m), "Slice(x [0] [5] [1] [4]) ");
  // Elements 1 to 5, then the third and fourth of those ([-3:-1]): x's 3 and 4.
  m = sliced_twice{.axes2 = {1}, .range1 = {1, 100, 1}, .range2 = {-3, -1, 1}}.build();
  fuse_compiled<slice_folding>(m);
  EXPECT_EQ(nodes_of(m), "Slice(x [3] [5] [1] [1]) ");
}

TEST(SliceFolding, ComposedRangesTakeTheElementsBothSlicesTake) {
  // Every range ONNX can write with steps 1 to 3 and bounds −7 to 7 in dims 0 to 6, against the
  // elements taken one Slice after the other.
  const auto taken = [](std::int64_t s, std::int64_t e, std::int64_t t, const i64s& of) {
    const std::int64_t d = std::int64_t(of.size());
    s = std::clamp(s < 0 ? s + d : s, std::int64_t{0}, d);
    e = std::clamp(e < 0 ? e + d : e, std::int64_t{0}, d);
    i64s out;
    for (std::int64_t i = s; i < e; i += t) out.push_back(of[std::size_t(i)]);
    return out;
  };
  for (std::int64_t d = 0; d <= 6; ++d) {
    i64s x(static_cast<std::size_t>(d));
    for (std::int64_t i = 0; i < d; ++i) x[std::size_t(i)] = i;
    for (std::int64_t s1 = -7; s1 <= 7; ++s1)
      for (std::int64_t e1 = -7; e1 <= 7; ++e1)
        for (std::int64_t t1 = 1; t1 <= 3; ++t1) {
          const i64s first = taken(s1, e1, t1, x);
          for (std::int64_t s2 = -7; s2 <= 7; ++s2)
            for (std::int64_t e2 = -7; e2 <= 7; ++e2)
              for (std::int64_t t2 = 1; t2 <= 3; ++t2) {
                const auto r = fusekit::rules::slices::composed({s1, e1, t1}, {s2, e2, t2}, d);
                ASSERT_EQ(taken(r.start, r.end, r.step, x), taken(s2, e2, t2, first))
                    << "dim " << d << ": [" << s1 << ":" << e1 << ":" << t1 << "][" << s2 << ":"
                    << e2 << ":" << t2 << "]";
              }
        }
  }
}

TEST(SliceFolding, NearMissOnlyWhenAsked) {
  // Both slice axis 1, whose dim S nothing proves: where the second's bounds land in x is unknown.
  fusekit::model m = sliced_twice{.axes2 = {1}, .x_dims = {2, "S", 6, 4}}.build();
  const std::string before = m.proto.SerializeAsString();
  EXPECT_TRUE(fuse_compiled<slice_folding>(m).near_misses.empty());
  const auto report = fuse_compiled<slice_folding>(m, {.explain = true});
  EXPECT_EQ(m.proto.SerializeAsString(), before);
  ASSERT_EQ(report.near_misses.size(), 2u);
  EXPECT_EQ(report.near_misses[1].reason,
            "Slice 'second': not one Slice with the Slice it reads (other axes, or steps of 1 or "
            "more along a proven dim)");
}

TEST(SliceFolding, StepsBackAlongOneAxisAreLeft) {
  // The first steps back along axis 1, which the second slices too.
  fusekit::model m = sliced_twice{.axes2 = {1}, .range1 = {-1, -100, -1}}.build();
  fuse_compiled<slice_folding>(m);
  EXPECT_EQ(m.proto.graph().node_size(), 2);
}

}  // namespace
