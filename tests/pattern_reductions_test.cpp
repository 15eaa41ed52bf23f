// The vocabulary normalisation rules (RMSNorm, LayerNorm, GELU) need, specified as pattern_test.cpp
// specifies the rest: a Reduce op's axes in both of ONNX's spellings, last_axis on a list
// attribute, and a constant's elements. A positive case per spelling, then near misses, each with
// the reason it must not match; explanations are part of the API and are checked exactly.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fusekit/graph/model_builder.hpp"
#include "fusekit/pattern/pattern.hpp"

namespace {

using namespace fusekit::pattern;
using fusekit::dtype;
using fusekit::graph;
using fusekit::node_id;
using fusekit::build::model_builder;
using fusekit::build::value;
using axes_list = std::vector<std::int64_t>;

// Builds the model once and keeps it alive next to its index.
struct indexed {
  onnx::ModelProto model;
  graph g;
  explicit indexed(const model_builder& b) : model(b.build()), g(model) {}
  node_id node(const value& v) const { return g.producer(*g.find_value(v.name)); }
};

template <class P>
bool matches(const P& p, const indexed& m, const value& root) {
  return bool(match(p, m.g, m.node(root)));
}

template <class P>
std::string why(const P& p, const indexed& m, const value& root) {
  explanation e;
  EXPECT_FALSE(match(p, m.g, m.node(root), &e));
  return e.message;
}

// Both spellings take input 1 as maybe(): before opset 18 (ReduceSum 13) it is not there.
constexpr auto mean_last = op<"ReduceMean">(any(), maybe(any())).axes(last_axis);

// ---- .axes(): the attribute (before opset 18) and the constant input 1 (from opset 18)

TEST(ReduceAxes, TheAttributeBeforeOpset18) {
  model_builder b(13);
  auto x = b.input("x", dtype::float32, {2, 3, 4});
  auto minus_one = b.op("ReduceMean", {x}, {{"axes", axes_list{-1}}});
  // The Add's output declares no shape: its rank 3 is what the ops prove.
  auto sum = b.op("Add", {x, x});
  auto two = b.op("ReduceMean", {sum}, {{"axes", axes_list{2}}});
  auto flat = b.op("ReduceMean", {x}, {{"axes", axes_list{-1}}, {"keepdims", 0}});
  for (auto& v : {minus_one, two, flat}) b.output(v);
  indexed m(b);
  EXPECT_TRUE(matches(mean_last, m, minus_one));
  EXPECT_TRUE(matches(mean_last, m, two));
  // keepdims decides the output's shape, not which axis is reduced.
  EXPECT_TRUE(matches(mean_last, m, flat));
  EXPECT_TRUE(matches(op<"ReduceMean">(any()).axes(ints(-1)), m, minus_one));
}

TEST(ReduceAxes, TheConstantInputFromOpset18) {
  model_builder b(18);
  auto x = b.input("x", dtype::float32, {2, 3, 4});
  auto from_initializer = b.op("ReduceMean", {x, b.initializer("axes", dtype::int64, {1}, {-1})});
  auto from_constant = b.op("ReduceMean", {x, b.constant(dtype::int64, {1}, {2})});
  // ReduceSum took its axes as an input from opset 13 already.
  model_builder b13(13);
  auto y = b13.input("y", dtype::float32, {2, 3, 4});
  auto sum = b13.op("ReduceSum", {y, b13.initializer("axes", dtype::int64, {1}, {-1})});
  for (auto& v : {from_initializer, from_constant}) b.output(v);
  b13.output(sum);
  indexed m(b);
  indexed m13(b13);
  EXPECT_TRUE(matches(mean_last, m, from_initializer));
  EXPECT_TRUE(matches(mean_last, m, from_constant));
  EXPECT_TRUE(matches(op<"ReduceSum">(any(), maybe(any())).axes(last_axis), m13, sum));
  EXPECT_TRUE(matches(op<"ReduceMean">(any(), any()).axes(ints(-1)), m, from_initializer));
  EXPECT_EQ(describe(mean_last), "ReduceMean[axes=the last axis](_, maybe(_))");
}

TEST(ReduceAxes, NoAxesIsEveryAxis) {
  model_builder b(18);
  auto x = b.input("x", dtype::float32, {2, 3, 4});
  auto v = b.input("v", dtype::float32, {8});
  auto all = b.op("ReduceMean", {x});
  auto vector_mean = b.op("ReduceMean", {v});
  auto empty = b.op("ReduceMean", {v, b.initializer("none", dtype::int64, {0}, {})});
  auto noop = b.op("ReduceMean", {v}, {{"noop_with_empty_axes", 1}});
  auto noop_empty = b.op("ReduceMean", {v, b.initializer("empty", dtype::int64, {0}, {})},
                         {{"noop_with_empty_axes", 1}});
  for (auto& r : {all, vector_mean, empty, noop, noop_empty}) b.output(r);
  indexed m(b);
  // Every axis of a proven rank-1 input is its last axis, given or not.
  EXPECT_TRUE(matches(mean_last, m, vector_mean));
  EXPECT_TRUE(matches(mean_last, m, empty));
  // Every axis of a rank-3 input is three axes.
  EXPECT_EQ(why(mean_last, m, all),
            "ReduceMean 'ReduceMean_0': axes not given (every axis), expected the last axis");
  // With noop_with_empty_axes, no axes reduce nothing: the output is the input.
  EXPECT_EQ(why(mean_last, m, noop),
            "ReduceMean 'ReduceMean_3': axes not given and noop_with_empty_axes = 1 (no axis), "
            "expected the last axis");
  EXPECT_EQ(why(mean_last, m, noop_empty),
            "ReduceMean 'ReduceMean_4': axes (input 1) = [] and noop_with_empty_axes = 1 (no "
            "axis), expected the last axis");
  // ints() names a list; "none given" is none.
  EXPECT_EQ(why(op<"ReduceMean">(any()).axes(ints(0)), m, vector_mean),
            "ReduceMean 'ReduceMean_1': axes not given (every axis), expected [0]");
}

TEST(ReduceAxes, NearMisses) {
  model_builder b13(13);
  auto x13 = b13.input("x", dtype::float32, {2, 3, 4});
  auto middle = b13.op("ReduceMean", {x13}, {{"axes", axes_list{1}}});
  auto two_axes = b13.op("ReduceMean", {x13}, {{"axes", axes_list{1, -1}}});
  for (auto& v : {middle, two_axes}) b13.output(v);
  indexed m13(b13);
  // Axis 1 of a rank-3 input is not the last axis.
  EXPECT_EQ(why(mean_last, m13, middle),
            "ReduceMean 'ReduceMean_0': axes = [1], expected the last axis");
  // Reducing over two axes, the last among them, is not a reduction over the last axis.
  EXPECT_EQ(why(mean_last, m13, two_axes),
            "ReduceMean 'ReduceMean_1': axes = [1, -1], expected the last axis alone");

  model_builder b(18);
  auto x = b.input("x", dtype::float32, {2, 3, 4});
  auto unranked = b.input("u", dtype::float32);
  auto fed = b.input("a", dtype::int64, {1});
  auto overridable = b.input("o", dtype::int64, {1});
  b.initializer("o", dtype::int64, {1}, {-1});
  auto by_input = b.op("ReduceMean", {x, fed});
  auto by_node = b.op("ReduceMean", {x, b.op("Neg", {b.initializer("k", dtype::int64, {1}, {1})})});
  auto by_overridable = b.op("ReduceMean", {x, overridable});
  auto unknown_rank = b.op("ReduceMean", {unranked, b.initializer("two", dtype::int64, {1}, {2})});
  auto real_axes = b.op("ReduceMean", {x, b.initializer("real", dtype::float32, {1}, {-1})});
  auto first = b.op("ReduceMean", {x, b.initializer("zero", dtype::int64, {1}, {0})});
  for (auto& v : {by_input, by_node, by_overridable, unknown_rank, real_axes, first}) b.output(v);
  indexed m(b);
  // Axes fed at run time may be any axes.
  EXPECT_EQ(why(mean_last, m, by_input),
            "ReduceMean 'ReduceMean_0': axes (input 1) come from graph input 'a', not a constant, "
            "expected the last axis");
  EXPECT_EQ(why(mean_last, m, by_node),
            "ReduceMean 'ReduceMean_2': axes (input 1) come from Neg 'Neg_1', not a constant, "
            "expected the last axis");
  // An initializer that is also a graph input can be fed at run time.
  EXPECT_EQ(why(mean_last, m, by_overridable),
            "ReduceMean 'ReduceMean_3': axes (input 1) come from initializer 'o', which is also a "
            "graph input, so it can be overridden at run time, expected the last axis");
  // Axis 2 is the last axis only of a rank-3 input, and nothing proves u's rank: unknown is
  // never equal.
  EXPECT_EQ(why(mean_last, m, unknown_rank),
            "ReduceMean 'ReduceMean_4': axes (input 1) = [2], expected the last axis; 'u' has "
            "unknown rank: graph input 'u' is declared without a shape");
  // Axes are integers; a model that stores them otherwise breaks ONNX's schema.
  EXPECT_EQ(why(mean_last, m, real_axes),
            "ReduceMean 'ReduceMean_5': axes (input 1, initializer 'real') hold float32, not "
            "integers");
  // The first axis, spelled as ints(): the list is compared as written.
  EXPECT_EQ(why(op<"ReduceMean">(any(), any()).axes(ints(-1)), m, first),
            "ReduceMean 'ReduceMean_6': axes (input 1) = [0], expected [-1]");
}

// ---- last_axis on a list attribute: .attr<"axes">(last_axis)

TEST(LastAxis, AOneElementListAttribute) {
  model_builder b(13);
  auto x = b.input("x", dtype::float32, {2, 3, 4});
  auto unranked = b.input("u", dtype::float32);
  auto minus_one = b.op("ReduceMean", {x}, {{"axes", axes_list{-1}}});
  auto two = b.op("ReduceMean", {b.op("Relu", {x})}, {{"axes", axes_list{2}}});
  auto both = b.op("ReduceMean", {x}, {{"axes", axes_list{1, 2}}});
  auto unknown_rank = b.op("ReduceMean", {unranked}, {{"axes", axes_list{2}}});
  auto softmax = b.op("Softmax", {unranked}, {{"axis", 2}});
  for (auto& v : {minus_one, two, both, unknown_rank, softmax}) b.output(v);
  model_builder b17(17);
  auto y = b17.input("y", dtype::float32, {2, 3, 4});
  auto norm17 =
      b17.op("LayerNormalization", {y, b17.initializer("g", dtype::float32, {4}, {1, 1, 1, 1})});
  b17.output(norm17);
  indexed m(b);
  indexed m17(b17);
  constexpr auto p = op<"ReduceMean">(any()).attr<"axes">(last_axis);
  EXPECT_TRUE(matches(p, m, minus_one));
  EXPECT_TRUE(matches(p, m, two));
  // LayerNormalization's axis is an INT, -1 by its schema's default.
  EXPECT_TRUE(matches(op<"LayerNormalization">(any(), any()).attr<"axis">(last_axis), m17, norm17));
  // Two axes are not the last axis, even where the last is among them.
  EXPECT_EQ(why(p, m, both),
            "ReduceMean 'ReduceMean_3': axes = [1, 2], expected the last axis alone");
  // Nothing proves u's rank, so axis 2 may or may not be its last: unknown is never equal.
  EXPECT_EQ(why(p, m, unknown_rank),
            "ReduceMean 'ReduceMean_4': axes = [2], expected the last axis; 'u' has unknown rank: "
            "graph input 'u' is declared without a shape");
  // The same holds for an INT attribute.
  EXPECT_EQ(why(op<"Softmax">(any()).attr<"axis">(last_axis), m, softmax),
            "Softmax 'Softmax_5': axis = 2, expected the last axis; 'u' has unknown rank: graph "
            "input 'u' is declared without a shape");
}

// ---- constant<"w">.values({…}): the elements of a constant

TEST(ConstantValues, MatchesTheElementsInAnyNumericDtype) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {3});
  auto mul = [&](const value& c) { return b.op("Mul", {x, c}); };
  auto f32 = mul(b.initializer("w", dtype::float32, {3}, {1, 0, 0.5}));
  auto f16 = mul(b.constant(dtype::float16, {3}, {1, 0, 0.5}));
  auto f64_matrix = mul(b.initializer("m", dtype::float64, {1, 3}, {1, 0, 0.5}));
  auto integers = mul(b.initializer("i", dtype::int64, {2}, {1, 0}));
  auto root2 = mul(b.initializer("r", dtype::float16, {1}, {1.4142136}));
  for (auto& v : {f32, f16, f64_matrix, integers, root2}) b.output(v);
  indexed m(b);
  constexpr auto p = op<"Mul">(any(), constant<"w">.values({1, 0, 0.5}));
  const auto r = match(p, m.g, m.node(f32));
  ASSERT_TRUE(r);
  EXPECT_EQ(r.get<"w">()->name(), "w");
  EXPECT_TRUE(matches(p, m, f16));
  EXPECT_TRUE(matches(p, m, f64_matrix));
  EXPECT_TRUE(matches(op<"Mul">(any(), constant<"w">.values({1, 0})), m, integers));
  // float16 holds √2 as 1.4140625: within the tolerance given, not within the default 1e-6.
  EXPECT_TRUE(matches(op<"Mul">(any(), constant<"w">.values({1.4142136}, 2e-4)), m, root2));
  EXPECT_EQ(why(op<"Mul">(any(), constant<"w">.values({1.4142136})), m, root2),
            "input 1 of Mul 'Mul_5': constant 'w' (initializer 'r') is not [1.4142136]: element "
            "[0] is 1.4140625, expected 1.4142136");
  EXPECT_EQ(describe(p), "Mul(_, w:constant{values [1, 0, 0.5]})");
}

TEST(ConstantValues, NearMisses) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto mul = [&](const value& c) { return b.op("Mul", {x, c}); };
  auto wrong = mul(b.initializer("wrong", dtype::float32, {3}, {1, 2, 0.5}));
  auto longer = mul(b.initializer("longer", dtype::float32, {4}, {1, 0, 0.5, 0}));
  auto matrix = mul(b.initializer("matrix", dtype::int64, {2, 2}, {1, 0, 1, 1}));
  auto computed = mul(b.op("Relu", {x}));
  for (auto& v : {wrong, longer, matrix, computed}) b.output(v);
  indexed m(b);
  constexpr auto p = op<"Mul">(any(), constant<"w">.values({1, 0, 0.5}));
  // The second element differs; the first that does is named.
  EXPECT_EQ(why(p, m, wrong),
            "input 1 of Mul 'Mul_0': constant 'w' (initializer 'wrong') is not [1, 0, 0.5]: "
            "element [1] is 2, expected 0");
  // The same three elements and one more are not those three.
  EXPECT_EQ(why(p, m, longer),
            "input 1 of Mul 'Mul_1': constant 'w' (initializer 'longer') is not [1, 0, 0.5]: it "
            "has 4 elements");
  // Row-major: element [1, 0] is the third.
  EXPECT_EQ(why(op<"Mul">(any(), constant<"w">.values({1, 0, 0, 1})), m, matrix),
            "input 1 of Mul 'Mul_2': constant 'w' (initializer 'matrix') is not [1, 0, 0, 1]: "
            "element [1, 0] is 1, expected 0");
  // A computed value is not a constant, whatever it holds.
  EXPECT_EQ(why(p, m, computed),
            "input 1 of Mul 'Mul_4': expected constant 'w', Relu 'Relu_3' is not a constant");
}

}  // namespace
