// The facts oracle: each op's shape and folding rule, stated as what it proves, what it leaves
// unknown, and what it refuses to trust.
#include "fusekit/graph/facts.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "fusekit/graph/model_builder.hpp"

namespace {

using fusekit::dtype;
using fusekit::facts_of;
using fusekit::graph;
using fusekit::sym;
using fusekit::truth;
using fusekit::value_id;
using fusekit::build::model_builder;
using fusekit::build::value;

value_id id(const graph& g, const value& v) { return *g.find_value(v.name); }
std::vector<double> ints(std::initializer_list<std::int64_t> xs) { return {xs.begin(), xs.end()}; }
value shape_constant(model_builder& b, std::initializer_list<std::int64_t> xs) {
  return b.initializer(dtype::int64, {std::int64_t(xs.size())}, ints(xs));
}
// "[1, S, ?]": the integer elements the facts hold of v.
std::string elements_text(const fusekit::facts& f, value_id v) {
  std::string out = "[";
  for (const sym& e : f.content(v).ints) out += (out.size() > 1 ? ", " : "") + f.text(e);
  return out + "]";
}

TEST(Sym, ArithmeticIsExactAndCanonical) {
  const sym s = sym::atom(0), t = sym::atom(1);
  auto name = [](fusekit::atom_id a) { return a == 0 ? std::string("S") : std::string("T"); };
  EXPECT_EQ(((s + t) - t).text(name), "S");
  EXPECT_EQ((s + t + s).text(name), "2·S + T");
  EXPECT_EQ(equal(s + t, t + s), truth::yes);
  EXPECT_EQ(equal(s, s + sym::constant(1)), truth::no);  // sizes differ by a constant
  EXPECT_EQ(equal(s, t), truth::unknown);                // two names may or may not agree
  const sym half = exact_quotient(s, sym::constant(2));
  EXPECT_EQ(half.text(name), "S/2");
  EXPECT_EQ(equal(half * sym::constant(2), s), truth::yes);
  EXPECT_EQ(
      equal(exact_quotient(s * t * sym::constant(64), t * sym::constant(16)), s * sym::constant(4)),
      truth::yes);
  EXPECT_FALSE(exact_quotient(s + t, s).known());  // S+T is not a multiple of S
  EXPECT_EQ(equal(sym::unknown(), sym::unknown()), truth::unknown);
}

// Constants and lone atoms are held without a polynomial; whatever arithmetic comes back to one
// comes back to that form, so == and the fast paths of equal() agree with the polynomial algebra.
TEST(Sym, ArithmeticThatEndsInAConstantOrALoneAtomHasItsCompactForm) {
  const sym s = sym::atom(0), t = sym::atom(1);
  EXPECT_EQ((s + t) - t, s);
  EXPECT_EQ(exact_quotient(s * sym::constant(6), sym::constant(6)), s);
  EXPECT_EQ((s + sym::constant(3)) - s, sym::constant(3));
  EXPECT_EQ(s - s, sym::constant(0));
  EXPECT_EQ(sym::constant(0) * (s + t), sym::constant(0));
  EXPECT_EQ(((s + t) - t).lone_atom(), 0u);
  EXPECT_EQ(((s + sym::constant(3)) - s).constant(), 3);
  EXPECT_EQ((s + s).lone_atom(), std::nullopt);                             // 2·S is a polynomial
  EXPECT_EQ(exact_quotient(s, sym::constant(2)).constant(), std::nullopt);  // S/2 is one too
  EXPECT_EQ((s * sym::constant(2)).term_count(), 1u);
  EXPECT_EQ(sym::constant(0).term_count(), 0u);
  EXPECT_EQ(equal(sym::constant(7), sym::constant(3) + sym::constant(4)), truth::yes);
  EXPECT_EQ(equal(sym::constant(7), sym::constant(8)), truth::no);
  EXPECT_EQ(equal(s, sym::constant(8)), truth::unknown);  // S may be 8
  const auto terms = (s * sym::constant(2) + sym::constant(1)).terms();
  ASSERT_EQ(terms.size(), 2u);
  EXPECT_EQ(terms[0].coefficient, 1);  // the constant term sorts first (no factors)
  EXPECT_EQ(terms[1].coefficient, 2);
}

// A product whose coefficient would be the lowest int64 has no magnitude to print or negate: the
// dim becomes unknown rather than overflowing (a fuzzed Reshape found it).
TEST(Sym, ArithmeticReachingTheLowestInt64IsUnknown) {
  const std::int64_t lowest = std::numeric_limits<std::int64_t>::min();
  EXPECT_FALSE(sym::constant(lowest).known());
  EXPECT_FALSE((sym::constant(lowest / 2) * sym::constant(2)).known());
  EXPECT_FALSE((sym::atom(0) * sym::constant(-(lowest / 4)) * sym::constant(-4)).known());
  EXPECT_FALSE((sym::constant(lowest + 1) - sym::constant(1)).known());
  EXPECT_EQ((sym::constant(lowest + 1) + sym::constant(1)).constant(), lowest + 2);
}

TEST(Facts, HeadSplitReshapeAndTransposeKeepEveryDim) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, "S", 64});
  auto split = b.op("Reshape", {x, shape_constant(b, {0, 0, 4, 16})});
  auto q = b.op("Transpose", {split}, {{"perm", std::vector<std::int64_t>{0, 2, 1, 3}}});
  b.output(q);
  const auto model = b.build();
  const graph g(model);
  EXPECT_EQ(facts_of(g).shape_text(id(g, q)), "[2, 4, S, 16]");
  EXPECT_EQ(facts_of(g).same_dim(id(g, q), 2, id(g, x), 1), truth::yes);
}

TEST(Facts, ReshapeMinusOneDividesTheElementCount) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {"B", "S", 64});
  auto y = b.op("Reshape", {x, shape_constant(b, {0, -1, 16})});
  auto z = b.op("Reshape", {x, shape_constant(b, {-1, 64})});
  b.output(y);
  b.output(z);
  const auto model = b.build();
  const graph g(model);
  EXPECT_EQ(facts_of(g).shape_text(id(g, y)), "[B, 4·S, 16]");
  EXPECT_EQ(facts_of(g).shape_text(id(g, z)), "[B·S, 64]");
}

// DeepSeek's decode step splits the heads of keys it computed from the whole cache: the -1 is
// the count over dims of which one is a sum, which cancels rather than divides.
TEST(Facts, ReshapeMinusOneCancelsTheDimsItKeeps) {
  model_builder b(17);
  auto past = b.input("past", dtype::float32, {"B", 1, "P", 16});
  auto now = b.input("now", dtype::float32, {"B", 1, 1, 16});
  auto keys = b.op("Concat", {past, now}, {{"axis", -2}});
  auto wide = b.op("MatMul", {keys, b.input("w", dtype::float32, {16, 128})});
  const auto dim = [&](std::int64_t axis) {
    return b.op("Unsqueeze", {b.op("Gather", {b.op("Shape", {keys}), b.scalar(dtype::int64, axis)}),
                              shape_constant(b, {0})});
  };
  auto target = b.op("Concat", {dim(0), dim(2), shape_constant(b, {-1}), shape_constant(b, {32})},
                     {{"axis", 0}});
  auto heads = b.op("Reshape", {wide, target});
  b.output(heads);
  const auto model = b.build();
  const graph g(model);
  EXPECT_EQ(facts_of(g).shape_text(id(g, heads)), "[B, 1 + P, 4, 32]");
}

TEST(Facts, FusedOpsKeepTheShapesLaterRulesProveFrom) {
  // What a run fused in one pass the next pass reads: the residual stream through a residual
  // norm's output 3, a layer through grouped attention.
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {"B", "S", 64});
  auto skip = b.input("skip", dtype::float32, {"B", "S", 64});
  auto gamma = b.input("gamma", dtype::float32, {64});
  auto norm = b.ops("SkipLayerNormalization", {x, skip, gamma}, {},
                    {.domain = "com.microsoft", .outputs = 4});
  auto k = b.input("k", dtype::float32, {"B", "S", 16});
  auto attention = b.op("GroupQueryAttention",
                        {norm[0],
                         k,
                         k,
                         {""},
                         {""},
                         b.input("past_lengths", dtype::int32, {"B", 1}),
                         b.input("total_length", dtype::int32, {})},
                        {{"num_heads", 4}, {"kv_num_heads", 1}}, {.domain = "com.microsoft"});
  b.output(norm[3]);
  b.output(attention);
  const auto model = b.build();
  const graph g(model);
  EXPECT_EQ(facts_of(g).shape_text(id(g, norm[3])), "[B, S, 64]");
  EXPECT_EQ(g.type(id(g, norm[3])), dtype::float32);
  EXPECT_EQ(facts_of(g).shape_text(id(g, attention)), "[B, S, 64]");
}

TEST(Facts, DimsNothingNamesAreEqualOnlyToThemselves) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, fusekit::build::dim_spec(std::int64_t(-1)), 8});
  auto y = b.input("y", dtype::float32, {2, fusekit::build::dim_spec(std::int64_t(-1)), 8});
  auto xt = b.op("Transpose", {x}, {{"perm", std::vector<std::int64_t>{0, 2, 1}}});
  b.output(xt);
  b.output(y);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.same_dim(id(g, xt), 2, id(g, x), 1), truth::yes);     // followed through Transpose
  EXPECT_EQ(f.same_dim(id(g, x), 1, id(g, y), 1), truth::unknown);  // never assumed equal
}

TEST(Facts, ConcatAlongTheSequenceAddsLengths) {
  model_builder b(17);
  auto past = b.input("past", dtype::float32, {1, 4, "P", 8});
  auto now = b.input("now", dtype::float32, {1, 4, "T", 8});
  auto kv = b.op("Concat", {past, now}, {{"axis", -2}});
  b.output(kv);
  const auto model = b.build();
  const graph g(model);
  EXPECT_EQ(facts_of(g).shape_text(id(g, kv)), "[1, 4, P + T, 8]");
}

TEST(Facts, BroadcastTakesTheNonOneDimAndLeavesMismatchesOpen) {
  model_builder b(17);
  auto a = b.input("a", dtype::float32, {1, 4, "S", 8});
  auto c = b.input("c", dtype::float32, {2, 1, "S", 8});
  auto d = b.input("d", dtype::float32, {"B", 4, 8, "S"});
  auto sum = b.op("Add", {a, c});
  auto product = b.op("MatMul", {c, d});
  b.output(sum);
  b.output(product);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.shape_text(id(g, sum)), "[2, 4, S, 8]");
  // 2 against B: equal only if B is 2, which nothing proves.
  EXPECT_EQ(f.same_dim(id(g, product), 0, id(g, c), 0), truth::unknown);
  EXPECT_EQ(f.same_dim(id(g, product), 1, id(g, d), 1), truth::yes);
  EXPECT_EQ(f.same_dim(id(g, product), 3, id(g, d), 3), truth::yes);
}

// Two numbers that differ, neither 1, do not broadcast: the node cannot run (q's heads merged
// into the batch axis and kᵀ's not), and what it would output is no fact.
TEST(Facts, NumbersThatDoNotBroadcastCannotRun) {
  model_builder b(17);
  auto q = b.input("q", dtype::float32, {6, 4, 8});
  auto kt = b.input("kt", dtype::float32, {2, 3, 8, 4});
  auto mask = b.input("mask", dtype::float32, {2, 3, 4, 4});
  auto scores = b.op("MatMul", {q, kt});
  auto masked = b.op("Add", {scores, mask});
  auto fine = b.op("Add", {kt, b.input("bias", dtype::float32, {1, 3, 8, 1})});
  b.output(masked);
  b.output(fine);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  ASSERT_EQ(f.cannot_run().size(), 1u);
  EXPECT_EQ(g.describe(f.cannot_run().front()), g.describe(g.producer(id(g, scores))));
  EXPECT_EQ(f.rank(id(g, scores)), std::nullopt);
  EXPECT_EQ(f.rank(id(g, masked)), std::nullopt);  // of what cannot run, nothing is known
  EXPECT_EQ(f.shape_text(id(g, fine)), "[2, 3, 8, 4]");
}

// MatMul is numpy's: a vector is a row or a column whose axis the output drops; a scalar, or a
// row length that is not the column length, cannot run.
TEST(Facts, MatMulOfVectorsAndWhatCannotRun) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, 3, 4, 8});
  auto row = b.op("MatMul", {b.input("row", dtype::float32, {4}), x});
  auto column = b.op("MatMul", {x, b.input("column", dtype::float32, {8})});
  auto dot = b.op("MatMul", {b.input("u", dtype::float32, {8}), b.input("w", dtype::float32, {8})});
  auto scalar = b.op("MatMul", {b.input("s", dtype::float32, {}), x});
  auto unequal = b.op("MatMul", {x, b.input("y", dtype::float32, {2, 3, 4, 8})});
  for (const auto& v : {row, column, dot, scalar, unequal}) b.output(v);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.shape_text(id(g, row)), "[2, 3, 8]");
  EXPECT_EQ(f.shape_text(id(g, column)), "[2, 3, 4]");
  EXPECT_EQ(f.shape_text(id(g, dot)), "[]");
  ASSERT_EQ(f.cannot_run().size(), 2u);
  EXPECT_EQ(g.describe(f.cannot_run()[0]), g.describe(g.producer(id(g, scalar))));
  EXPECT_EQ(g.describe(f.cannot_run()[1]), g.describe(g.producer(id(g, unequal))));
}

// TorchScript's SDPA scale: Shape → Slice(-1:) → Cast → Sqrt → Div(1, ·) → [Cast] → Sqrt.
// (The builder stores integers through double, so "to the end" is 2^62 here, not INT64_MAX.)
value sdpa_scale(model_builder& b, const value& q, dtype type) {
  auto shape = b.op("Shape", {q});
  auto last =
      b.op("Slice", {shape, shape_constant(b, {-1}), shape_constant(b, {std::int64_t(1) << 62})});
  auto size = b.op("Cast", {last}, {{"to", dtype::float32}});
  auto inverse = b.op("Div", {b.scalar(dtype::float32, 1.0), b.op("Sqrt", {size})});
  if (type != dtype::float32) inverse = b.op("Cast", {inverse}, {{"to", type}});
  return b.op("Sqrt", {inverse});
}

TEST(Facts, TheSdpaScaleChainFoldsToTheFourthRootOfTheHeadSize) {
  model_builder b(17);
  auto q = b.input("q", dtype::float32, {2, 4, "S", 64});
  auto s = sdpa_scale(b, q, dtype::float32);
  b.output(s);
  const auto model = b.build();
  const graph g(model);
  const auto v = facts_of(g).real_scalar(id(g, s));
  ASSERT_TRUE(v.has_value());
  EXPECT_FLOAT_EQ(float(*v), std::pow(64.0f, -0.25f));
}

TEST(Facts, Float16ScaleChainsRoundAsFloat16Does) {
  model_builder b(17);
  auto q = b.input("q", dtype::float16, {2, 4, "S", 48});
  auto s = sdpa_scale(b, q, dtype::float16);
  b.output(s);
  const auto model = b.build();
  const graph g(model);
  const auto v = facts_of(g).real_scalar(id(g, s));
  ASSERT_TRUE(v.has_value());
  const auto half = [](double x) {
    return double(fusekit::half_to_float(fusekit::float_to_half(float(x))));
  };
  EXPECT_EQ(*v, half(std::sqrt(half(1.0 / std::sqrt(48.0)))));
}

// GPT-2's TorchScript divisor: ConstantOfShape([]) (a float32 zero, no value given) + Pow(8, ½),
// with no types declared: ConstantOfShape's type comes from its value attribute's default.
TEST(Facts, TorchScriptsConstantOfShapeDivisorFoldsToTheRootOfTheHeadSize) {
  model_builder b(17);
  auto zero = b.op("ConstantOfShape", {b.initializer(dtype::int64, {0}, {})});
  auto root = b.op("Pow", {b.scalar(dtype::float32, 8.0), b.scalar(dtype::float32, 0.5)});
  auto divisor = b.op("Add", {zero, root});
  b.output(divisor);
  const auto model = b.build();
  const graph g(model);
  EXPECT_EQ(g.type(id(g, zero)), dtype::float32);
  const auto v = facts_of(g).real_scalar(id(g, divisor));
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, double(std::sqrt(8.0f)));
}

TEST(Facts, AScaleFromAnUnknownHeadSizeIsUnknown) {
  model_builder b(17);
  auto q = b.input("q", dtype::float32, {2, 4, "S", "D"});
  auto s = sdpa_scale(b, q, dtype::float32);
  b.output(s);
  const auto model = b.build();
  const graph g(model);
  EXPECT_FALSE(facts_of(g).real_scalar(id(g, s)).has_value());
}

TEST(Facts, ShapeArithmeticFoldsSymbolically) {
  // [B, S, 4, 16] rebuilt from the input's Shape: Gather, Unsqueeze, Concat, Reshape.
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {"B", "S", 64});
  auto shape = b.op("Shape", {x});
  auto batch = b.op("Unsqueeze",
                    {b.op("Gather", {shape, b.scalar(dtype::int64, 0)}), shape_constant(b, {0})});
  auto seq = b.op("Unsqueeze",
                  {b.op("Gather", {shape, b.scalar(dtype::int64, 1)}), shape_constant(b, {0})});
  auto heads =
      b.op("Div", {b.op("Gather", {shape, b.scalar(dtype::int64, 2)}), b.scalar(dtype::int64, 16)});
  auto target = b.op(
      "Concat",
      {batch, seq, b.op("Unsqueeze", {heads, shape_constant(b, {0})}), shape_constant(b, {16})},
      {{"axis", 0}});
  auto y = b.op("Reshape", {x, target});
  b.output(y);
  const auto model = b.build();
  const graph g(model);
  EXPECT_EQ(facts_of(g).shape_text(id(g, y)), "[B, S, 4, 16]");
}

TEST(Facts, SplitSqueezeRangeAndConstantOfShape) {
  model_builder b(18);
  auto x = b.input("x", dtype::float32, {2, "S", 96});
  auto parts = b.ops("Split", {x}, {{"axis", 2}}, {.outputs = 3});
  auto sized = b.ops("Split", {x, shape_constant(b, {32, 64})}, {{"axis", 2}}, {.outputs = 2});
  auto squeezed =
      b.op("Squeeze", {b.op("Unsqueeze", {x, shape_constant(b, {1})}), shape_constant(b, {1})});
  auto length = b.op("Gather", {b.op("Shape", {x}), b.scalar(dtype::int64, 1)});
  auto positions = b.op("Range", {b.scalar(dtype::int64, 0), length, b.scalar(dtype::int64, 1)});
  auto zeros = b.op("ConstantOfShape", {b.op("Shape", {x})});
  for (const auto& v : {parts[1], sized[1], squeezed, positions, zeros}) b.output(v);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.shape_text(id(g, parts[1])), "[2, S, 32]");
  EXPECT_EQ(f.shape_text(id(g, sized[1])), "[2, S, 64]");
  EXPECT_EQ(f.shape_text(id(g, squeezed)), "[2, S, 96]");
  EXPECT_EQ(f.shape_text(id(g, positions)), "[S]");
  EXPECT_EQ(f.shape_text(id(g, zeros)), "[2, S, 96]");
}

TEST(Facts, ARangeFromAPastLengthToItPlusTheNewTokensHasTheirCount) {
  // A decoder step's positions: Range(P, P + 1, 1), P the cache's length, one new token.
  model_builder b(18);
  auto past = b.input("past", dtype::float32, {2, 4, "P", 8});
  auto ids = b.input("ids", dtype::int64, {2, 1});
  auto p = b.op("Gather", {b.op("Shape", {past}), b.scalar(dtype::int64, 2)});
  auto n = b.op("Gather", {b.op("Shape", {ids}), b.scalar(dtype::int64, 1)});
  auto positions = b.op("Range", {p, b.op("Add", {p, n}), b.scalar(dtype::int64, 1)});
  auto every_other =
      b.op("Range", {p, b.op("Add", {p, b.scalar(dtype::int64, 5)}), b.scalar(dtype::int64, 2)});
  auto backwards =
      b.op("Range", {p, b.op("Add", {p, b.scalar(dtype::int64, 3)}), b.scalar(dtype::int64, -1)});
  // From the past length to the batch: a span that is no number.
  auto unknown =
      b.op("Range", {p, b.op("Gather", {b.op("Shape", {ids}), b.scalar(dtype::int64, 0)}),
                     b.scalar(dtype::int64, 1)});
  for (const auto& v : {positions, every_other, backwards, unknown}) b.output(v);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.shape_text(id(g, positions)), "[1]");
  EXPECT_EQ(f.shape_text(id(g, every_other)), "[3]");
  EXPECT_EQ(f.shape_text(id(g, backwards)), "[0]");
  EXPECT_EQ(f.rank(id(g, unknown)), 1u);
  EXPECT_FALSE(f.dim_of(id(g, unknown), 0)->constant().has_value());
}

TEST(Facts, ReductionsKeepOrDropTheirAxes) {
  // RMSNorm as decoders export it: ReduceMean over the last axis, kept for the broadcast.
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, "S", 32});
  auto kept = b.op("ReduceMean", {x}, {{"axes", std::vector<std::int64_t>{-1}}});
  auto dropped = b.op("ReduceSum", {x, shape_constant(b, {1})}, {{"keepdims", 0}});
  auto all = b.op("ReduceMax", {x}, {{"keepdims", 0}});
  for (const auto& v : {kept, dropped, all}) b.output(v);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.shape_text(id(g, kept)), "[2, S, 1]");
  EXPECT_EQ(f.shape_text(id(g, dropped)), "[2, 32]");
  EXPECT_EQ(f.shape_text(id(g, all)), "[]");
}

TEST(Facts, AReductionWithoutAxesToldNotToReduceIsAnIdentity) {
  // Opset 18: axes not given are axes empty, which noop_with_empty_axes makes no reduction at all.
  model_builder b(18);
  auto x = b.input("x", dtype::float32, {2, "S", 32});
  auto noop = b.op("ReduceMean", {x}, {{"noop_with_empty_axes", 1}});
  auto empty = b.op("ReduceSum", {x, b.initializer("none", dtype::int64, {0}, {})},
                    {{"noop_with_empty_axes", 1}});
  auto all = b.op("ReduceMax", {x}, {{"keepdims", 0}});
  for (const auto& v : {noop, empty, all}) b.output(v);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.shape_text(id(g, noop)), "[2, S, 32]");
  EXPECT_EQ(f.shape_text(id(g, empty)), "[2, S, 32]");
  EXPECT_EQ(f.shape_text(id(g, all)), "[]");
}

TEST(Facts, EinsumTileAndFlatten) {
  // Flux builds its RoPE table with all three.
  model_builder b(17);
  auto pos = b.input("pos", dtype::float32, {"P"});
  auto freq = b.input("freq", dtype::float32, {8});
  auto outer = b.op("Einsum", {pos, freq}, {{"equation", "i, j -> ij"}});
  auto tiled = b.op("Tile", {outer, shape_constant(b, {1, 2})});
  auto flat = b.op("Flatten", {b.op("Unsqueeze", {tiled, shape_constant(b, {0})})}, {{"axis", 2}});
  for (const auto& v : {outer, tiled, flat}) b.output(v);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.shape_text(id(g, outer)), "[P, 8]");
  EXPECT_EQ(f.shape_text(id(g, tiled)), "[P, 16]");
  EXPECT_EQ(f.shape_text(id(g, flat)), "[P, 16]");
}

TEST(Facts, KnownIntegerQuotientsTruncateAndSymbolicOnesMustBeWhole) {
  // torch.chunk's size: (n + chunks - 1) // chunks, folded when n is known.
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, 197, "S"});
  auto shape = b.op("Shape", {x});
  auto n = b.op("Gather", {shape, b.scalar(dtype::int64, 1)});
  auto s = b.op("Gather", {shape, b.scalar(dtype::int64, 2)});
  auto chunk = b.op("Div", {n, b.scalar(dtype::int64, 6)});
  auto rest = b.op("Mod", {n, b.scalar(dtype::int64, 6)});
  auto half = b.op("Div", {s, b.scalar(dtype::int64, 2)});
  for (const auto& v : {chunk, rest, half}) b.output(v);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.real_scalar(id(g, chunk)), 32.0);
  EXPECT_EQ(f.real_scalar(id(g, rest)), 5.0);
  EXPECT_FALSE(f.content(id(g, half)).ints.at(0).known());  // S may be odd
}

TEST(Facts, ADeclarationThatContradictsTheOpsIsReportedAndNotTrusted) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, "S", 64});
  auto y = b.op("Reshape", {x, shape_constant(b, {0, 0, 4, 16})}, {}, {.name = "split"});
  b.value_info(y, dtype::float32, {2, "S", 4, 32});
  b.output(y);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.rank(id(g, y)), std::nullopt);
  ASSERT_EQ(f.contradictions().size(), 1u);
  EXPECT_EQ(f.contradictions()[0],
            "'split' is declared with dim 3 = 32 but Reshape 'split' makes it [2, S, 4, 16]");
}

TEST(Facts, DeclarationsNameWhatTheOpsLeaveOpen) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, fusekit::build::unknown_shape);
  auto y = b.op("Neg", {x}, {}, {.name = "negated"});
  b.value_info(y, dtype::float32, {2, "S", 64});
  b.output(y);
  const auto model = b.build();
  const graph g(model);
  EXPECT_EQ(facts_of(g).shape_text(id(g, y)), "[2, S, 64]");
}

TEST(Facts, LongChainsAreFollowedWithoutLimit) {
  // 100,000 element-wise ops between the input and the value asked about: one pass, no
  // recursion, no depth cap.
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, 4, "S", 16});
  value v = x;
  for (int i = 0; i < 100000; ++i) v = b.op(i % 2 ? "Neg" : "Relu", {v});
  b.output(v);
  const auto model = b.build();
  const graph g(model);
  EXPECT_EQ(facts_of(g).shape_text(id(g, v)), "[2, 4, S, 16]");
}

TEST(Facts, OuterScopeValuesKeepTheirFactsInsideBodies) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, "S", 8});
  auto flag = b.input("flag", dtype::boolean, {});
  auto then_branch = b.subgraph("then");
  then_branch.output(then_branch.op("Neg", {x}, {}, {.name = "inner"}), dtype::float32);
  auto else_branch = b.subgraph("else");
  else_branch.output(else_branch.op("Relu", {x}), dtype::float32);
  b.output(b.op("If", {flag},
                {{"then_branch", then_branch.proto()}, {"else_branch", else_branch.proto()}}));
  const auto model = b.build();
  const graph g(model);
  const graph& body = *g.subgraphs(0)[0].body;
  EXPECT_EQ(facts_of(body).shape_text(*body.find_value("inner")), "[2, S, 8]");
}

}  // namespace

namespace {

// Ops fusekit has no rule of its own for get ONNX's: a ViT's patch embedding keeps its rank and
// batch, a symbolic dim passes through as itself.
TEST(Facts, OpsWithoutARuleOfTheirOwnGetOnnxsRule) {
  model_builder b(17);
  auto image = b.input("image", dtype::float32, {"B", 3, 32, 32});
  auto weight = b.initializer(dtype::float32, {16, 3, 8, 8}, std::vector<double>(16 * 3 * 8 * 8));
  auto patches = b.op("Conv", {image, weight}, {{"strides", std::vector<std::int64_t>{8, 8}}});
  auto padded = b.op("Pad", {patches, shape_constant(b, {0, 0, 1, 1, 0, 0, 1, 1})});
  b.output(patches);
  b.output(padded);
  const auto model = b.build();
  const graph g(model);
  EXPECT_EQ(facts_of(g).shape_text(id(g, patches)), "[B, 16, 4, 4]");
  EXPECT_EQ(facts_of(g).shape_text(id(g, padded)), "[B, 16, 6, 6]");
}

// Resize took an axes attribute at opset 18: ONNX's own rule of that opset answers, with the scales
// read one per axis named. It scales the other dims by 1 as numbers only, so the named batch comes
// back as a dim of its own.
TEST(Facts, OnnxRulesOfNewerOpsetsAnswer) {
  model_builder b(18);
  auto x = b.input("x", dtype::float32, {"B", 3, 8, 8});
  auto scales = b.initializer(dtype::float32, {2}, {2.0, 2.0});
  auto resized = b.op("Resize", {x, value{}, scales}, {{"axes", std::vector<std::int64_t>{2, 3}}});
  b.output(resized);
  const auto model = b.build();
  const graph g(model);
  EXPECT_EQ(facts_of(g).shape_text(id(g, resized)), "[dim 0 of 'Resize_1', 3, 16, 16]");
}

// Near miss: an opset newer than the linked release knows may have changed any rule, so none of
// ONNX's answers for it.
TEST(Facts, OnnxRulesDoNotAnswerForOpsetsNewerThanTheRelease) {
  model_builder b(fusekit::schema_registry_opset() + 1);
  auto x = b.input("x", dtype::float32, {"B", 3, 8, 8});
  auto scales = b.initializer(dtype::float32, {2}, {2.0, 2.0});
  auto resized = b.op("Resize", {x, value{}, scales}, {{"axes", std::vector<std::int64_t>{2, 3}}});
  b.output(resized);
  const auto model = b.build();
  const graph g(model);
  EXPECT_EQ(facts_of(g).shape_text(id(g, resized)), "unknown rank");
}

// Conv and pools keep a symbolic size where the stride is 1, and compute numbers at any stride
// (AveragePool's dilations of opset 19 included).
TEST(Facts, ASlidingWindowKeepsSymbolicSizesAtStrideOne) {
  model_builder b(19);
  auto x = b.input("x", dtype::float32, {"B", 3, "H", 32});
  auto w = b.initializer(dtype::float32, {16, 3, 3, 3}, std::vector<double>(16 * 3 * 3 * 3));
  auto same = b.op("Conv", {x, w}, {{"pads", std::vector<std::int64_t>{1, 1, 1, 1}}});
  auto valid = b.op("Conv", {x, w});
  auto strided = b.op("Conv", {x, w}, {{"strides", std::vector<std::int64_t>{2, 2}}});
  auto pooled = b.op("AveragePool", {x},
                     {{"kernel_shape", std::vector<std::int64_t>{3, 3}},
                      {"dilations", std::vector<std::int64_t>{2, 2}}});
  for (const auto& v : {same, valid, strided, pooled}) b.output(v);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.shape_text(id(g, same)), "[B, 16, H, 32]");
  EXPECT_EQ(f.shape_text(id(g, valid)), "[B, 16, -2 + H, 30]");
  EXPECT_EQ(f.shape_text(id(g, strided)), "[B, 16, dim 2 of 'Conv_3', 15]");
  EXPECT_EQ(f.shape_text(id(g, pooled)), "[B, 3, -4 + H, 28]");
}

// Pad at every opset: pads from the attribute, from an input, and (opset 18) for the axes named;
// TorchScript's pads come reversed through Slice(step -1) and Transpose of a folded table.
TEST(Facts, PadGrowsEachPaddedAxisByItsTwoPads) {
  model_builder b(18);
  auto x = b.input("x", dtype::float32, {"B", "S", 64});
  auto last = b.op("Pad", {x, shape_constant(b, {1, 3}), b.scalar(dtype::float32, 0.0),
                           shape_constant(b, {-1})});
  auto table = b.op("Reshape", {shape_constant(b, {0, 1, 0, 2, 0, 3}), shape_constant(b, {3, 2})});
  auto reversed = b.op("Slice", {table, shape_constant(b, {-1}), shape_constant(b, {-1000}),
                                 shape_constant(b, {0}), shape_constant(b, {-1})});
  auto pairs = b.op("Transpose", {reversed}, {{"perm", std::vector<std::int64_t>{1, 0}}});
  auto pads = b.op("Reshape", {pairs, shape_constant(b, {-1})});
  auto all = b.op("Pad", {x, pads});
  b.output(last);
  b.output(all);
  const auto model = b.build();
  const graph g(model);
  EXPECT_EQ(facts_of(g).shape_text(id(g, last)), "[B, S, 68]");
  EXPECT_EQ(facts_of(g).shape_text(id(g, all)), "[3 + B, 2 + S, 65]");
}

}  // namespace

namespace {

// A Reshape's target built from a run-time count and constant head sizes: the constant elements
// still fold, and the one that does not is traced back to where its value comes from.
TEST(Facts, ATargetWithOneUnknownElementKeepsTheOthersAndSaysWhereTheProofBroke) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {"B", "S", 64});
  auto n = b.input("n", dtype::int64, {1});
  auto target = b.op("Concat", {n, shape_constant(b, {4, 16})}, {{"axis", 0}}, {.name = "target"});
  auto y = b.op("Reshape", {x, target}, {}, {.name = "heads"});
  b.output(y);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.shape_text(id(g, y)), "[dim 0 of 'heads', 4, 16]");
  EXPECT_EQ(f.why_unknown(id(g, y), 1), "");
  EXPECT_EQ(f.why_unknown(id(g, y), 0),
            "dim 0 of 'heads' is unknown: Reshape 'heads' reads input 1 'target', whose "
            "element 0 is not folded: Concat 'target' reads input 0 'n', whose value is not "
            "folded: graph input 'n' is known only at run time");
}

// A rank lost on the way is traced to the first node whose output nothing could know.
TEST(Facts, AnUnknownRankIsTracedToTheNodeWhereItWasLost) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {"B", "S", 64});
  auto idx = b.input("idx", dtype::int64);
  auto picked = b.op("NonZero", {idx}, {}, {.name = "nonzero"});
  auto target = b.op("Reshape", {picked, shape_constant(b, {-1})}, {}, {.name = "flat"});
  auto y = b.op("Reshape", {x, target}, {}, {.name = "view"});
  b.output(y);
  const auto model = b.build();
  const graph g(model);
  EXPECT_EQ(facts_of(g).why_unknown(id(g, y)),
            "'view' has unknown rank: Reshape 'view' reads input 1 'flat', whose value "
            "is not folded: Reshape 'flat' reads input 0 'nonzero', whose value is not folded: "
            "NonZero 'nonzero' reads input 0 'idx', whose value is not folded: graph input 'idx' "
            "is declared without a shape");
}

}  // namespace

namespace {

// The dynamo exporter's kᵀ: Reshape(k, [-1] ++ shape[-2:]) → Transpose(0,2,1) →
// Reshape(shape[:-2] ++ shape[-1:] ++ shape[-2:-1]), "from the start" written as the lowest int64.
TEST(Facts, TheDynamoExportersKTransposeDetourKeepsBatchAndHeads) {
  model_builder b(18);
  auto k = b.input("k", dtype::float32, {"B", 4, "L", 8});
  auto shape = b.op("Shape", {k});
  const double lowest = double(std::numeric_limits<std::int64_t>::min());
  const double highest = double(std::int64_t(1) << 62);
  auto slice = [&](double start, double end) {
    return b.op("Slice", {shape, b.initializer(dtype::int64, {1}, {start}),
                          b.initializer(dtype::int64, {1}, {end})});
  };
  auto flat = b.op(
      "Reshape", {k, b.op("Concat", {shape_constant(b, {-1}), slice(-2, highest)}, {{"axis", 0}})});
  auto turned = b.op("Transpose", {flat}, {{"perm", std::vector<std::int64_t>{0, 2, 1}}});
  auto target =
      b.op("Concat", {slice(lowest, -2), slice(-1, highest), slice(-2, -1)}, {{"axis", 0}});
  auto kt = b.op("Reshape", {turned, target});
  b.output(kt);
  const auto model = b.build();
  const graph g(model);
  EXPECT_EQ(facts_of(g).shape_text(id(g, kt)), "[B, 4, 8, L]");
}

// Positions sliced from a buffer of 64 up to the sequence length: min(S, 64), which broadcasts
// against S as S (were S above 64 the model could not run), and is no dim of its own.
TEST(Facts, ASliceUpToASymbolicEndIsTheMinAndBroadcastsAgainstThatEnd) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {"B", "S", 32});
  auto buffer = b.initializer(dtype::float32, {1, 64, 32}, std::vector<double>(64 * 32));
  auto length = b.op("Slice", {b.op("Shape", {x}), shape_constant(b, {1}), shape_constant(b, {2})});
  auto positions = b.op("Slice", {buffer, shape_constant(b, {0}), length, shape_constant(b, {1})});
  auto sum = b.op("Add", {x, positions});
  b.output(positions);
  b.output(sum);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.shape_text(id(g, positions)), "[1, Min(64, S), 32]");
  EXPECT_TRUE(f.is_named(*f.dim_of(id(g, positions), 1)));
  EXPECT_EQ(f.same_dim(id(g, positions), 1, id(g, x), 1), truth::unknown);  // S may exceed 64
  EXPECT_EQ(f.shape_text(id(g, sum)), "[B, S, 32]");
}

// OPT's positions: cumsum(mask)[:, past:]. x[s:] of a dim d holds max(0, d − s): the past length
// may exceed the mask's for all the graph says, so the count is that max, one dim wherever it
// arises, and broadcasts against 1 as itself.
TEST(Facts, ASliceFromARunTimeStartToTheEndHoldsMaxOfZeroAndTheRest) {
  model_builder b(17);
  auto mask = b.input("mask", dtype::int64, {"B", "T"});
  auto past = b.input("past", dtype::float32, {"B", 4, "P", 8});
  auto start =
      b.op("Slice", {b.op("Shape", {past}), shape_constant(b, {2}), shape_constant(b, {3})});
  auto end = shape_constant(b, {std::int64_t(1) << 62});  // as a double, exact
  auto positions = b.op("Slice", {mask, start, end, shape_constant(b, {1})});
  auto tokens = b.input("tokens", dtype::float32, {"B", 1, 32});
  auto table = b.initializer(dtype::float32, {1, 1, 32}, std::vector<double>(32));
  auto hidden = b.op(
      "Add",
      {tokens, b.op("Mul", {b.op("Unsqueeze", {b.op("Cast", {positions}, {{"to", std::int64_t(1)}}),
                                               shape_constant(b, {2})}),
                            table})});
  // The cache and the new tokens, sliced back from their sum: P + 1 − P is 1, proven.
  auto whole = b.input("whole", dtype::float32, {"B", "P + 1"});
  auto last = b.op("Slice", {whole, start, end, shape_constant(b, {1})});
  b.output(positions);
  b.output(hidden);
  b.output(last);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.shape_text(id(g, positions)), "[B, Max(0, T - P)]");
  EXPECT_TRUE(f.is_named(*f.dim_of(id(g, positions), 1)));
  EXPECT_EQ(f.shape_text(id(g, hidden)), "[B, Max(0, T - P), 32]");
  EXPECT_EQ(f.shape_text(id(g, last)), "[B, 1]");
}

// T5 before transformers 5: position_bias[:, :, -S:, :]. x[−k:] holds the last min(k, d) where k
// is proven positive, all of x when k is d (x[−0:] is x too); a start not proven negative nor at
// least 0 proves nothing.
TEST(Facts, ASliceFromMinusALengthHoldsTheLastMinOfItAndTheDim) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {"B", "S", 32});
  auto bias = b.input("bias", dtype::float32, {1, 4, "S", "S"});
  auto table = b.input("table", dtype::float32, {1, 4, 64, "S"});
  auto s = b.op("Slice", {b.op("Shape", {x}), shape_constant(b, {1}), shape_constant(b, {2})});
  auto minus_s = b.op("Neg", {s});
  auto end = shape_constant(b, {std::int64_t(1) << 62});  // as a double, exact
  auto axis = shape_constant(b, {2});
  auto rows = b.op("Slice", {bias, minus_s, end, axis});
  auto last_of_64 = b.op("Slice", {table, minus_s, end, axis});
  auto one_less = b.op("Sub", {s, shape_constant(b, {1})});
  auto unsigned_start = b.op("Slice", {bias, one_less, end, axis});
  b.output(rows);
  b.output(last_of_64);
  b.output(unsigned_start);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.shape_text(id(g, rows)), "[1, 4, S, S]");
  // The last S of 64 rows are min(S, 64) only where S > 0: −0 is the start, and x[−0:] all 64.
  EXPECT_FALSE(f.why_unknown(id(g, last_of_64), 2).empty());
  // S − 1 is −1 where S is 0: from the end then, else from the start.
  EXPECT_FALSE(f.why_unknown(id(g, unsigned_start), 2).empty());
}

// torch.export writes a dim it proved to be another's plus one as "s69 + 1": the exporter's
// statement, read as that expression. A name that only looks like arithmetic stays a name.
TEST(Facts, ADimParamWrittenAsAnExpressionOfOthersIsThatExpression) {
  model_builder b(18);
  auto past = b.input("past", dtype::float32, {"s43", 4, "s69", 8});
  auto mask = b.input("mask", dtype::float32, {"s43", "s69 + 1", "2*s43", "s69 - 1"});
  auto named = b.input("named", dtype::float32, {"seq-len", "batch size", "2", "s1 +1"});
  b.output(b.op("Identity", {past}));
  b.output(b.op("Identity", {mask}));
  b.output(b.op("Identity", {named}));
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.shape_text(id(g, mask)), "[s43, 1 + s69, 2·s43, -1 + s69]");
  EXPECT_EQ(equal(*f.dim_of(id(g, mask), 1) - *f.dim_of(id(g, past), 2), sym::constant(1)),
            truth::yes);
  EXPECT_EQ(f.shape_text(id(g, named)), "[seq-len, batch size, 2, s1 +1]");
  EXPECT_EQ(f.dim_of(id(g, named), 2)->constant(), std::nullopt);  // a name, not the number 2
}

// A Cast between integer types keeps what the target holds exactly: 300 is no int8, any nonzero
// number is true, and a symbolic size goes only into int64 (past int32's range it would wrap).
TEST(Facts, AnIntegerCastKeepsOnlyTheValuesTheTargetHolds) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {"S", 4});
  auto numbers = b.initializer(dtype::int64, {3}, {300, 2, 0});
  auto small = b.op("Cast", {numbers}, {{"to", std::int64_t(dtype::int8)}});
  auto truth_values = b.op("Cast", {numbers}, {{"to", std::int64_t(dtype::boolean)}});
  auto dims = b.op("Shape", {x});
  auto dims32 = b.op("Cast", {dims}, {{"to", std::int64_t(dtype::int32)}});
  auto dims64 = b.op("Cast", {dims32}, {{"to", std::int64_t(dtype::int64)}});
  for (const auto& v : {small, truth_values, dims32, dims64}) b.output(v);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  auto text = [&](const value& v) {
    std::string out;
    for (const sym& e : f.content(id(g, v)).ints) {
      if (!out.empty()) out += ' ';  // appended piece by piece: g++ 12 -O3 misreads -Wrestrict
      out += f.text(e);
    }
    return out;
  };
  EXPECT_EQ(text(small), "? 2 0");
  EXPECT_EQ(text(truth_values), "1 1 0");
  EXPECT_EQ(text(dims32), "? 4");
  EXPECT_EQ(text(dims64), "? 4");
}

// torch's expand writes Where(Equal(shape, -1), 1, shape): a dim is never -1.
TEST(Facts, ADimIsNeverEqualToANegativeNumber) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {"B", "S"});
  auto shape = b.op("Shape", {x});
  auto minus_one = b.op("Equal", {shape, shape_constant(b, {-1, -1})});
  auto target = b.op("Where", {minus_one, shape_constant(b, {1, 1}), shape});
  auto y = b.op("Expand", {b.input("y", dtype::float32, {1, 1}), target});
  b.output(y);
  const auto model = b.build();
  const graph g(model);
  EXPECT_EQ(facts_of(g).shape_text(id(g, y)), "[B, S]");
}

// torch.export writes x.expand(b, 1, -1, -1) as Expand(x, Abs(shape)): -1 and 1 both keep x's
// dim, and a dim is its own magnitude. An element of unknown sign stays unknown.
// timm's TensorFlow-style "same" padding computes each pad from the input size as floats:
// max((ceil(224 / 2) - 1) * 2 + 3 - 224, 0), halved, cast to int64. Each step folds.
TEST(Facts, CeilFloorRoundAndClipOfHeldNumbersFold) {
  model_builder b(17);
  auto size = b.scalar(dtype::float32, 224);
  auto out = b.op("Ceil", {b.op("Div", {size, b.scalar(dtype::float32, 2)})});
  auto total =
      b.op("Sub", {b.op("Add", {b.op("Mul", {b.op("Sub", {out, b.scalar(dtype::float32, 1)}),
                                             b.scalar(dtype::float32, 2)}),
                                b.scalar(dtype::float32, 3)}),
                   size});
  auto clipped = b.op("Clip", {total, b.scalar(dtype::float32, 0)});
  auto half = b.op("Cast", {b.op("Div", {clipped, b.scalar(dtype::float32, 2)})},
                   {{"to", std::int64_t(dtype::int64)}});
  auto floors = b.op("Floor", {b.initializer(dtype::float32, {3}, {-1.5, 0.5, 2.5})});
  auto rounds = b.op("Round", {b.initializer(dtype::float32, {3}, {-1.5, 0.5, 2.5})});
  auto capped =
      b.op("Clip", {b.initializer(dtype::int64, {3}, {-4, 3, 9}),
                    b.initializer(dtype::int64, {}, {0}), b.initializer(dtype::int64, {}, {5})});
  auto open = b.op("Clip", {size, b.input("low", dtype::float32, {})});
  for (const auto& v : {half, floors, rounds, capped, open}) b.output(v);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(elements_text(f, id(g, half)), "[0]");  // (111 * 2 + 3 - 224) / 2 = 0.5, truncated
  EXPECT_EQ(f.content(id(g, floors)).reals, (std::vector<double>{-2, 0, 2}));
  // Round halves to even, as ONNX's Round does.
  EXPECT_EQ(f.content(id(g, rounds)).reals, (std::vector<double>{-2, 0, 2}));
  EXPECT_EQ(elements_text(f, id(g, capped)), "[0, 3, 5]");
  // A bound read at run time: nothing is held.
  EXPECT_FALSE(f.content(id(g, open)).known);
}

TEST(Facts, AnExpandToTheMagnitudesOfATargetKeepsTheDimsMinusOneKeeps) {
  model_builder b(17);
  auto ids = b.input("ids", dtype::int64, {"B", "S"});
  auto x = b.input("x", dtype::float32, {1, 1, "S", "T"});
  auto batch = b.op("Shape", {ids}, {{"start", std::int64_t{0}}, {"end", std::int64_t{1}}});
  auto target =
      b.op("Concat", {batch, shape_constant(b, {1, -1, -1})}, {{"axis", std::int64_t{0}}});
  auto y = b.op("Expand", {x, b.op("Abs", {target})});
  auto signed_dims = b.op("Sub", {shape_constant(b, {0, 0, 0, 0}), b.op("Shape", {x})});
  auto z = b.op("Abs", {signed_dims});
  auto s_minus_t =
      b.op("Sub", {b.op("Shape", {x}, {{"start", std::int64_t{2}}, {"end", std::int64_t{3}}}),
                   b.op("Shape", {x}, {{"start", std::int64_t{3}}})});
  auto w = b.op("Abs", {s_minus_t});
  for (const auto& v : {y, z, w}) b.output(v);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.shape_text(id(g, y)), "[B, 1, S, T]");
  // 0 - shape is [-1, -1, -S, -T]: numbers and negated dims have known magnitudes; S - T has no
  // known sign.
  EXPECT_EQ(elements_text(f, id(g, z)), "[1, 1, S, T]");
  EXPECT_EQ(elements_text(f, id(g, w)), "[?]");
}

}  // namespace

namespace {

// Malformed nodes, as structural fuzzing writes them: inputs dropped, constants emptied, attributes
// resized. Each gets unknown facts (or ONNX's rule's, where that rule answers), never a crash.

// An int64 Constant written exactly: the builder's tensors pass through double, which rounds
// numbers near the int64 limits.
value exact_int64(model_builder& b, std::vector<std::int64_t> dims,
                  std::initializer_list<std::int64_t> xs) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::INT64);
  for (std::int64_t d : dims) t.add_dims(d);
  for (std::int64_t x : xs) t.add_int64_data(x);
  return b.op("Constant", {}, {{"value", t}});
}

// A Where whose third input was dropped breaks its schema: nothing is known of it. Folding its
// condition (a dim is never -1, so it picks input 2) used to read the input that is not there.
TEST(MalformedNodes, AWhereWithoutItsThirdInputIsUnknown) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, 3});
  auto minus_one = b.op("Equal", {b.op("Shape", {x}), shape_constant(b, {-1, -1})});
  auto picked = b.op("Where", {minus_one, shape_constant(b, {1, 1})}, {}, {.name = "pick"});
  auto gap = b.op("Where", {minus_one, value{}, shape_constant(b, {1, 1})}, {}, {.name = "gap"});
  b.output(picked);
  b.output(gap);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.why_unknown(id(g, picked)),
            "'pick' has unknown rank: Where 'pick' has 2 inputs, its schema at opset 17 takes 3");
  EXPECT_EQ(f.why_unknown(id(g, gap)),
            "'gap' has unknown rank: Where 'gap' omits input 1, which its schema at opset 17 "
            "requires");
}

// Near miss: past the opsets the linked onnx knows no schema checks the node, and the rule itself
// refuses a Where of two inputs.
TEST(MalformedNodes, AWhereWithoutItsThirdInputIsUnknownWhereNoSchemaChecksIt) {
  model_builder b(fusekit::schema_registry_opset() + 1);
  auto x = b.input("x", dtype::float32, {2, 3});
  auto minus_one = b.op("Equal", {b.op("Shape", {x}), shape_constant(b, {-1, -1})});
  auto picked = b.op("Where", {minus_one, shape_constant(b, {1, 1})});
  b.output(picked);
  const auto model = b.build();
  const graph g(model);
  EXPECT_EQ(facts_of(g).shape_text(id(g, picked)), "unknown rank");
  EXPECT_FALSE(facts_of(g).content(id(g, picked)).known);
}

// A Constant whose value_floats were emptied holds no element, known as none; reshaped to [2, 3]
// that is not six elements, so no content follows it into the Transpose, which used to read six.
TEST(MalformedNodes, AnEmptiedConstantReshapedAndTransposedFoldsNothing) {
  model_builder b(17);
  auto c = b.op("Constant", {}, {{"value_floats", std::vector<double>{}}});
  auto r = b.op("Reshape", {c, shape_constant(b, {2, 3})});
  auto t = b.op("Transpose", {r}, {{"perm", std::vector<std::int64_t>{1, 0}}});
  b.output(t);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.shape_text(id(g, c)), "[0]");
  EXPECT_TRUE(f.content(id(g, c)).known);
  EXPECT_FALSE(f.content(id(g, r)).known);
  EXPECT_FALSE(f.content(id(g, t)).known);
}

// The same Constant reshaped to a length known only at run time keeps its (empty) content; a
// declaration of six elements then makes the dim a number the content does not fit, and it goes.
TEST(MalformedNodes, ContentThatADeclarationNoLongerFitsIsDropped) {
  model_builder b(17);
  auto c = b.op("Constant", {}, {{"value_floats", std::vector<double>{}}});
  auto r = b.op("Reshape", {c, b.input("n", dtype::int64, {1})}, {}, {.name = "flat"});
  b.value_info(r, dtype::float32, {6});
  auto t = b.op("Transpose", {r}, {{"perm", std::vector<std::int64_t>{0}}});
  b.output(t);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.shape_text(id(g, r)), "[6]");
  EXPECT_FALSE(f.content(id(g, r)).known);
  EXPECT_FALSE(f.content(id(g, t)).known);
}

// A perm names each axis once, as many as the input has, as a list of ints. A repeated axis used
// to read the folded table past its end; a perm given as one int used to be taken for none (the
// axes reversed).
TEST(MalformedNodes, ATransposeWhosePermIsNoPermutationIsUnknown) {
  model_builder b(17);
  auto table = b.initializer(dtype::int64, {2, 3}, ints({1, 2, 3, 4, 5, 6}));
  auto repeated = b.op("Transpose", {table}, {{"perm", std::vector<std::int64_t>{1, 1}}});
  auto short_perm = b.op("Transpose", {table}, {{"perm", std::vector<std::int64_t>{1}}});
  auto single = b.op("Transpose", {table}, {{"perm", std::int64_t(1)}}, {.name = "single"});
  for (const auto& v : {repeated, short_perm, single}) b.output(v);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.shape_text(id(g, repeated)), "unknown rank");
  EXPECT_FALSE(f.content(id(g, repeated)).known);
  EXPECT_EQ(f.shape_text(id(g, short_perm)), "unknown rank");
  EXPECT_EQ(f.why_unknown(id(g, single)),
            "'single' has unknown rank: Transpose 'single' sets attribute 'perm' as INT, its "
            "schema at opset 17 types it INTS");
}

// Split-18 reads its sizes from input 1: a `split` attribute left from opset 13 sizes nothing, and
// a rule reading it would size the outputs wrongly.
TEST(MalformedNodes, AnAttributeTheSchemaDoesNotHaveMakesTheNodeUnknown) {
  model_builder b(18);
  auto x = b.input("x", dtype::float32, {2, 6});
  auto parts =
      b.ops("Split", {x}, {{"axis", std::int64_t(1)}, {"split", std::vector<std::int64_t>{2, 4}}},
            {.name = "halves", .outputs = 2});
  for (const auto& v : parts) b.output(v);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.why_unknown(id(g, parts[0])),
            "'halves' has unknown rank: Split 'halves' sets attribute 'split', which its schema at "
            "opset 18 does not have");
}

// Concat's axis has no default: without it the axis is no rule's to guess (it used to be 0).
TEST(MalformedNodes, AConcatWithoutItsAxisIsUnknown) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, 3});
  auto joined = b.op("Concat", {x, x}, {}, {.name = "join"});
  b.output(joined);
  const auto model = b.build();
  const graph g(model);
  EXPECT_EQ(facts_of(g).why_unknown(id(g, joined)),
            "'join' has unknown rank: Concat 'join' lacks attribute 'axis', which its schema at "
            "opset 17 requires");
}

// Axes name each axis once, within the rank. A Squeeze removes dims of size 1, those its axes
// name: axes known only at run time name none that can be proven (they used to be taken for
// "every dim of size 1").
TEST(MalformedNodes, AxesRepeatedOutOfRangeOrOfOtherSizesLeaveTheOpUnknown) {
  model_builder b(18);
  auto x = b.input("x", dtype::float32, {1, 4, 1});
  auto runtime = b.op("Squeeze", {x, b.input("axes", dtype::int64, {1})});
  auto four = b.op("Squeeze", {x, shape_constant(b, {1})});
  auto twice = b.op("Squeeze", {x, shape_constant(b, {0, -3})});
  auto beyond = b.op("Squeeze", {x, shape_constant(b, {3})});
  auto sliced_twice = b.op("Slice", {x, shape_constant(b, {0, 0}), shape_constant(b, {2, 1}),
                                     shape_constant(b, {1, 1})});
  auto padded_twice =
      b.op("Pad", {x, shape_constant(b, {1, 1, 1, 1}), value{}, shape_constant(b, {1, -2})});
  for (const auto& v : {runtime, four, twice, beyond, sliced_twice, padded_twice}) b.output(v);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.shape_text(id(g, runtime)), "unknown rank");
  EXPECT_EQ(f.shape_text(id(g, four)), "unknown rank");
  EXPECT_EQ(f.shape_text(id(g, twice)), "unknown rank");
  EXPECT_EQ(f.shape_text(id(g, beyond)), "unknown rank");
  EXPECT_EQ(f.shape_text(id(g, sliced_twice)), "unknown rank");
  EXPECT_EQ(f.shape_text(id(g, padded_twice)), "unknown rank");
}

// Split sizes are one per output, none below 0, and add up to the axis; sizes known only at run
// time say nothing of any part (they used to be taken for equal parts). Without sizes, from
// opset 18 on, the parts are ⌈d / n⌉ and a shorter last one, so S / 2 is no part's length.
TEST(MalformedNodes, SplitSizesThatDoNotAddUpLeaveTheSplitUnknown) {
  model_builder b(18);
  auto x = b.input("x", dtype::float32, {2, 10, "S"});
  auto axis = fusekit::build::attr("axis", std::int64_t(1));
  auto short_sizes = b.ops("Split", {x, shape_constant(b, {4, 4})}, {axis}, {.outputs = 2});
  auto negative = b.ops("Split", {x, shape_constant(b, {12, -2})}, {axis}, {.outputs = 2});
  auto runtime = b.ops("Split", {x, b.input("sizes", dtype::int64, {2})}, {axis},
                       {.name = "runtime", .outputs = 2});
  auto uneven = b.ops("Split", {x}, {axis, {"num_outputs", std::int64_t(3)}}, {.outputs = 3});
  auto halves = b.ops("Split", {x}, {{"axis", std::int64_t(2)}, {"num_outputs", std::int64_t(2)}},
                      {.name = "halves", .outputs = 2});
  for (const auto& vs : {short_sizes, negative, runtime, uneven, halves})
    for (const auto& v : vs) b.output(v);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.shape_text(id(g, short_sizes[0])), "unknown rank");
  EXPECT_EQ(f.shape_text(id(g, negative[0])), "unknown rank");
  EXPECT_EQ(f.shape_text(id(g, runtime[0])), "[2, dim 1 of 'runtime', S]");
  EXPECT_EQ(f.shape_text(id(g, uneven[0])), "[2, 4, S]");
  EXPECT_EQ(f.shape_text(id(g, uneven[2])), "[2, 2, S]");
  EXPECT_EQ(f.shape_text(id(g, halves[1])), "[2, 10, dim 2 of 'halves_1']");
}

// Near miss: before opset 18 the parts must be equal, and 7 has no two equal parts (it used to be
// split into parts of 7/2).
TEST(MalformedNodes, BeforeOpset18AnEvenSplitOfAnOddNumberIsUnknown) {
  model_builder b(13);
  auto x = b.input("x", dtype::float32, {2, 7});
  auto parts = b.ops("Split", {x}, {{"axis", std::int64_t(1)}}, {.outputs = 2});
  b.output(parts[0]);
  b.output(parts[1]);
  const auto model = b.build();
  const graph g(model);
  EXPECT_EQ(facts_of(g).shape_text(id(g, parts[0])), "unknown rank");
}

// No dim is negative: a Reshape, Expand or ConstantOfShape asked for one, or a Tile repeating
// a negative number of times, proves no shape of its own (each used to write the negative dim);
// a Range to below its start holds nothing.
TEST(MalformedNodes, NegativeSizesProveNoNegativeDim) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {1, 3});
  auto reshaped = b.op("Reshape", {x, shape_constant(b, {-3, -1})});
  auto expanded = b.op("Expand", {x, shape_constant(b, {-2, 3})});
  auto filled = b.op("ConstantOfShape", {shape_constant(b, {-4})});
  auto tiled = b.op("Tile", {x, shape_constant(b, {-1, 1})});
  auto none = b.op(
      "Range", {b.scalar(dtype::int64, 0), b.scalar(dtype::int64, -5), b.scalar(dtype::int64, 1)});
  for (const auto& v : {reshaped, expanded, filled, tiled, none}) b.output(v);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.shape_text(id(g, reshaped)), "unknown rank");
  EXPECT_EQ(f.shape_text(id(g, expanded)), "unknown rank");
  EXPECT_EQ(f.shape_text(id(g, filled)), "unknown rank");
  EXPECT_EQ(f.shape_text(id(g, tiled)), "unknown rank");
  EXPECT_EQ(f.shape_text(id(g, none)), "[0]");
}

// Numbers near the int64 limits: a Slice stepping back by almost the whole range takes one
// element, a Range striding 2 over the whole range holds half of it. Neither overflows (both used
// to, to lengths of 0).
TEST(MalformedNodes, StepsAndSpansNearTheInt64LimitsDoNotOverflow) {
  model_builder b(17);
  const std::int64_t highest = std::numeric_limits<std::int64_t>::max();
  auto x = b.input("x", dtype::float32, {5});
  auto back = b.op("Slice", {x, exact_int64(b, {1}, {-1}), exact_int64(b, {1}, {-1000}),
                             exact_int64(b, {1}, {0}), exact_int64(b, {1}, {-highest})});
  auto p = b.op("Gather", {b.op("Shape", {b.input("past", dtype::float32, {"P"})}),
                           b.scalar(dtype::int64, 0)});
  auto far = b.op("Range",
                  {p, b.op("Add", {p, exact_int64(b, {}, {highest})}), b.scalar(dtype::int64, 2)});
  b.output(back);
  b.output(far);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.shape_text(id(g, back)), "[1]");
  EXPECT_EQ(f.shape_text(id(g, far)), "[4611686018427387904]");
}

// A pool's attributes come one per spatial axis (pads two per axis): pads or strides of another
// length are no padding or stride to assume away (they used to be ignored).
TEST(MalformedNodes, WindowAttributesOfTheWrongLengthLeaveThePoolUnknown) {
  model_builder b(19);
  auto x = b.input("x", dtype::float32, {"B", 3, 8, 8});
  const auto kernel = fusekit::build::attr("kernel_shape", std::vector<std::int64_t>{3, 3});
  auto short_pads = b.op("AveragePool", {x}, {kernel, {"pads", std::vector<std::int64_t>{1, 1}}});
  auto one_stride = b.op("MaxPool", {x}, {kernel, {"strides", std::vector<std::int64_t>{2}}});
  b.output(short_pads);
  b.output(one_stride);
  const auto model = b.build();
  const graph g(model);
  EXPECT_EQ(facts_of(g).shape_text(id(g, short_pads)), "unknown rank");
  EXPECT_EQ(facts_of(g).shape_text(id(g, one_stride)), "unknown rank");
}

// The checker passes a GatherND whose batch_dims is negative, and ONNX's rule then reads the dim
// before data's first: it crashed. A batch_dims of no fewer dims than an input has, or indices
// whose last dim names more dims than data has past the batch ones, are refused alike. The node
// is unknown, and its explanation says why ONNX's rule was not asked.
TEST(MalformedNodes, AGatherNDOfANegativeBatchDimsIsUnknown) {
  model_builder b(13);
  auto data = b.input("data", dtype::float32, {2, 3, 4});
  auto indices = b.input("indices", dtype::int64, {2, 1});
  auto below =
      b.op("GatherND", {data, indices}, {{"batch_dims", std::int64_t(-3)}}, {.name = "below"});
  auto whole = b.op("GatherND", {data, indices}, {{"batch_dims", std::int64_t(2)}});
  auto wide = b.op("GatherND", {data, b.input("wide", dtype::int64, {2, 4})});
  auto fine = b.op("GatherND", {data, indices}, {{"batch_dims", std::int64_t(1)}});
  for (const auto& v : {below, whole, wide, fine}) b.output(v);
  const auto model = b.build();
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.why_unknown(id(g, below)),
            "'below' has unknown rank: GatherND 'below' sets batch_dims to -3, which must be from "
            "0 to below both inputs' ranks: ONNX's rule cannot read it");
  EXPECT_EQ(f.shape_text(id(g, whole)), "unknown rank");
  EXPECT_EQ(f.shape_text(id(g, wide)), "unknown rank");
  EXPECT_EQ(f.shape_text(id(g, fine)), "[2, 4]");
}

// From opset 18 a Split without sizes makes num_outputs parts, and ONNX's rule writes one per
// output: with more outputs than parts it read past its parts' end (garbage dims). fusekit's own
// rule refuses such a Split, but does not run where output 0 is omitted; ONNX's rule is not asked
// either. Nor is it asked for an axis past the int range, which it read wrapped into the rank.
TEST(MalformedNodes, ASplitOfFewerPartsThanOutputsIsUnknown) {
  model_builder b(18);
  auto x = b.input("x", dtype::float32, {2, 10});
  auto parts =
      b.ops("Split", {x}, {{"num_outputs", std::int64_t(1)}}, {.name = "parts", .outputs = 3});
  auto wrapped =
      b.ops("Split", {x}, {{"axis", std::int64_t(1) << 32}, {"num_outputs", std::int64_t(2)}},
            {.outputs = 2});
  for (const auto& v : parts) b.output(v);
  for (const auto& v : wrapped) b.output(v);
  auto model = b.build();
  for (auto& node : *model.mutable_graph()->mutable_node())
    if (node.name() == "parts") node.set_output(0, "");
  auto& outputs = *model.mutable_graph()->mutable_output();
  outputs.erase(outputs.begin());
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.why_unknown(*g.find_value(parts[2].name)),
            "'parts_2' has unknown rank: Split 'parts' makes 1 parts (num_outputs) for 3 "
            "outputs: ONNX's rule cannot read it");
  EXPECT_EQ(f.shape_text(*g.find_value(parts[1].name)), "unknown rank");
  EXPECT_EQ(f.shape_text(id(g, wrapped[0])), "unknown rank");
}

// ONNX's Attention rule reads the value's sequence, and a 3-D value's hidden size, as numbers: a
// dim that is none read as 0, and the scores or the output were proven of length 0. The rule is
// not asked there; fusekit's own rule still proves a 4-D Attention's output.
TEST(MalformedNodes, AnAttentionWhoseValueDimsAreNoNumbersGetsNoLengthZero) {
  model_builder b(23);
  auto q = b.input("q", dtype::float32, {2, 4, 5, 8});
  auto v = b.input("v", dtype::float32, {2, 4, "L", 8});
  auto four = b.ops("Attention", {q, b.input("k", dtype::float32, {2, 4, "L", 8}), v}, {},
                    {.name = "four", .outputs = 4});
  auto q3 = b.input("q3", dtype::float32, {2, 5, 8});
  auto v3 = b.input("v3", dtype::float32, {2, "L", "Dv"});
  auto three = b.op("Attention", {q3, b.input("k3", dtype::float32, {2, "L", 8}), v3},
                    {{"q_num_heads", std::int64_t(2)}, {"kv_num_heads", std::int64_t(2)}});
  b.output(four[0]);
  b.output(four[3]);
  b.output(three);
  auto model = b.build();
  for (auto& node : *model.mutable_graph()->mutable_node())
    if (node.name() == "four") {
      node.set_output(1, "");
      node.set_output(2, "");
    }
  const graph g(model);
  const auto& f = facts_of(g);
  EXPECT_EQ(f.shape_text(id(g, four[0])), "[2, 4, 5, 8]");
  EXPECT_EQ(f.why_unknown(id(g, four[3])),
            "'four_3' has unknown rank: Attention 'four' returns its scores, whose length ONNX's "
            "rule reads as a number from the value: ONNX's rule cannot read it");
  EXPECT_EQ(f.shape_text(id(g, three)), "unknown rank");
}

// Past the opsets any schema checks, a Shape without its input still explains itself: the
// explanation used to read the input that is not there.
TEST(MalformedNodes, AnExplanationStopsAtAShapeWithoutItsInput) {
  model_builder b(fusekit::schema_registry_opset() + 1);
  auto x = b.input("x", dtype::float32, {"B", 64});
  auto dims = b.op("Shape", {}, {}, {.name = "dims"});
  b.value_info(dims, dtype::int64, {1});
  auto y = b.op("Reshape", {x, dims}, {}, {.name = "view"});
  b.output(y);
  const auto model = b.build();
  const graph g(model);
  EXPECT_EQ(facts_of(g).why_unknown(id(g, y), 0),
            "dim 0 of 'view' is unknown: Reshape 'view' reads input 1 'dims', whose element 0 is "
            "not folded: Shape 'dims' is not folded by fusekit ([1])");
}

TEST(Facts, FixedAreConstantsAndWhatDeterministicOpsComputeFromThem) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {"N", 4});
  auto w = b.initializer(dtype::float32, {4}, {1, 2, 3, 4});
  auto from_w = b.op("Neg", {w});
  auto from_x = b.op("Add", {x, w});
  auto noise = b.op("RandomNormalLike", {w});
  auto of_noise = b.op("Neg", {noise});
  auto static_dim = b.op("Gather", {b.op("Shape", {x}), b.scalar(dtype::int64, 1)});
  // CastLike reads x for its type alone.
  auto w_like_x =
      b.op("CastLike", {b.initializer(dtype::float16, {70}, std::vector<double>(70, 1)), x});
  b.output(b.op("Sum", {from_w, from_x, of_noise}), dtype::float32, {"N", 4});
  b.output(static_dim, dtype::int64, {});
  b.output(w_like_x, dtype::float32, {70});
  fusekit::model m = b.build_model();
  const graph g(m);
  const auto& f = facts_of(g);
  auto fixed = [&](const value& v) { return f.fixed(*g.find_value(v.name)); };
  EXPECT_TRUE(fixed(w));
  EXPECT_TRUE(fixed(from_w));
  EXPECT_FALSE(fixed(x));
  EXPECT_FALSE(fixed(from_x));
  // Random ops give another value on every run, and so does what reads them.
  EXPECT_FALSE(fixed(noise));
  EXPECT_FALSE(fixed(of_noise));
  // Dim 1 of x is a number, whatever the batch: its elements are held, so it is fixed.
  EXPECT_TRUE(fixed(static_dim));
  EXPECT_TRUE(fixed(w_like_x));
}

}  // namespace
