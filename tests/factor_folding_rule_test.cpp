// Specifications of factor-folding (rules/fusekit/rules/factor_folding.hpp): two scalar factors
// in a row become one, and the look-alikes are left as they were.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fusekit/graph/array.hpp"
#include "fusekit/graph/model_builder.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "fusekit/rules/factor_folding.hpp"
#include "test_support.hpp"

namespace {

using fusekit::dtype;
using fusekit::build::model_builder;
using fusekit::build::value;
using fusekit::rules::factor_folding;
using fusekit::testing::fuse_compiled;

// x [2, 3] ── first(·, a) ── second(·, b) ── y, each factor of the given dims.
struct two_factors {
  const char* first = "Mul";
  const char* second = "Mul";
  double a = 4, b = 0.5;
  std::vector<std::int64_t> a_dims{}, b_dims{};
  std::vector<double> b_values{};  // where b is no scalar
  bool factor_first = false;       // Mul(a, x) rather than Mul(x, a)
  bool first_read_elsewhere = false;
  bool capped = false;  // y read by a Tanh, as a soft cap's divisor is
  dtype type = dtype::float32;

  fusekit::model build() const {
    model_builder b_(17);
    auto x = b_.input("x", type, {2, 3});
    auto fa = b_.initializer("a", type, a_dims, {a});
    auto scaled = b_.op(first, factor_first ? std::vector<value>{fa, x} : std::vector<value>{x, fa},
                        {}, {.name = "first"});
    auto y = b_.op(second,
                   {scaled, b_.initializer("b", type, b_dims,
                                           b_values.empty() ? std::vector<double>{b} : b_values)},
                   {}, {.name = "second"});
    b_.output(capped ? b_.op("Tanh", {y}) : y, type);
    if (first_read_elsewhere) b_.output(scaled, type);
    return b_.build_model();
  }
};

// "Op(x, [factor] of dims d)" where the rule wrote one node; "" where it did not.
std::string folded(const two_factors& t) {
  fusekit::model m = t.build();
  fuse_compiled<factor_folding>(m);
  if (m.proto.graph().node_size() != (t.capped ? 2 : 1)) return "";
  const fusekit::graph g(m);
  const fusekit::array f(g, g.constant_tensor(g.input(0, 1)));
  return std::string(g.op_type(0)) + "(" + std::string(g.name(g.input(0, 0))) + ", " +
         std::to_string(f[0]) + " of rank " + std::to_string(f.rank()) + ")";
}

TEST(FactorFolding, TwoMulsAreOne) {
  EXPECT_EQ(folded({}), "Mul(x, 2.000000 of rank 0)");
  EXPECT_EQ(folded({.factor_first = true}), "Mul(x, 2.000000 of rank 0)");
}

TEST(FactorFolding, ADivisionIsAFactorOfItsInverse) {
  EXPECT_EQ(folded({.first = "Div"}), "Mul(x, 0.125000 of rank 0)");
  EXPECT_EQ(folded({.second = "Div"}), "Mul(x, 8.000000 of rank 0)");
}

TEST(FactorFolding, TwoDivisionsAreOneByTheProduct) {
  EXPECT_EQ(folded({.first = "Div", .second = "Div"}), "Div(x, 2.000000 of rank 0)");
}

TEST(FactorFolding, TheFactorKeepsTheRankEitherBroadcastTo) {
  // [1, 1, 1] makes y 3-D: so must the one factor.
  EXPECT_EQ(folded({.a_dims = {1}, .b_dims = {1, 1, 1}}), "Mul(x, 2.000000 of rank 3)");
}

TEST(FactorFolding, LookAlikesAreLeft) {
  // a / x is no factor of x.
  EXPECT_EQ(folded({.first = "Div", .factor_first = true}), "");
  // The first is read elsewhere: it would stay, and nothing would be saved.
  EXPECT_EQ(folded({.first_read_elsewhere = true}), "");
  // tanh(s / c) · c is a soft cap of c: the attention rules read c where the Div has it.
  EXPECT_EQ(folded({.second = "Div", .capped = true}), "");
  // A factor per column is no scalar.
  EXPECT_EQ(folded({.b_dims = {3}, .b_values = {1, 2, 3}}), "");
}

TEST(FactorFolding, IntegersAreLeft) {
  // An integer Div truncates: (x / a) / b is not x / (a·b) rounded once, and the rule keeps to
  // floats.
  EXPECT_EQ(folded({.first = "Div", .second = "Div", .type = dtype::int64}), "");
}

}  // namespace
