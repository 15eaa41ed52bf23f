// Matching allocates nothing: every operator new in this binary is counted, and a full match,
// a failed one and a backtracking one run between two readings of the counter.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "fusekit/graph/facts.hpp"
#include "fusekit/graph/model_builder.hpp"
#include "fusekit/pattern/pattern.hpp"

namespace {
std::atomic<long> allocations{0};
}  // namespace

// The replacements below pair malloc with free; GCC cannot see that operator new is replaced too.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

// Every allocating form that the library (or the standard library under it) may call is replaced,
// so that each pointer is freed by the matching replacement.
void* operator new(std::size_t size) {
  ++allocations;
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return operator new(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  ++allocations;
  return std::malloc(size ? size : 1);
}
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept {
  return operator new(size, tag);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace {

using namespace fusekit::pattern;
using fusekit::dtype;

constexpr auto scores = op<"MatMul">(capture<"q">, capture<"kt">);
constexpr auto scaled = commutative(op<"Mul">(optional<"Cast">(scores), constant_scalar<"scale">));
constexpr auto probs = optional<"Cast">(op<"Softmax">(scaled).attr<"axis">(last_axis));
constexpr auto dit = op<"MatMul">(probs, capture<"v">);
// Fails only after backtracking through both operand orders of Mul and both optional branches.
constexpr auto near_miss = op<"MatMul">(probs, capture<"q">);

TEST(PatternAllocation, MatchingAllocatesNothing) {
  fusekit::build::model_builder b;
  auto q = b.input("q", dtype::float16, {2, 4, "S", 8});
  auto kt = b.input("kt", dtype::float16, {2, 4, 8, "S"});
  auto v = b.input("v", dtype::float16, {2, 4, "S", 8});
  auto s = b.op("Cast", {b.op("MatMul", {q, kt})}, {{"to", dtype::float32}});
  auto p = b.op("Softmax", {b.op("Mul", {b.scalar(dtype::float32, 0.125), s})}, {{"axis", -1}});
  auto out = b.op("MatMul", {b.op("Cast", {p}, {{"to", dtype::float16}}), v});
  b.output(out);
  const auto model = b.build();
  const fusekit::graph g(model);
  const fusekit::node_id root = g.producer(*g.find_value(out.name));

  const long before = allocations.load();
  const bool matched = bool(match(dit, g, root));
  const bool missed = bool(match(near_miss, g, root));
  const bool wrong_root = bool(match(dit, g, 0));
  const long during = allocations.load() - before;

  EXPECT_TRUE(matched);
  EXPECT_FALSE(missed);
  EXPECT_FALSE(wrong_root);
  EXPECT_EQ(during, 0);

  // The counter sees allocations: explaining a failure formats strings.
  fusekit::pattern::explanation why;
  const long explained_before = allocations.load();
  EXPECT_FALSE(match(near_miss, g, root, &why));
  EXPECT_GT(allocations.load() - explained_before, 0);

  // How far a failed match got, which decides whether it is a near miss, is known without
  // writing a message; the message written after it, only for the failures that tie with the
  // best, is the one a full explanation gives.
  fusekit::pattern::explanation reach{.messages = false};
  const long reach_before = allocations.load();
  EXPECT_FALSE(match(near_miss, g, root, &reach));
  EXPECT_EQ(allocations.load() - reach_before, 0);
  EXPECT_TRUE(reach.failed);
  EXPECT_EQ(reach.progress, why.progress);
  EXPECT_EQ(reach.depth, why.depth);
  EXPECT_EQ(reach.held, why.held);
  fusekit::pattern::explanation again = fusekit::pattern::as_far_as(reach);
  EXPECT_FALSE(match(near_miss, g, root, &again));
  EXPECT_EQ(again.message, why.message);
  EXPECT_EQ(again.matched, why.matched);
  EXPECT_EQ(again.failing_node, why.failing_node);
}

// The vocabulary that reads facts, earlier captures and tensor contents, skips value-preserving
// nodes and matches optional or variadic inputs. facts_of(g) is built once per graph, on first
// use: it is built before counting.
constexpr auto qk =
    op<"MatMul">(capture<"q">.proven_rank<4>(),
                 transparent(capture<"kt">.same_dim<-2, "q", -1>().where_bound(
                     "not q", [](const fusekit::graph&, fusekit::value_id v, const auto& bound) {
                       return bound.template get<"q">() != v;
                     })));
constexpr auto masked = op<"Where">(constant<"mask">.lower_triangular_ones(), qk,
                                    constant_scalar<"fill">.at_most(-1e4));
constexpr auto joined = op<"Concat">(all<"parts">(any().proven_rank<4>()));
constexpr auto sliced =
    op<"Slice">(capture<"data">, constant<"starts">.all_equal(), constant<"ends">.all_ones(),
                maybe(constant<"axes">), maybe(constant<"steps">));
// Fails after trying every skip length of transparent().
constexpr auto masked_miss = op<"Where">(constant<"mask">.lower_triangular_ones(),
                                         op<"MatMul">(capture<"q">, transparent(op<"Relu">(any()))),
                                         constant_scalar<"fill">.at_most(-1e4));

TEST(PatternAllocation, NewVocabularyAllocatesNothing) {
  fusekit::build::model_builder b;
  auto q = b.input("q", dtype::float16, {2, 4, 3, 8});
  auto k = b.input("k", dtype::float16, {2, 4, 8, 3});
  auto kt = b.op("Cast", {b.op("Cast", {b.op("Identity", {k})}, {{"to", dtype::float32}})},
                 {{"to", dtype::float16}});
  auto mask = b.initializer("mask", dtype::boolean, {3, 3}, {1, 0, 0, 1, 1, 0, 1, 1, 1});
  auto where = b.op("Where", {mask, b.op("MatMul", {q, kt}), b.scalar(dtype::float16, -65504)});
  auto concat = b.op("Concat", {where, q}, {{"axis", -1}});
  auto slice = b.op("Slice", {concat, b.initializer(dtype::int64, {2}, {0, 0}),
                              b.initializer(dtype::int64, {1}, {1})});
  b.output(slice);
  const auto model = b.build();
  const fusekit::graph g(model);
  auto root = [&](const auto& v) { return g.producer(*g.find_value(v.name)); };
  (void)fusekit::facts_of(g);

  const long before = allocations.load();
  const bool matched = bool(match(masked, g, root(where)));
  const bool missed = bool(match(masked_miss, g, root(where)));
  const bool concat_matched = bool(match(joined, g, root(concat)));
  const bool slice_matched = bool(match(sliced, g, root(slice)));
  const long during = allocations.load() - before;

  EXPECT_TRUE(matched);
  EXPECT_FALSE(missed);
  EXPECT_TRUE(concat_matched);
  EXPECT_TRUE(slice_matched);
  EXPECT_EQ(during, 0);
}

// A Reduce op's axes from a constant input (opset 18) and from the attribute, with the rank that
// makes axis 2 the last one read from the facts; a constant's elements.
constexpr auto reduced = op<"Sub">(
    capture<"x">, op<"ReduceMean">(capture<"x">, maybe(any())).axes(last_axis).attr<"keepdims">(1));
constexpr auto reduced_miss = op<"ReduceMean">(any(), maybe(any())).axes(ints(0));
constexpr auto scaled_by = op<"Mul">(any(), constant<"w">.values({1, 0, 0.5}));
constexpr auto scaled_miss = op<"Mul">(any(), constant<"w">.values({1, 0, 0.25}));

TEST(PatternAllocation, ReductionsAndConstantValuesAllocateNothing) {
  fusekit::build::model_builder b(18);
  auto x = b.input("x", dtype::float32, {2, 3, 4});
  auto y = b.op("Relu", {x});
  auto centred = b.op("Sub", {y, b.op("ReduceMean", {y, b.initializer(dtype::int64, {1}, {2})})});
  auto scaled = b.op("Mul", {centred, b.initializer(dtype::float16, {3}, {1, 0, 0.5})});
  b.output(scaled);
  const auto model = b.build();
  const fusekit::graph g(model);
  auto root = [&](const auto& v) { return g.producer(*g.find_value(v.name)); };
  (void)fusekit::facts_of(g);

  const long before = allocations.load();
  const bool matched = bool(match(reduced, g, root(centred)));
  const bool missed = bool(match(reduced_miss, g, g.producer(g.input(root(centred), 1))));
  const bool values_matched = bool(match(scaled_by, g, root(scaled)));
  const bool values_missed = bool(match(scaled_miss, g, root(scaled)));
  const long during = allocations.load() - before;

  EXPECT_TRUE(matched);
  EXPECT_FALSE(missed);
  EXPECT_TRUE(values_matched);
  EXPECT_FALSE(values_missed);
  EXPECT_EQ(during, 0);
}

}  // namespace
