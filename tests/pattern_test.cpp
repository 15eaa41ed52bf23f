// The pattern DSL, specified combinator by combinator: a positive case, then near misses, each
// with the reason it must not match. Explanations are part of the API and are checked exactly.
#include "fusekit/pattern/pattern.hpp"

#include <gtest/gtest.h>

#include <limits>

#include "fusekit/graph/facts.hpp"
#include "fusekit/graph/model_builder.hpp"

namespace {

using namespace fusekit::pattern;
using fusekit::dtype;
using fusekit::facts;
using fusekit::graph;
using fusekit::no_id;
using fusekit::node_id;
using fusekit::truth;
using fusekit::value_id;
using fusekit::build::model_builder;
using fusekit::build::value;

// Builds the model once and keeps it alive next to its index.
struct indexed {
  onnx::ModelProto model;
  graph g;
  explicit indexed(const model_builder& b) : model(b.build()), g(model) {}
  node_id node(const value& v) const { return g.producer(*g.find_value(v.name)); }
};

template <class P>
std::string why(const P& p, const indexed& m, const value& root) {
  explanation e;
  EXPECT_FALSE(match(p, m.g, m.node(root), &e));
  return e.message;
}

// ---- op, any, capture

TEST(Op, MatchesOpTypeAndInputsInOrder) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto y = b.input("y", dtype::float32, {4});
  auto sub = b.op("Sub", {x, y});
  b.output(sub);
  indexed m(b);
  constexpr auto p = op<"Sub">(capture<"a">, capture<"b">);
  const auto r = match(p, m.g, m.node(sub));
  ASSERT_TRUE(r);
  EXPECT_EQ(m.g.name(r.get<"a">()), "x");
  EXPECT_EQ(m.g.name(r.get<"b">()), "y");
  EXPECT_EQ(r.root(), m.node(sub));
  ASSERT_EQ(r.nodes().size(), 1u);
}

TEST(Op, NearMisses) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto add = b.op("Add", {x, x});
  auto clip = b.op("Clip", {add, b.scalar(dtype::float32, 0), b.scalar(dtype::float32, 6)});
  b.output(clip);
  indexed m(b);
  // Add is not Sub.
  EXPECT_EQ(why(op<"Sub">(any(), any()), m, add), "expected Sub, found Add 'Add_0'");
  // Clip has min and max inputs; a pattern for a bare Clip(x) must not silently ignore them.
  EXPECT_EQ(why(op<"Clip">(any()), m, clip), "Clip 'Clip_3' has 3 inputs, the pattern expects 1");
  // The producer of input 0 is Add, not Mul.
  EXPECT_EQ(why(op<"Clip">(op<"Mul">(any(), any()), any(), any()), m, clip),
            "input 0 of Clip 'Clip_3': expected Mul, found Add 'Add_0'");
  // A graph input has no producer at all.
  EXPECT_EQ(
      why(op<"Clip">(op<"Add">(op<"Relu">(any()), any()), any(), any()), m, clip),
      "input 0 of Add 'Add_0', input 0 of Clip 'Clip_3': expected Relu, found graph input 'x'");
}

TEST(Op, OmittedOptionalInputs) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto clip = b.op("Clip", {x, value{}, b.scalar(dtype::float32, 6)});
  b.output(clip);
  indexed m(b);
  // any() needs a value; the min input is omitted.
  EXPECT_EQ(why(op<"Clip">(any(), any(), any()), m, clip),
            "input 1 of Clip 'Clip_1': expected a value, the input is omitted");
}

TEST(Op, CustomDomains) {
  model_builder b;
  b.opset_import("com.microsoft", 1).opset_import("my.ops", 1);
  auto x = b.input("x", dtype::float32, {4});
  auto gelu = b.op("Gelu", {x}, {}, {.domain = "com.microsoft"});
  auto mine = b.op("Gelu", {gelu}, {}, {.domain = "my.ops"});
  b.output(mine);
  indexed m(b);
  EXPECT_TRUE(match(op<"Gelu", "my.ops">(op<"Gelu", "com.microsoft">(any())), m.g, m.node(mine)));
  // Same op type, other domain: ai.onnx Gelu is not com.microsoft Gelu.
  EXPECT_EQ(why(op<"Gelu", "my.ops">(op<"Gelu">(any())), m, mine),
            "input 0 of Gelu 'Gelu_1': expected Gelu, found Gelu 'Gelu_0'");
  EXPECT_EQ(anchors(op<"Gelu", "my.ops">(any()), m.g), std::vector<node_id>{1});
  EXPECT_TRUE(anchors(op<"Gelu", "other.ops">(any()), m.g).empty());
}

TEST(Capture, SameNameTwiceMeansSameValue) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto y = b.input("y", dtype::float32, {4});
  auto square = b.op("Mul", {x, x});
  auto product = b.op("Mul", {x, y});
  b.output(square);
  b.output(product);
  indexed m(b);
  constexpr auto p = op<"Mul">(capture<"a">, capture<"a">);
  EXPECT_TRUE(match(p, m.g, m.node(square)));
  // x·y is not a square.
  EXPECT_EQ(why(p, m, product),
            "input 1 of Mul 'Mul_1': 'a' must be the same value twice, it is graph input 'x' and "
            "graph input 'y'");
}

TEST(Capture, WrapsAPatternAndBindsNodesAndAttributes) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, 3});
  auto relu = b.op("Relu", {x});
  auto softmax = b.op("Softmax", {relu});
  b.output(softmax);
  indexed m(b);
  constexpr auto p = op<"Softmax">(capture<"r">(op<"Relu">(capture<"x">).bind<"relu">()))
                         .bind_attr<"axis", "axis">();
  const auto r = match(p, m.g, m.node(softmax));
  ASSERT_TRUE(r);
  EXPECT_EQ(m.g.name(r.get<"r">()), "Relu_0");
  EXPECT_EQ(r.get<"relu">(), m.node(relu));
  ASSERT_NE(r.get<"axis">(), nullptr);
  EXPECT_EQ(r.get<"axis">()->i(), -1);  // opset 13+ default, read from the schema
}

TEST(Capture, WrittenOnlyOnSuccess) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto neg = b.op("Neg", {x});
  b.output(neg);
  indexed m(b);
  // Binds x, then fails on the node's dtype: the failed attempt leaves nothing behind.
  const auto r = match(op<"Neg">(capture<"x">).dtype<dtype::float16>(), m.g, m.node(neg));
  EXPECT_FALSE(r);
  EXPECT_FALSE(r.has<"x">());
  EXPECT_EQ(r.get<"x">(), no_id);
  EXPECT_TRUE(r.nodes().empty());
}

// ---- optional

struct cast_chain {
  model_builder b{17};
  value x = b.input("x", dtype::float16, {2, 8});
  value up = b.op("Cast", {x}, {{"to", dtype::float32}});
  value softmax = b.op("Softmax", {up}, {{"axis", -1}});
  value bare = b.op("Softmax", {b.op("Relu", {x})}, {{"axis", -1}});
};

TEST(Optional, MatchesWithOrWithoutTheNodeAndRecordsWhich) {
  cast_chain c;
  c.b.output(c.softmax);
  c.b.output(c.bare);
  indexed m(c.b);
  constexpr auto p = op<"Softmax">(optional<"Cast">(capture<"in">).bind<"cast">());
  const auto with = match(p, m.g, m.node(c.softmax));
  ASSERT_TRUE(with);
  EXPECT_EQ(with.get<"cast">(), m.node(c.up));
  EXPECT_EQ(m.g.name(with.get<"in">()), "x");
  const auto without = match(p, m.g, m.node(c.bare));
  ASSERT_TRUE(without);
  EXPECT_EQ(without.get<"cast">(), no_id);
  EXPECT_TRUE(without.has<"cast">());
  EXPECT_EQ(m.g.name(without.get<"in">()), "Relu_2");
}

TEST(Optional, ConstrainsTheCast) {
  cast_chain c;
  c.b.output(c.softmax);
  indexed m(c.b);
  EXPECT_TRUE(match(op<"Softmax">(optional<"Cast">(capture<"in">).to<dtype::float32>()), m.g,
                    m.node(c.softmax)));
  // The Cast fits, but its input is a graph input, not Relu; without the Cast, Cast is not Relu.
  EXPECT_FALSE(match(op<"Softmax">(optional<"Cast">(op<"Relu">(any())).to<dtype::float32>()), m.g,
                     m.node(c.softmax)));
  constexpr auto from_bf16 = op<"Softmax">(
      optional<"Cast">(capture<"in">.dtype<dtype::float32>()).from<dtype::bfloat16>());
  // The Cast reads float16, not bfloat16; without the Cast, its float32 output would do, but
  // the explanation reports the deeper attempt.
  EXPECT_TRUE(match(from_bf16, m.g, m.node(c.softmax)));
  constexpr auto strict_from_bf16 = op<"Softmax">(
      optional<"Cast">(capture<"in">.dtype<dtype::bfloat16>()).from<dtype::bfloat16>());
  EXPECT_EQ(why(strict_from_bf16, m, c.softmax),
            "input 0 of Softmax 'Softmax_1': Cast 'Cast_0': input 0 has dtype float16, expected "
            "bfloat16");
  // optional<> is not a filter: a Cast to float32 does not fit .to<float16>(), so the pattern
  // takes the branch without a Cast and captures the Cast's output itself.
  const auto r =
      match(op<"Softmax">(optional<"Cast">(capture<"in">).to<dtype::float16>().bind<"c">()), m.g,
            m.node(c.softmax));
  ASSERT_TRUE(r);
  EXPECT_EQ(r.get<"c">(), no_id);
  EXPECT_EQ(m.g.name(r.get<"in">()), "Cast_0");
}

// ---- any_of and commutative: real backtracking

TEST(AnyOf, BacktracksWhenALaterInputFails) {
  model_builder b;
  auto p_in = b.input("p", dtype::float32, {4});
  auto q_in = b.input("q", dtype::float32, {4});
  auto mul = b.op("Mul", {p_in, q_in});
  auto add = b.op("Add", {mul, q_in});
  b.output(add);
  indexed m(b);
  // Branch 0 binds a = p and then input 1 of Add (q) disagrees; branch 1 binds a = q and succeeds.
  constexpr auto p = op<"Add">(
      any_of(op<"Mul">(capture<"a">, any()), op<"Mul">(any(), capture<"a">)).bind<"which">(),
      capture<"a">);
  const auto r = match(p, m.g, m.node(add));
  ASSERT_TRUE(r);
  EXPECT_EQ(r.get<"which">(), 1u);
  EXPECT_EQ(m.g.name(r.get<"a">()), "q");
}

TEST(AnyOf, CapturesOfTheUntakenBranchAreUnbound) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto neg = b.op("Neg", {x});
  b.output(neg);
  indexed m(b);
  constexpr auto p = any_of(op<"Relu">(capture<"relu_in">), op<"Neg">(capture<"neg_in">));
  const auto r = match(p, m.g, m.node(neg));
  ASSERT_TRUE(r);
  EXPECT_FALSE(r.has<"relu_in">());
  EXPECT_TRUE(r.has<"neg_in">());
  // Neither alternative is Sqrt.
  EXPECT_FALSE(match(any_of(op<"Relu">(any()), op<"Sqrt">(any())), m.g, m.node(neg)));
}

TEST(AnyOf, AnAlternativeThatFailedWhereALaterOneMatchedExplainsNothing) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto neg = b.op("Neg", {b.op("Sqrt", {x})});
  auto add = b.op("Add", {neg, b.scalar(dtype::float32, 2.0)});
  b.output(add);
  indexed m(b);
  // Sqrt's input is no Exp, so branch 0 fails three nodes deep, but branch 1 takes Sqrt as it is;
  // the match then fails at the constant, and that is the reason, shallower as it is.
  constexpr auto p = op<"Add">(op<"Neg">(any_of(op<"Sqrt">(op<"Exp">(any())), capture<"y">)),
                               constant_scalar<"one">.value(1.0));
  EXPECT_EQ(why(p, m, add), "input 1 of Add 'Add_3': constant scalar 'one' is 2, expected 1");
  // With no alternative matching there, the deepest failure stays the reason.
  constexpr auto q =
      op<"Add">(op<"Neg">(any_of(op<"Sqrt">(op<"Exp">(any())), op<"Relu">(any()))), any());
  EXPECT_EQ(why(q, m, add),
            "input 0 of Sqrt 'Sqrt_0', input 0 of Neg 'Neg_1', input 0 of Add 'Add_3': expected "
            "Exp, found graph input 'x'");
}

TEST(Commutative, TriesBothOrders) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto left = b.op("Mul", {b.scalar(dtype::float32, 2.0), x});
  auto right = b.op("Mul", {x, b.scalar(dtype::float32, 2.0)});
  auto both = b.op("Mul", {x, x});
  for (auto& v : {left, right, both}) b.output(v);
  indexed m(b);
  constexpr auto p = commutative(op<"Mul">(capture<"x">, constant_scalar<"s">));
  EXPECT_TRUE(match(p, m.g, m.node(left)));
  EXPECT_TRUE(match(p, m.g, m.node(right)));
  // Neither operand is a constant. The two failures explain as much: the one told is the same
  // whichever operand the pattern lists first.
  EXPECT_EQ(why(p, m, both),
            "input 0 of Mul 'Mul_4': expected constant scalar 's', graph input 'x' is not a "
            "constant");
  constexpr auto swapped = commutative(op<"Mul">(constant_scalar<"s">, capture<"x">));
  EXPECT_EQ(why(swapped, m, both), why(p, m, both));
}

TEST(Commutative, BacktracksIntoTheOtherOrder) {
  model_builder b;
  auto p_in = b.input("p", dtype::float32, {4});
  auto q_in = b.input("q", dtype::float32, {4});
  auto add = b.op("Add", {b.op("Mul", {p_in, q_in}), q_in});
  b.output(add);
  indexed m(b);
  // Order (0, 1) binds a = p; Add's input 1 is q, so only the swapped order lets the match finish.
  constexpr auto p = op<"Add">(commutative(op<"Mul">(capture<"a">, any())), capture<"a">);
  const auto r = match(p, m.g, m.node(add));
  ASSERT_TRUE(r);
  EXPECT_EQ(m.g.name(r.get<"a">()), "q");
}

// ---- predicates

TEST(Predicates, DtypeRankShape) {
  model_builder b;
  auto x = b.input("x", dtype::float16, {2, "S", 64});
  auto relu = b.op("Relu", {x});
  b.output(relu);
  indexed m(b);
  EXPECT_TRUE(match(op<"Relu">(any().dtype<dtype::float16, dtype::bfloat16>().rank<3>()), m.g,
                    m.node(relu)));
  EXPECT_TRUE(match(op<"Relu">(any().shape(2, "S", any_dim)), m.g, m.node(relu)));
  EXPECT_TRUE(match(op<"Relu">(any()).dtype<dtype::float16>(), m.g, m.node(relu)));
  // float16 is not float32.
  EXPECT_EQ(why(op<"Relu">(any().dtype<dtype::float32>()), m, relu),
            "input 0 of Relu 'Relu_0': graph input 'x' has dtype float16, expected float32");
  // Rank 3, not 4.
  EXPECT_EQ(why(op<"Relu">(any().rank<4>()), m, relu),
            "input 0 of Relu 'Relu_0': graph input 'x' has rank 3, expected 4");
  // The sequence dimension is symbolic S, not a static 128.
  EXPECT_EQ(
      why(op<"Relu">(any().shape(2, 128, 64)), m, relu),
      "input 0 of Relu 'Relu_0': graph input 'x' has shape [2, S, 64], expected [2, 128, 64]");
  // Nothing declares the Relu output's shape.
  EXPECT_EQ(why(op<"Relu">(any()).rank<3>(), m, relu),
            "Relu 'Relu_0' has unknown rank, expected 3");
}

TEST(Predicates, AttributeValuesSetsListsAndPredicates) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {2, 3, 4, 5});
  auto t = b.op("Transpose", {x}, {{"perm", std::vector<std::int64_t>{0, 2, 1, 3}}});
  auto cast = b.op("Cast", {t}, {{"to", dtype::float16}});
  auto ln = b.op("LayerNormalization", {cast, b.scalar(dtype::float16, 1)}, {{"epsilon", 1e-6}});
  b.output(ln);
  indexed m(b);
  EXPECT_TRUE(match(op<"Transpose">(any()).attr<"perm">(ints(0, 2, 1, 3)), m.g, m.node(t)));
  EXPECT_TRUE(match(op<"Cast">(any()).attr<"to">(one_of(1, 10)), m.g, m.node(cast)));
  EXPECT_TRUE(match(op<"Cast">(any()).attr<"to">(dtype::float16), m.g, m.node(cast)));
  EXPECT_TRUE(match(op<"LayerNormalization">(any(), any()).attr<"epsilon">(1e-6), m.g, m.node(ln)));
  EXPECT_TRUE(match(op<"LayerNormalization">(any(), any())
                        .attr<"epsilon">(satisfies(
                            "small", [](const onnx::AttributeProto& a) { return a.f() < 1e-3f; })),
                    m.g, m.node(ln)));
  // (0, 2, 1, 3) swaps heads and sequence; (0, 1, 3, 2) would transpose K.
  EXPECT_EQ(why(op<"Transpose">(any()).attr<"perm">(ints(0, 1, 3, 2)), m, t),
            "Transpose 'Transpose_0': perm = [0, 2, 1, 3], expected [0, 1, 3, 2]");
  // float16 (10) is neither float32 nor bfloat16.
  EXPECT_EQ(
      why(op<"Cast">(any()).attr<"to">(one_of_dtypes<dtype::float32, dtype::bfloat16>()), m, cast),
      "Cast 'Cast_1': to = 10, expected one of {1, 16}");
  EXPECT_EQ(why(op<"LayerNormalization">(any(), any()).attr<"epsilon">(1e-5), m, ln),
            "LayerNormalization 'LayerNormalization_3': epsilon = 1e-06, expected 1e-05");
  // The schema default of `axis` is -1; stash_type has no such value.
  EXPECT_EQ(why(op<"LayerNormalization">(any(), any()).attr<"stash_type">(2), m, ln),
            "LayerNormalization 'LayerNormalization_3': stash_type = 1 (opset 17 default), "
            "expected 2");
  // saturate came in Cast-19: at opset 17 the node does what saturate(1) asks of a later one.
  EXPECT_TRUE(match(op<"Cast">(any()).attr<"saturate">(1), m.g, m.node(cast)));
  // No opset of Cast has this name: a misspelling is refused, not waved through.
  EXPECT_EQ(why(op<"Cast">(any()).attr<"saturates">(1), m, cast),
            "Cast 'Cast_1': has no attribute saturates, expected 1");
}

TEST(Predicates, LastAxisUnderstandsMinusOneAndRankMinusOne) {
  model_builder b(11);
  auto x = b.input("x", dtype::float32, {2, 3, 4});
  auto minus_one = b.op("Softmax", {x}, {{"axis", -1}});
  auto two = b.op("Softmax", {x}, {{"axis", 2}});
  auto middle = b.op("Softmax", {x}, {{"axis", 1}});
  auto absent = b.op("Softmax", {x});
  for (auto& v : {minus_one, two, middle, absent}) b.output(v);
  indexed m(b);
  constexpr auto p = op<"Softmax">(any()).attr<"axis">(last_axis);
  EXPECT_TRUE(match(p, m.g, m.node(minus_one)));
  EXPECT_TRUE(match(p, m.g, m.node(two)));
  // Axis 1 of a rank-3 input is not the last axis.
  EXPECT_EQ(why(p, m, middle), "Softmax 'Softmax_2': axis = 1, expected the last axis");
  // Before opset 13 an absent axis means 1.
  EXPECT_EQ(why(p, m, absent),
            "Softmax 'Softmax_3': axis = 1 (opset 11 default), expected the last axis");
}

TEST(Predicates, OpsetRangeAndWhere) {
  model_builder b(12);
  auto x = b.input("x", dtype::float32, {2, 3});
  auto softmax = b.op("Softmax", {x});
  b.output(softmax);
  indexed m(b);
  EXPECT_TRUE(match(op<"Softmax">(any()).opset<11, 12>(), m.g, m.node(softmax)));
  // Opset 12 is below the 13 this pattern needs.
  EXPECT_EQ(why(op<"Softmax">(any()).opset<13>(), m, softmax),
            "Softmax 'Softmax_0': the model imports opset 12 of its domain, expected opset 13+");
  constexpr auto named = op<"Softmax">(any()).where(
      "named 'attn'", [](const graph& g, node_id n) { return g.node(n).name() == "attn"; });
  EXPECT_EQ(why(named, m, softmax), "Softmax 'Softmax_0': not named 'attn'");
  constexpr auto two_wide = op<"Softmax">(any().where(
      "2 wide", [](const graph& g, auto v) { return g.shape(v).dims.back().size == 2; }));
  EXPECT_EQ(why(two_wide, m, softmax),
            "input 0 of Softmax 'Softmax_0': graph input 'x': not 2 wide");
}

// ---- constants

TEST(ConstantScalar, AnyDtypeInitializerOrConstantNode) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  std::vector<value> scales = {b.scalar(dtype::float16, 0.125),
                               b.scalar(dtype::bfloat16, 0.125),
                               b.scalar(dtype::float64, 0.125),
                               b.initializer(dtype::float32, {1}, {0.125}),
                               b.initializer(dtype::float32, {1, 1}, {0.125}),
                               b.constant_scalar(dtype::float32, 0.125),
                               b.constant(dtype::float16, {1}, {0.125})};
  std::vector<value> muls;
  for (const auto& s : scales) muls.push_back(b.op("Mul", {x, s}));
  for (const auto& v : muls) b.output(v);
  indexed m(b);
  constexpr auto p = op<"Mul">(any(), constant_scalar<"scale">);
  for (const auto& mul : muls) {
    const auto r = match(p, m.g, m.node(mul));
    ASSERT_TRUE(r) << mul.name;
    EXPECT_EQ(r.get<"scale">(), 0.125);
  }
  EXPECT_TRUE(match(op<"Mul">(any(), constant_scalar<"scale">.value(0.125)), m.g, m.node(muls[0])));
  // 0.125 is not 1/√64 = 0.125 … but it is not 0.5.
  EXPECT_EQ(why(op<"Mul">(any(), constant_scalar<"scale">.value(0.5)), m, muls[0]),
            "input 1 of Mul 'Mul_7': constant scalar 'scale' is 0.125, expected 0.5");
}

TEST(ConstantScalar, AValueIsAlsoTheNumberItsTypeHoldsNearest) {
  // √(2/π) = 0.7978846 is 0.796875 in bfloat16 (8 bits of mantissa) and 0.7978516 in float16: no
  // constant of those types is nearer, whatever the tolerance the pattern asks.
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  std::vector<value> muls;
  for (const dtype t : {dtype::bfloat16, dtype::float16, dtype::float32})
    muls.push_back(b.op("Mul", {x, b.scalar(t, 0.7978846)}));
  auto off = b.op("Mul", {x, b.scalar(dtype::bfloat16, 0.8)});
  for (const auto& v : muls) b.output(v);
  b.output(off);
  indexed m(b);
  constexpr auto p = op<"Mul">(any(), constant_scalar<"√(2/π)">.value(0.7978846, 1e-6));
  for (const auto& mul : muls) EXPECT_TRUE(match(p, m.g, m.node(mul))) << mul.name;
  // bfloat16's 0.8 is 0.80078125, the next number up: not √(2/π).
  EXPECT_EQ(why(p, m, off),
            "input 1 of Mul 'Mul_7': constant scalar '√(2/π)' is 0.80078125, expected 0.7978846");
}

TEST(ConstantScalar, NearMisses) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto overridable = b.input("s", dtype::float32, {});
  b.initializer("s", dtype::float32, {}, {2.0});
  auto vector_scale = b.initializer("w", dtype::float32, {2}, {1, 2});
  auto by_vector = b.op("Mul", {x, vector_scale});
  auto by_input = b.op("Mul", {x, overridable});
  auto by_node = b.op("Mul", {x, b.op("Sqrt", {x})});
  for (auto& v : {by_vector, by_input, by_node}) b.output(v);
  indexed m(b);
  constexpr auto p = op<"Mul">(any(), constant_scalar<"scale">);
  // Two elements are not a scalar.
  EXPECT_EQ(why(p, m, by_vector),
            "input 1 of Mul 'Mul_0': expected constant scalar 'scale', initializer 'w' has 2 "
            "elements of float32");
  // An initializer that is also a graph input can be fed at run time.
  EXPECT_EQ(why(p, m, by_input),
            "input 1 of Mul 'Mul_1': expected constant scalar 'scale', initializer 's' is also a "
            "graph input, so it can be overridden at run time");
  // A computed value is not a constant.
  EXPECT_EQ(why(p, m, by_node),
            "input 1 of Mul 'Mul_3': expected constant scalar 'scale', Sqrt 'Sqrt_2' is not a "
            "constant");
}

TEST(Constant, BindsTheTensor) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {2});
  auto w = b.initializer("w", dtype::float32, {2}, {1, 2});
  auto add = b.op("Add", {x, w});
  b.output(add);
  indexed m(b);
  const auto r = match(op<"Add">(any(), constant<"bias">), m.g, m.node(add));
  ASSERT_TRUE(r);
  EXPECT_EQ(r.get<"bias">()->name(), "w");
  // x is fed at run time.
  EXPECT_EQ(why(op<"Add">(constant<"bias">, any()), m, add),
            "input 0 of Add 'Add_0': expected constant 'bias', graph input 'x' is not a constant");
}

// ---- consumers: interior nodes may not escape the match

struct shared_interior {
  model_builder b;
  value x = b.input("x", dtype::float32, {4});
  value relu = b.op("Relu", {x});
  value neg = b.op("Neg", {relu});
  value square = b.op("Mul", {relu, relu});
};

TEST(Uses, InteriorOutputsMustNotEscape) {
  shared_interior s;
  s.b.output(s.neg);
  s.b.output(s.square);
  indexed m(s.b);
  // Relu is also read by Mul, outside the pattern: fusing Neg(Relu) would drop a live tensor.
  EXPECT_EQ(why(op<"Neg">(op<"Relu">(any())), m, s.neg),
            "output of Relu 'Relu_0' is also read by Mul 'Mul_2', outside the pattern");
  EXPECT_TRUE(match(op<"Neg">(op<"Relu">(any()).multi_use()), m.g, m.node(s.neg)));
}

TEST(Uses, ReadsInsideTheMatchAreFineAndOneUseIsStricter) {
  model_builder b;
  auto relu = b.op("Relu", {b.input("x", dtype::float32, {4})});
  auto square = b.op("Mul", {relu, relu});
  b.output(square);
  indexed m(b);
  struct {
    value square;
  } s{square};
  // Mul reads Relu twice, both reads inside the match.
  EXPECT_TRUE(match(op<"Mul">(op<"Relu">(any()), op<"Relu">(any())), m.g, m.node(s.square)));
  EXPECT_TRUE(
      match(op<"Mul">(capture<"r">(op<"Relu">(any())), capture<"r">), m.g, m.node(s.square)));
  EXPECT_TRUE(match(op<"Mul">(capture<"r">(op<"Relu">(any()).one_user()), capture<"r">), m.g,
                    m.node(s.square)));
  // Two reads, one allowed.
  EXPECT_EQ(why(op<"Mul">(capture<"r">(op<"Relu">(any()).one_use()), capture<"r">), m, s.square),
            "output of Relu 'Relu_0' is read 2 times, the pattern allows one");
}

TEST(Uses, GraphOutputsCannotBeFusedAwayButTheRootIsExempt) {
  shared_interior s;
  s.b.output(s.relu);
  s.b.output(s.neg);
  indexed m(s.b);
  EXPECT_EQ(why(op<"Neg">(op<"Relu">(any())), m, s.neg),
            "output of Relu 'Relu_0' is a graph output, so it cannot be fused away");
  // Relu as the root: its readers are whoever uses the fused result.
  EXPECT_TRUE(match(op<"Relu">(any()), m.g, m.node(s.relu)));
}

TEST(Uses, ReadsFromInsideASubgraphCount) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto cond = b.input("cond", dtype::boolean, {});
  auto relu = b.op("Relu", {x});
  auto neg = b.op("Neg", {relu});
  auto body = b.subgraph("then");
  body.output(body.op("Identity", {relu}), dtype::float32);
  auto branch = b.op("If", {cond}, {{"then_branch", body.proto()}, {"else_branch", body.proto()}});
  b.output(neg);
  b.output(branch);
  indexed m(b);
  // The If bodies read Relu's output through the outer scope.
  EXPECT_EQ(why(op<"Neg">(op<"Relu">(any())), m, neg),
            "output of Relu 'Relu_0' is also read by If 'If_3', outside the pattern");
}

TEST(Subgraphs, PatternsMatchInsideBodies) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto cond = b.input("cond", dtype::boolean, {});
  auto body = b.subgraph("then");
  body.output(body.op("Neg", {body.op("Relu", {x})}), dtype::float32);
  b.output(b.op("If", {cond}, {{"then_branch", body.proto()}, {"else_branch", body.proto()}}));
  indexed m(b);
  const graph& then_body = *m.g.subgraphs(0)[0].body;
  const auto r = match(op<"Neg">(op<"Relu">(capture<"x">)), then_body, 1);
  ASSERT_TRUE(r);
  EXPECT_TRUE(then_body.is_outer_scope(r.get<"x">()));
}

// ---- maybe and all: optional trailing inputs, variadic inputs

TEST(Maybe, TrailingInputsMayBeOmitted) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4, 8});
  auto starts = b.initializer("starts", dtype::int64, {1}, {0});
  auto ends = b.initializer("ends", dtype::int64, {1}, {2});
  auto axes = b.initializer("axes", dtype::int64, {1}, {1});
  auto steps = b.initializer("steps", dtype::int64, {1}, {1});
  auto three = b.op("Slice", {x, starts, ends});
  auto four = b.op("Slice", {x, starts, ends, axes});
  auto five = b.op("Slice", {x, starts, ends, axes, steps});
  auto gap = b.op("Slice", {x, starts, ends, value{}, steps});
  auto trailing_blank = b.op("Slice", {x, starts, ends, axes, value{}});
  for (auto& v : {three, four, five, gap, trailing_blank}) b.output(v);
  indexed m(b);
  constexpr auto p = op<"Slice">(capture<"data">, constant<"starts">, constant<"ends">,
                                 maybe(constant<"axes">), maybe(constant<"steps">));
  const auto r3 = match(p, m.g, m.node(three));
  ASSERT_TRUE(r3);
  EXPECT_FALSE(r3.has<"axes">());
  EXPECT_FALSE(r3.has<"steps">());
  EXPECT_EQ(r3.get<"axes">(), nullptr);
  const auto r4 = match(p, m.g, m.node(four));
  ASSERT_TRUE(r4);
  EXPECT_EQ(r4.get<"axes">()->name(), "axes");
  EXPECT_FALSE(r4.has<"steps">());
  const auto r5 = match(p, m.g, m.node(five));
  ASSERT_TRUE(r5);
  EXPECT_EQ(r5.get<"steps">()->name(), "steps");
  // An omitted input in the middle ("") is omitted too.
  const auto rgap = match(p, m.g, m.node(gap));
  ASSERT_TRUE(rgap);
  EXPECT_FALSE(rgap.has<"axes">());
  EXPECT_TRUE(rgap.has<"steps">());
  const auto rblank = match(p, m.g, m.node(trailing_blank));
  ASSERT_TRUE(rblank);
  EXPECT_TRUE(rblank.has<"axes">());
  EXPECT_FALSE(rblank.has<"steps">());
  EXPECT_EQ(describe(p),
            "Slice(data, starts:constant, ends:constant, maybe(axes:constant), "
            "maybe(steps:constant))");
}

TEST(Maybe, NearMisses) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4, 8});
  auto starts = b.initializer("starts", dtype::int64, {1}, {0});
  auto ends = b.initializer("ends", dtype::int64, {1}, {2});
  auto two = b.op("Slice", {x, starts});
  auto computed_axes = b.op("Slice", {x, starts, ends, b.op("Shape", {x})});
  for (auto& v : {two, computed_axes}) b.output(v);
  indexed m(b);
  constexpr auto p = op<"Slice">(capture<"data">, constant<"starts">, constant<"ends">,
                                 maybe(constant<"axes">), maybe(constant<"steps">));
  // ends is not optional.
  EXPECT_EQ(why(p, m, two), "Slice 'Slice_0' has 2 inputs, the pattern expects 3 to 5");
  // A given input must match: maybe() is not a wildcard.
  EXPECT_EQ(why(p, m, computed_axes),
            "input 3 of Slice 'Slice_2': expected constant 'axes', Shape 'Shape_1' is not a "
            "constant");
}

TEST(All, BindsEveryInputAsAList) {
  model_builder b;
  auto x = b.input("x", dtype::float16, {2, 4});
  auto y = b.input("y", dtype::float16, {2, 4});
  auto z = b.input("z", dtype::float32, {2, 4});
  auto three = b.op("Concat", {x, y, x}, {{"axis", 1}});
  auto one = b.op("Concat", {y}, {{"axis", 1}});
  auto mixed = b.op("Concat", {x, z}, {{"axis", 1}});
  auto none = b.op("Concat", {}, {{"axis", 1}});
  for (auto& v : {three, one, mixed, none}) b.output(v);
  indexed m(b);
  constexpr auto p = op<"Concat">(all<"parts">);
  const auto r = match(p, m.g, m.node(three));
  ASSERT_TRUE(r);
  const std::span<const value_id> parts = r.get<"parts">();
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(m.g.name(parts[0]), "x");
  EXPECT_EQ(m.g.name(parts[1]), "y");
  EXPECT_EQ(m.g.name(parts[2]), "x");
  const auto r1 = match(p, m.g, m.node(one));
  ASSERT_TRUE(r1);
  ASSERT_EQ(r1.get<"parts">().size(), 1u);
  EXPECT_TRUE(match(p, m.g, m.node(mixed)));
  // A failed match leaves an empty list.
  const auto r0 = match(p, m.g, m.node(none));
  EXPECT_FALSE(r0);
  EXPECT_TRUE(r0.get<"parts">().empty());
  EXPECT_EQ(why(p, m, none), "Concat 'Concat_3' has 0 inputs, the pattern expects at least 1");
  // all<>(p): every input matches p.
  constexpr auto halves = op<"Concat">(all<"parts">(any().dtype<dtype::float16>()));
  EXPECT_TRUE(match(halves, m.g, m.node(three)));
  EXPECT_EQ(why(halves, m, mixed),
            "input 1 of Concat 'Concat_2': graph input 'z' has dtype float32, expected float16");
  EXPECT_EQ(describe(p), "Concat(parts:all)");
  EXPECT_EQ(describe(halves), "Concat(parts:all(_{dtype float16}))");
}

TEST(Around, FindsOneInputWhereverItStandsAndBindsTheOthers) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {2, 4});
  auto y = b.input("y", dtype::float32, {2, 4});
  auto neg = b.op("Neg", {x});
  auto first = b.op("Concat", {neg, x, y}, {{"axis", 1}});
  auto middle = b.op("Concat", {x, neg, y}, {{"axis", 1}});
  auto last = b.op("Concat", {x, y, neg}, {{"axis", 1}});
  auto alone = b.op("Concat", {neg}, {{"axis", 1}});
  auto without = b.op("Concat", {x, y}, {{"axis", 1}});
  for (auto& v : {first, middle, last, alone, without}) b.output(v);
  indexed m(b);
  constexpr auto p = op<"Concat">(around<"before", "after">(op<"Neg">(capture<"a">).multi_use()));
  const auto names = [&](std::span<const value_id> list) {
    std::string out;
    for (value_id v : list) out += std::string(m.g.name(v)) + " ";
    return out;
  };
  const auto r_first = match(p, m.g, m.node(first));
  ASSERT_TRUE(r_first);
  EXPECT_EQ(names(r_first.get<"before">()), "");
  EXPECT_EQ(names(r_first.get<"after">()), "x y ");
  EXPECT_EQ(m.g.name(r_first.get<"a">()), "x");
  const auto r_middle = match(p, m.g, m.node(middle));
  ASSERT_TRUE(r_middle);
  EXPECT_EQ(names(r_middle.get<"before">()), "x ");
  EXPECT_EQ(names(r_middle.get<"after">()), "y ");
  const auto r_last = match(p, m.g, m.node(last));
  ASSERT_TRUE(r_last);
  EXPECT_EQ(names(r_last.get<"before">()), "x y ");
  EXPECT_EQ(names(r_last.get<"after">()), "");
  const auto r_alone = match(p, m.g, m.node(alone));
  ASSERT_TRUE(r_alone);
  EXPECT_TRUE(r_alone.get<"before">().empty() && r_alone.get<"after">().empty());
  // No input is a Neg: each fails as deep as the other, and the explanation names the first.
  EXPECT_FALSE(match(p, m.g, m.node(without)));
  EXPECT_EQ(why(p, m, without),
            "input 0 of Concat 'Concat_5': expected Neg, found graph input 'x'");
  EXPECT_EQ(describe(p), "Concat(before:all, Neg{multi-use}(a), after:all)");
}

TEST(Around, TriesTheNextPositionWhenTheRestFails) {
  // Sum(Neg(y), Neg(x)) · x: the first Neg binds a to y, which the Mul's x is not; the second
  // holds.
  model_builder b;
  auto x = b.input("x", dtype::float32, {2, 4});
  auto y = b.input("y", dtype::float32, {2, 4});
  auto product = b.op("Mul", {b.op("Sum", {b.op("Neg", {y}), b.op("Neg", {x})}), x});
  b.output(product);
  indexed m(b);
  constexpr auto p =
      op<"Mul">(op<"Sum">(around<"before", "after">(op<"Neg">(capture<"a">))), capture<"a">);
  const auto r = match(p, m.g, m.node(product));
  ASSERT_TRUE(r);
  EXPECT_EQ(m.g.name(r.get<"a">()), "x");
  EXPECT_EQ(r.get<"before">().size(), 1u);
  EXPECT_TRUE(r.get<"after">().empty());
}

// ---- predicates that ask the facts oracle or see the captures bound so far

TEST(Predicates, ProvenRank) {
  model_builder b;
  auto x = b.input("x", dtype::float16, {2, "S", 64});
  auto y = b.input("y", dtype::float16);
  auto neg = b.op("Neg", {b.op("Relu", {x})});
  auto neg_y = b.op("Neg", {y});
  for (auto& v : {neg, neg_y}) b.output(v);
  indexed m(b);
  // Nothing declares the Relu output, but Relu keeps its input's shape.
  EXPECT_TRUE(match(op<"Neg">(any().proven_rank<3>()), m.g, m.node(neg)));
  EXPECT_EQ(why(op<"Neg">(any().rank<3>()), m, neg),
            "input 0 of Neg 'Neg_1': Relu 'Relu_0' has unknown rank, expected 3");
  EXPECT_EQ(why(op<"Neg">(any().proven_rank<4>()), m, neg),
            "input 0 of Neg 'Neg_1': Relu 'Relu_0' is not proven rank 4: it is [2, S, 64]");
  EXPECT_EQ(why(op<"Neg">(any().proven_rank<4>()), m, neg_y),
            "input 0 of Neg 'Neg_2': graph input 'y' is not proven rank 4: it is unknown rank");
  EXPECT_EQ(describe(op<"Neg">(capture<"x">.proven_rank<4>())), "Neg(x{proven rank 4})");
}

TEST(Predicates, SameDimAsAnEarlierCapture) {
  model_builder b;
  auto q = b.input("q", dtype::float16, {2, 8, "S", 64});
  auto kt = b.input("kt", dtype::float16, {2, 8, 64, "T"});
  auto narrow = b.input("narrow", dtype::float16, {2, 8, 32, "S"});
  auto scores = b.op("MatMul", {q, kt});
  auto mismatched = b.op("MatMul", {q, narrow});
  for (auto& v : {scores, mismatched}) b.output(v);
  indexed m(b);
  constexpr auto p =
      op<"MatMul">(capture<"q">, capture<"kt">.same_dim<-2, "q", -1>().same_dim<0, "q", 0>());
  EXPECT_TRUE(match(p, m.g, m.node(scores)));
  // 32 is not 64.
  EXPECT_EQ(why(p, m, mismatched),
            "input 1 of MatMul 'MatMul_1': graph input 'narrow': dim -2 is not equal to dim -1 "
            "of 'q': [2, 8, 32, S] vs [2, 8, S, 64]");
  // T and S are different names: they may be equal at run time, nothing proves it.
  EXPECT_EQ(why(op<"MatMul">(capture<"q">, capture<"kt">.same_dim<-1, "q", -2>()), m, scores),
            "input 1 of MatMul 'MatMul_0': graph input 'kt': dim -1 is not proven equal to dim "
            "-2 of 'q': [2, 8, 64, T] vs [2, 8, S, 64]");
  // Inputs match in order: kt is not bound yet when q is checked.
  EXPECT_EQ(why(op<"MatMul">(capture<"q">.same_dim<-1, "kt", -2>(), capture<"kt">), m, scores),
            "input 0 of MatMul 'MatMul_0': graph input 'q': same_dim needs 'kt', which is not "
            "bound yet at this point of the match");
  EXPECT_EQ(describe(p), "MatMul(q, kt{dim -2 = dim -1 of 'q'}{dim 0 = dim 0 of 'q'})");
}

TEST(Predicates, WhereBoundSeesEarlierCaptures) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto y = b.input("y", dtype::float32, {4});
  auto product = b.op("Mul", {x, y});
  auto square = b.op("Mul", {x, x});
  auto scaled = b.op("Mul", {b.scalar(dtype::float32, 2), x});
  for (auto& v : {product, square, scaled}) b.output(v);
  indexed m(b);
  constexpr auto p = op<"Mul">(
      capture<"a">,
      any().where_bound("another value than 'a'", [](const graph&, value_id v, const auto& bound) {
        return bound.template has<"a">() && bound.template get<"a">() != v;
      }));
  EXPECT_TRUE(match(p, m.g, m.node(product)));
  EXPECT_EQ(why(p, m, square),
            "input 1 of Mul 'Mul_1': graph input 'x': not another value than 'a'");
  // Numbers, tensors and nodes read back with their own types.
  constexpr auto positive_scale = op<"Mul">(
      constant_scalar<"s">,
      capture<"x">.where_bound("scaled up", [](const graph&, value_id, const auto& bound) {
        const double s = bound.template get<"s">();
        return s > 1;
      }));
  EXPECT_TRUE(match(positive_scale, m.g, m.node(scaled)));
  EXPECT_EQ(describe(p), "Mul(a, _{another value than 'a'})");
}

TEST(Predicates, ProvenValueTellsNoFromUnknown) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto d = b.input("d", dtype::float32, {});
  auto eight = b.op("Mul", {x, b.op("Sqrt", {b.scalar(dtype::float32, 64)})});
  auto six = b.op("Mul", {x, b.op("Sqrt", {b.scalar(dtype::float32, 36)})});
  auto fed = b.op("Mul", {x, b.op("Sqrt", {d})});
  for (auto& v : {eight, six, fed}) b.output(v);
  indexed m(b);
  constexpr auto p = op<"Mul">(any(), any().proven_value("8", [](const facts& f, value_id v) {
    const auto s = f.real_scalar(v);
    return !s ? truth::unknown : *s == 8 ? truth::yes : truth::no;
  }));
  EXPECT_TRUE(match(p, m.g, m.node(eight)));
  EXPECT_EQ(why(p, m, six), "input 1 of Mul 'Mul_5': Sqrt 'Sqrt_4': it is not 8");
  // d is fed at run time: its √ is not known.
  EXPECT_EQ(why(p, m, fed), "input 1 of Mul 'Mul_7': Sqrt 'Sqrt_6': not proven 8");
  EXPECT_EQ(describe(p), "Mul(_, _{8})");
}

// ---- ranges and infinities of constant scalars, contents of constant tensors

TEST(ConstantScalar, RangesAndInfinities) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto mask = b.input("mask", dtype::boolean, {4});
  std::vector<value> wheres;
  for (auto [type, fill] : {std::pair{dtype::float32, -inf},
                            {dtype::float16, -inf},
                            {dtype::float32, -1e4},
                            {dtype::float32, -5.0},
                            {dtype::float32, inf}})
    wheres.push_back(b.op("Where", {mask, x, b.scalar(type, fill)}));
  for (auto& v : wheres) b.output(v);
  indexed m(b);
  constexpr auto masked = op<"Where">(any(), any(), constant_scalar<"fill">.at_most(-1e4));
  EXPECT_TRUE(match(masked, m.g, m.node(wheres[0])));
  EXPECT_TRUE(match(masked, m.g, m.node(wheres[1])));
  EXPECT_TRUE(match(masked, m.g, m.node(wheres[2])));  // inclusive
  EXPECT_EQ(why(masked, m, wheres[3]),
            "input 2 of Where 'Where_7': constant scalar 'fill' is -5, expected at most -10000");
  EXPECT_EQ(why(op<"Where">(any(), any(), constant_scalar<"fill">.at_least(0)), m, wheres[3]),
            "input 2 of Where 'Where_7': constant scalar 'fill' is -5, expected at least 0");
  const auto r = match(masked, m.g, m.node(wheres[0]));
  ASSERT_TRUE(r);
  EXPECT_EQ(r.get<"fill">(), -inf);
  // An infinity equals itself, and nothing else.
  constexpr auto minus_inf = op<"Where">(any(), any(), constant_scalar<"fill">.value(-inf));
  EXPECT_TRUE(match(minus_inf, m.g, m.node(wheres[0])));
  EXPECT_TRUE(match(minus_inf, m.g, m.node(wheres[1])));
  EXPECT_EQ(why(minus_inf, m, wheres[2]),
            "input 2 of Where 'Where_5': constant scalar 'fill' is -10000, expected -inf");
  EXPECT_EQ(why(minus_inf, m, wheres[4]),
            "input 2 of Where 'Where_9': constant scalar 'fill' is inf, expected -inf");
  EXPECT_EQ(describe(constant_scalar<"fill">.at_least(-1).at_most(1)),
            "fill:constant scalar>=-1<=1");
}

TEST(Constant, ContentRules) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {3, 3});
  auto add = [&](const value& c) { return b.op("Add", {x, c}); };
  auto equal = add(b.initializer("equal", dtype::float32, {3}, {2, 2, 2}));
  auto unequal = add(b.initializer("unequal", dtype::int64, {3}, {2, 2, 3}));
  auto ones = add(b.initializer("ones", dtype::boolean, {2, 2}, {1, 1, 1, 1}));
  auto ones_f16 = add(b.constant(dtype::float16, {2}, {1, 1}));
  auto not_ones = add(b.initializer("not_ones", dtype::float32, {2, 3}, {1, 1, 1, 1, 1, 0}));
  auto tril = add(b.initializer("tril", dtype::boolean, {3, 3}, {1, 0, 0, 1, 1, 0, 1, 1, 1}));
  auto tril_batched =
      add(b.initializer("tril_batched", dtype::int64, {2, 2, 2}, {1, 0, 1, 1, 1, 0, 1, 1}));
  auto triu = add(b.initializer("triu", dtype::boolean, {2, 2}, {1, 1, 0, 1}));
  auto bad_batch =
      add(b.initializer("bad_batch", dtype::float32, {2, 2, 2}, {1, 0, 1, 1, 1, 0, 0, 1}));
  auto flat = add(b.initializer("flat", dtype::boolean, {3}, {1, 1, 1}));
  auto upper = add(b.initializer("upper", dtype::boolean, {2, 2}, {0, 1, 0, 0}));
  for (auto& v :
       {equal, unequal, ones, ones_f16, not_ones, tril, tril_batched, triu, bad_batch, flat, upper})
    b.output(v);
  indexed m(b);
  constexpr auto all_equal = op<"Add">(any(), constant<"m">.all_equal());
  constexpr auto all_ones = op<"Add">(any(), constant<"m">.all_ones());
  constexpr auto causal = op<"Add">(any(), constant<"m">.lower_triangular_ones());
  EXPECT_TRUE(match(all_equal, m.g, m.node(equal)));
  EXPECT_TRUE(match(all_equal, m.g, m.node(ones)));
  EXPECT_EQ(why(all_equal, m, unequal),
            "input 1 of Add 'Add_1': constant 'm' (initializer 'unequal') is not all equal: "
            "element [2] is 3, element [0] is 2");
  EXPECT_TRUE(match(all_ones, m.g, m.node(ones)));
  EXPECT_TRUE(match(all_ones, m.g, m.node(ones_f16)));
  EXPECT_EQ(why(all_ones, m, equal),
            "input 1 of Add 'Add_0': constant 'm' (initializer 'equal') is not all ones: element "
            "[0] is 2");
  EXPECT_EQ(why(all_ones, m, not_ones),
            "input 1 of Add 'Add_5': constant 'm' (initializer 'not_ones') is not all ones: "
            "element [1, 2] is 0");
  EXPECT_TRUE(match(causal, m.g, m.node(tril)));
  EXPECT_TRUE(match(causal, m.g, m.node(tril_batched)));
  EXPECT_EQ(why(causal, m, triu),
            "input 1 of Add 'Add_8': constant 'm' (initializer 'triu') is not lower-triangular "
            "ones: element [0, 1] is 1, expected 0");
  EXPECT_EQ(why(causal, m, bad_batch),
            "input 1 of Add 'Add_9': constant 'm' (initializer 'bad_batch') is not "
            "lower-triangular ones: element [1, 1, 0] is 0, expected 1");
  EXPECT_EQ(why(causal, m, flat),
            "input 1 of Add 'Add_10': constant 'm' (initializer 'flat') has rank 1, "
            "lower-triangular ones need at least 2");
  EXPECT_EQ(describe(causal), "Add(_, m:constant{lower-triangular ones})");
  // What a causal mask hides: ones strictly above the diagonal, the diagonal itself zero.
  constexpr auto hidden = op<"Add">(any(), constant<"m">.strictly_upper_triangular_ones());
  EXPECT_TRUE(match(hidden, m.g, m.node(upper)));
  EXPECT_EQ(why(hidden, m, triu),
            "input 1 of Add 'Add_8': constant 'm' (initializer 'triu') is not strictly "
            "upper-triangular ones: element [0, 0] is 1, expected 0");
  EXPECT_EQ(why(hidden, m, tril),
            "input 1 of Add 'Add_6': constant 'm' (initializer 'tril') is not strictly "
            "upper-triangular ones: element [0, 0] is 1, expected 0");
}

// ---- one value read by two matched nodes

struct shared_scale {
  model_builder b;
  value q = b.input("q", dtype::float32, {2, 8, "S", 64});
  value kt = b.input("kt", dtype::float32, {2, 8, 64, "S"});
  value s = b.op("Sqrt", {b.input("d", dtype::float32, {})});
  value scores = b.op("MatMul", {b.op("Mul", {q, s}), b.op("Mul", {kt, s})});
};

TEST(Uses, OneValueReadByTwoMatchedNodes) {
  shared_scale g;
  g.b.output(g.scores);
  indexed m(g.b);
  // s comes from outside the pattern: no policy applies to it.
  constexpr auto outside =
      op<"MatMul">(op<"Mul">(capture<"q">, capture<"s">), op<"Mul">(capture<"kt">, capture<"s">));
  const auto r = match(outside, m.g, m.node(g.scores));
  ASSERT_TRUE(r);
  EXPECT_EQ(r.get<"s">(), *m.g.find_value(g.s.name));
  // Sqrt matched twice, once through each Mul: both of its reads are inside the match.
  constexpr auto root = op<"Sqrt">(any());
  constexpr auto inside =
      op<"MatMul">(op<"Mul">(capture<"q">, root), op<"Mul">(capture<"kt">, root));
  const auto r2 = match(inside, m.g, m.node(g.scores));
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2.nodes().size(), 5u);  // the Sqrt is listed twice
  constexpr auto same_node = op<"MatMul">(op<"Mul">(capture<"q">, capture<"s">(root)),
                                          op<"Mul">(capture<"kt">, capture<"s">));
  EXPECT_TRUE(match(same_node, m.g, m.node(g.scores)));
}

TEST(Uses, OneValueReadByTwoMatchedNodesAndOneOutside) {
  shared_scale g;
  auto leak = g.b.op("Neg", {g.s});
  g.b.output(g.scores);
  g.b.output(leak);
  indexed m(g.b);
  constexpr auto root = op<"Sqrt">(any());
  constexpr auto inside =
      op<"MatMul">(op<"Mul">(capture<"q">, root), op<"Mul">(capture<"kt">, root));
  EXPECT_EQ(why(inside, m, g.scores),
            "output of Sqrt 'Sqrt_0' is also read by Neg 'Neg_4', outside the pattern");
  // .one_use() still counts reads: two Muls read it.
  constexpr auto once = op<"Sqrt">(any()).one_use();
  shared_scale h;
  h.b.output(h.scores);
  indexed n(h.b);
  EXPECT_EQ(
      why(op<"MatMul">(op<"Mul">(capture<"q">, once), op<"Mul">(capture<"kt">, once)), n, h.scores),
      "output of Sqrt 'Sqrt_0' is read 2 times, the pattern allows one");
}

// ---- transparent: skipping nodes that pass the value on unchanged

struct preserving {
  model_builder b;
  value x = b.input("x", dtype::float16, {2, 8});
  value softmax() { return b.op("Softmax", {x}, {{"axis", -1}}); }
  value relu(const value& v) { return b.op("Relu", {v}); }
  value cast(const value& v, dtype to) { return b.op("Cast", {v}, {{"to", to}}); }
  value identity(const value& v) { return b.op("Identity", {v}); }
};

TEST(Transparent, SkipsIdentityNoOpCastsAndExactRoundTrips) {
  preserving t;
  auto bare = t.relu(t.softmax());
  auto identity = t.relu(t.identity(t.softmax()));
  auto same_type = t.relu(t.cast(t.softmax(), dtype::float16));
  auto round_trip = t.relu(t.cast(t.cast(t.softmax(), dtype::float32), dtype::float16));
  auto four =
      t.relu(t.identity(t.cast(t.cast(t.identity(t.softmax()), dtype::float32), dtype::float16)));
  for (auto& v : {bare, identity, same_type, round_trip, four}) t.b.output(v);
  indexed m(t.b);
  constexpr auto p = op<"Relu">(transparent(op<"Softmax">(capture<"x">)));
  EXPECT_EQ(match(p, m.g, m.node(bare)).nodes().size(), 2u);
  EXPECT_EQ(match(p, m.g, m.node(identity)).nodes().size(), 3u);
  EXPECT_EQ(match(p, m.g, m.node(same_type)).nodes().size(), 3u);
  EXPECT_EQ(match(p, m.g, m.node(round_trip)).nodes().size(), 4u);
  const auto r = match(p, m.g, m.node(four));
  ASSERT_TRUE(r);
  EXPECT_EQ(r.nodes().size(), 6u);
  EXPECT_EQ(m.g.name(r.get<"x">()), "x");
  EXPECT_EQ(describe(p), "Relu(transparent(Softmax(x)))");
}

TEST(Transparent, NearMisses) {
  preserving t;
  auto widened = t.relu(t.cast(t.softmax(), dtype::float32));
  auto narrowed = t.relu(t.cast(t.cast(t.softmax(), dtype::float32), dtype::bfloat16));
  value five = t.softmax();
  for (int i = 0; i < 5; ++i) five = t.identity(five);
  auto too_deep = t.relu(five);
  auto shared = t.identity(t.softmax());
  auto escaping = t.relu(shared);
  auto reader = t.b.op("Neg", {shared});
  for (auto& v : {widened, narrowed, too_deep, escaping, reader}) t.b.output(v);
  indexed m(t.b);
  constexpr auto p = op<"Relu">(transparent(op<"Softmax">(capture<"x">)));
  // float16 → float32 changes the type.
  EXPECT_EQ(why(p, m, widened), "input 0 of Relu 'Relu_2': expected Softmax, found Cast 'Cast_1'");
  // float16 → float32 → bfloat16 is no round trip.
  EXPECT_EQ(why(p, m, narrowed), "input 0 of Relu 'Relu_6': expected Softmax, found Cast 'Cast_5'");
  // Four nodes at most; the explanation keeps the deepest attempt.
  EXPECT_EQ(why(p, m, too_deep),
            "input 0 of Identity 'Identity_9', input 0 of Identity 'Identity_10', input 0 of "
            "Identity 'Identity_11', input 0 of Identity 'Identity_12', input 0 of Relu "
            "'Relu_13': expected Softmax, found Identity 'Identity_8'");
  // A skipped node joins the match: Neg reads the Identity from outside.
  EXPECT_EQ(why(p, m, escaping),
            "output of Identity 'Identity_15' is also read by Neg 'Neg_17', outside the pattern");
}

// A Dropout passes its input on at inference unless the model asks for training.
TEST(Transparent, SkipsADropoutNotInTrainingMode) {
  preserving t;
  const value ratio = t.b.scalar(dtype::float32, 0.1);
  auto dropout = [&](std::vector<value> in) {
    return t.b.ops("Dropout", std::move(in), {}, {.outputs = 2});
  };
  auto plain = t.relu(dropout({t.softmax()})[0]);
  auto with_ratio = t.relu(dropout({t.softmax(), ratio})[0]);
  auto not_training = t.relu(dropout({t.softmax(), ratio, t.b.scalar(dtype::boolean, 0)})[0]);
  auto training = t.relu(dropout({t.softmax(), ratio, t.b.scalar(dtype::boolean, 1)})[0]);
  auto asked = t.relu(dropout({t.softmax(), ratio, t.b.input("training", dtype::boolean, {})})[0]);
  const auto kept = dropout({t.softmax()});
  auto mask_read = t.relu(kept[0]);
  auto on_mask = t.relu(dropout({t.softmax()})[1]);
  for (auto& v : {plain, with_ratio, not_training, training, asked, mask_read, kept[1], on_mask})
    t.b.output(v);
  indexed m(t.b);
  constexpr auto p = op<"Relu">(transparent(op<"Softmax">(capture<"x">)));
  for (auto& v : {plain, with_ratio, not_training})
    EXPECT_EQ(match(p, m.g, m.node(v)).nodes().size(), 3u);
  // training_mode true: the output is dropped out, not the input.
  EXPECT_EQ(why(p, m, training),
            "input 0 of Relu 'Relu_14': expected Softmax, found output 0 of Dropout 'Dropout_13'");
  // training_mode read at run time: nothing proves it false.
  EXPECT_EQ(why(p, m, asked),
            "input 0 of Relu 'Relu_17': expected Softmax, found output 0 of Dropout 'Dropout_16'");
  // The mask output is read outside: the skipped Dropout must stay.
  EXPECT_EQ(why(p, m, mask_read),
            "output of Dropout 'Dropout_19' is a graph output, so it cannot be fused away");
  // Output 1 is the mask, not the input.
  EXPECT_EQ(why(p, m, on_mask),
            "input 0 of Relu 'Relu_23': expected Softmax, found output 1 of Dropout 'Dropout_22'");

  // Before opset 12 a Dropout has no training mode: it copies at inference.
  model_builder old(11);
  const value x = old.input("x", dtype::float32, {2, 8});
  const value y = old.op(
      "Relu", {old.op("Dropout", {old.op("Softmax", {x}, {{"axis", -1}})}, {{"ratio", 0.1f}})});
  old.output(y);
  indexed n(old);
  EXPECT_EQ(match(p, n.g, n.node(y)).nodes().size(), 3u);
}

TEST(ThroughCasts, SkipsEveryCastAsTransparentSkipsNoOps) {
  preserving t;
  auto widened = t.relu(t.cast(t.softmax(), dtype::float32));
  auto narrowing_round_trip =
      t.relu(t.cast(t.cast(t.cast(t.softmax(), dtype::float32), dtype::float16), dtype::float32));
  auto quantised = t.relu(t.cast(t.cast(t.softmax(), dtype::int8), dtype::float16));
  for (auto& v : {widened, narrowing_round_trip, quantised}) t.b.output(v);
  indexed m(t.b);
  constexpr auto p = op<"Relu">(through_casts(op<"Softmax">(capture<"x">)));
  EXPECT_EQ(match(p, m.g, m.node(widened)).nodes().size(), 3u);
  EXPECT_EQ(match(p, m.g, m.node(narrowing_round_trip)).nodes().size(), 5u);
  // What the Casts mean is the rule's to prove: an int8 round trip is matched too.
  EXPECT_EQ(match(p, m.g, m.node(quantised)).nodes().size(), 4u);
  EXPECT_EQ(describe(p), "Relu(through_casts(Softmax(x)))");
}

TEST(ThroughCasts, NearMisses) {
  preserving t;
  auto five = t.softmax();
  for (int i = 0; i < 5; ++i) five = t.cast(five, i % 2 ? dtype::float16 : dtype::float32);
  auto too_deep = t.relu(five);
  auto shared = t.cast(t.softmax(), dtype::float32);
  auto escaping = t.relu(shared);
  auto reader = t.b.op("Neg", {shared});
  for (auto& v : {too_deep, escaping, reader}) t.b.output(v);
  indexed m(t.b);
  constexpr auto p = op<"Relu">(through_casts(op<"Softmax">(capture<"x">)));
  // Four Casts at most.
  EXPECT_FALSE(match(p, m.g, m.node(too_deep)));
  // A skipped Cast joins the match: Neg reads it from outside.
  EXPECT_EQ(why(p, m, escaping),
            "output of Cast 'Cast_8' is also read by Neg 'Neg_10', outside the pattern");
}

// ---- describe, explanations over the DiT block, tracing

constexpr auto scores = op<"MatMul">(capture<"q">, capture<"kt">);
constexpr auto scaled =
    commutative(op<"Mul">(optional<"Cast">(scores).bind<"up">(), constant_scalar<"scale">));
constexpr auto probs =
    optional<"Cast">(op<"Softmax">(scaled).attr<"axis">(last_axis)).bind<"down">();
constexpr auto dit = op<"MatMul">(probs, capture<"v">);

TEST(Describe, ReadsLikeThePattern) {
  EXPECT_EQ(describe(dit),
            "MatMul(Cast?(Softmax[axis=the last axis](Mul{commutative}(Cast?(MatMul(q, kt))@up, "
            "scale:constant scalar)))@down, v)");
  EXPECT_EQ(describe(op<"Cast">(any().dtype<dtype::float16>()).attr<"to">(1).bind<"c">()),
            "Cast[to=1, @c](_{dtype float16})");
  EXPECT_EQ(describe(any_of(op<"Relu">(any()), op<"Neg">(any()).multi_use()).bind<"which">()),
            "any_of(Relu(_), Neg{multi-use}(_))@which");
}

struct dit_graph {
  model_builder b;
  value q, kt, v, scale_input, scores, up, scaled, probs, down, out;
  explicit dit_graph(int opset = 17, bool scale_is_computed = false) : b(opset) {
    q = b.input("q", dtype::float16, {2, 16, "S", 64});
    kt = b.input("kt", dtype::float16, {2, 16, 64, "S"});
    v = b.input("v", dtype::float16, {2, 16, "S", 64});
    scores = b.op("MatMul", {q, kt}, {}, {.name = "attn/MatMul_1"});
    up = b.op("Cast", {scores}, {{"to", dtype::float32}}, {.name = "attn/Cast_2"});
    const value s = scale_is_computed
                        ? b.op("Sqrt", {b.scalar(dtype::float32, 64)}, {}, {.name = "attn/Sqrt_7"})
                        : b.scalar(dtype::float32, 100.0);
    scaled = b.op("Mul", {s, up}, {}, {.name = "attn/Mul_3"});
    probs = b.op("Softmax", {scaled}, {}, {.name = "attn/Softmax_12"});
    down = b.op("Cast", {probs}, {{"to", dtype::float16}}, {.name = "attn/Cast_4"});
    out = b.op("MatMul", {down, v}, {}, {.name = "attn/MatMul_5"});
    b.output(out);
  }
};

TEST(DitPattern, MatchesAndCapturesEveryPart) {
  dit_graph d;
  indexed m(d.b);
  const auto r = match(dit, m.g, m.node(d.out));
  ASSERT_TRUE(r);
  EXPECT_EQ(r.get<"scale">(), 100.0);
  EXPECT_EQ(m.g.name(r.get<"q">()), "q");
  EXPECT_EQ(m.g.name(r.get<"kt">()), "kt");
  EXPECT_EQ(m.g.name(r.get<"v">()), "v");
  EXPECT_EQ(r.get<"up">(), m.node(d.up));
  EXPECT_EQ(r.get<"down">(), m.node(d.down));
  EXPECT_EQ(r.nodes().size(), 6u);
}

TEST(DitPattern, ExplainsTheNearMissNamingTheNodes) {
  // The scale is computed (Sqrt), as torch SDPA exports do.
  dit_graph computed(17, true);
  indexed m(computed.b);
  EXPECT_EQ(why(dit, m, computed.out),
            "input 0 of Mul 'attn/Mul_3', input 0 of Softmax 'attn/Softmax_12', input 0 of Cast "
            "'attn/Cast_4', input 0 of MatMul 'attn/MatMul_5': expected constant scalar 'scale', "
            "Sqrt 'attn/Sqrt_7' is not a constant");
  // Opset 11: Softmax without an axis attribute normalises over axis 1.
  dit_graph old(11);
  indexed m11(old.b);
  EXPECT_EQ(why(dit, m11, old.out),
            "input 0 of Cast 'attn/Cast_4', input 0 of MatMul 'attn/MatMul_5': Softmax "
            "'attn/Softmax_12': axis = 1 (opset 11 default), expected the last axis");
}

TEST(Trace, KeepsTheBestPartialMatchPerAnchor) {
  dit_graph d(11);
  indexed m(d.b);
  const auto attempts = trace(dit, m.g);
  ASSERT_EQ(attempts.size(), 2u);  // both MatMuls are anchors
  EXPECT_EQ(attempts[0].anchor, m.node(d.scores));
  EXPECT_FALSE(attempts[0].matched);
  EXPECT_EQ(attempts[0].why.depth, 1u);
  const auto& best = attempts[1];
  EXPECT_FALSE(best.matched);
  EXPECT_EQ(best.why.failing_node, m.node(d.probs));
  EXPECT_EQ(best.why.matched, (std::vector<node_id>{m.node(d.out), m.node(d.down)}));
}

}  // namespace
