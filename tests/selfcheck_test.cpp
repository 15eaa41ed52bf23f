// selfcheck's own specification: a sound rule passes, and each way a rule can be wrong fails it
// with a reason: a fusion that computes something else, a guard that refuses what the pattern
// accepts, a predicate in code that nothing here can write.
#include "fusekit/rewrite/selfcheck.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusekit/graph/array.hpp"
#include "fusekit/graph/facts.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"
#include "fusekit/rewrite/rule.hpp"
#include "fusekit/rules/all.hpp"
#include "fusekit/rules/check_bundled.hpp"
#include "fusekit/rules/sweeps.hpp"
#include "test_support.hpp"

namespace {

using namespace fusekit::pattern;
using fusekit::dtype;
using fusekit::rewrite::verdict;

fusekit::selfcheck::options with_runtime(const std::string& name) {
  return {.write_to = std::filesystem::path(FUSEKIT_BINARY_DIR) / "selfcheck" / name,
          .python = FUSEKIT_PYTHON};
}

// x·σ(x) is SiLU: com.microsoft.QuickGelu with alpha 1 computes it.
struct silu {
  static constexpr std::string_view name = "silu";
  static constexpr auto pattern = commutative(op<"Mul">(capture<"x">, op<"Sigmoid">(capture<"x">)));
  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    e.replace_root(e.op("QuickGelu", {e.value(get<"x">(m))}, {{"alpha", 1.0f}}, "com.microsoft"));
  }
};

TEST(Selfcheck, PassesASoundRule) {
  const auto r = fusekit::selfcheck::check<silu>(with_runtime("silu"));
  EXPECT_TRUE(r.ok()) << r.to_table();
  EXPECT_EQ(r.to_table(),
            "silu: ok; 7 of 7 instances fused, 6 of 6 alternatives covered; parity with ONNX "
            "Runtime 7 of 7; 2 mutants: 2 refused and named\n");
  // An op's inputs that are ops are written before its leaves: Sigmoid(x) and its x first.
  ASSERT_EQ(r.mutants.size(), 2u);
  EXPECT_EQ(r.mutants[0].breaks, "a reader outside the pattern of Sigmoid(x)");
  EXPECT_EQ(r.mutants[1].breaks, "'x' twice");
}

// Where(c, x, y) is Where(Not(c), y, x). The condition's leaf is bool, as Where's schema admits
// no other type for it.
struct where_negated {
  static constexpr std::string_view name = "where-negated";
  static constexpr auto pattern = op<"Where">(capture<"c">, capture<"x">, capture<"y">);
  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    e.replace_root(e.op("Where", {e.op("Not", {e.value(get<"c">(m))}), e.value(get<"y">(m)),
                                  e.value(get<"x">(m))}));
  }
};

TEST(Selfcheck, GivesALeafTheOneTypeItsOpAdmits) {
  const auto r = fusekit::selfcheck::check<where_negated>(with_runtime("where_negated"));
  EXPECT_TRUE(r.ok()) << r.to_table();
  EXPECT_EQ(r.instances.at(0).parity, "ok");
}

// x + y in either order, or x − y, as one Sum: the any_of and the commutative Add it begins with
// share an address, and are two choices all the same (both orders of the Add are covered).
struct difference_as_sum {
  static constexpr std::string_view name = "difference-as-sum";
  static constexpr auto pattern = any_of(commutative(op<"Add">(capture<"x">, capture<"y">)),
                                         op<"Sub">(capture<"x">, capture<"y">))
                                      .bind<"op">();
  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    const std::string y = e.value(get<"y">(m));
    e.replace_root(e.op("Sum", {e.value(get<"x">(m)), get<"op">(m) == 0 ? y : e.op("Neg", {y})}));
  }
};

TEST(Selfcheck, TellsApartChoicesThatShareAnAddress) {
  const auto r = fusekit::selfcheck::check<difference_as_sum>(with_runtime("difference_as_sum"));
  EXPECT_TRUE(r.ok()) << r.to_table();
  // two branches, two operand orders, two float types, two opsets
  EXPECT_EQ(r.alternatives, 8u);
}

// Relu(Relu(x)) is Relu(x). The Cast x may come through is written once and used below both
// branches: two objects of the pattern, and one choice to cover.
inline constexpr auto x_maybe_cast = through_casts(capture<"x">);
struct relu_once {
  static constexpr std::string_view name = "relu-once";
  static constexpr auto pattern =
      any_of(op<"Relu">(op<"Relu">(x_maybe_cast)), op<"Relu">(x_maybe_cast));
  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    e.replace_root(e.op("Relu", {e.value(get<"x">(m))}));
  }
};

TEST(Selfcheck, CoversAChoiceWrittenOnceAndUsedTwiceOnce) {
  const auto r = fusekit::selfcheck::check<relu_once>(with_runtime("relu_once"));
  EXPECT_TRUE(r.ok()) << r.to_table();
  // two branches, the Cast absent or present, two float types, two opsets
  EXPECT_EQ(r.alternatives, 8u);
}

// The same pattern fused into GELU: another function, which only ONNX Runtime tells apart.
struct silu_as_gelu : silu {
  static constexpr std::string_view name = "silu-as-gelu";
  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    e.replace_root(e.op("Gelu", {e.value(get<"x">(m))}, {}, "com.microsoft"));
  }
};

TEST(Selfcheck, FailsAFusionThatComputesSomethingElse) {
  const auto r = fusekit::selfcheck::check<silu_as_gelu>(with_runtime("silu_as_gelu"));
  EXPECT_FALSE(r.ok());
  for (const auto& i : r.instances) {
    EXPECT_TRUE(i.fused);
    EXPECT_TRUE(i.parity.starts_with("differs: output 0 differs by up to")) << i.parity;
  }
}

// A guard that refuses float16, which its pattern accepts: that alternative is never covered.
struct silu_float32 : silu {
  static constexpr std::string_view name = "silu-float32";
  static verdict guard(const fusekit::graph& g, const auto& m) {
    if (g.type(get<"x">(m)) == dtype::float32) return verdict::yes();
    return verdict::no("x is not float32");
  }
};

TEST(Selfcheck, FailsAGuardThatRefusesWhatThePatternAccepts) {
  const auto r = fusekit::selfcheck::check<silu_float32>({});
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.uncovered.size(), 1u) << r.to_table();
  EXPECT_EQ(r.uncovered[0],
            "float type float32|float16: 2 of 2: x is not float32 (and with every leaf shape "
            "searched)");
}

// A predicate written as code says what it accepts to the match only: an axis it wants that the
// op's default is not stays unwritten, and the instance is refused, with the predicate's reason.
struct softmax_first_axis {
  static constexpr std::string_view name = "softmax-first-axis";
  static constexpr auto pattern =
      op<"Softmax">(capture<"x">)
          .attr<"axis">(
              satisfies("axis 0", [](const onnx::AttributeProto& a) { return a.i() == 0; }));
  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    e.replace_root(e.op("Softmax", {e.value(get<"x">(m))}, {{"axis", std::int64_t(0)}}));
  }
};

TEST(Selfcheck, ReportsAPredicateItCannotWrite) {
  const auto r = fusekit::selfcheck::check<softmax_first_axis>({});
  EXPECT_FALSE(r.ok());
  ASSERT_FALSE(r.instances.empty());
  EXPECT_EQ(r.instances[0].reason,
            "Softmax 'Softmax_0': axis = -1 (opset 17 default), expected axis 0 (and with every "
            "leaf shape searched)");
}

// x·σ(α·x), α from 1e-6 to 1e6, as QuickGelu with that α.
struct scaled_silu {
  static constexpr std::string_view name = "scaled-silu";
  static constexpr auto pattern = commutative(op<"Mul">(
      capture<"x">, op<"Sigmoid">(commutative(op<"Mul">(
                        capture<"x">, constant_scalar<"alpha">.at_least(1e-6).at_most(1e6))))));
  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    e.replace_root(
        e.op("QuickGelu", {e.value(get<"x">(m))}, {{"alpha", get<"alpha">(m)}}, "com.microsoft"));
  }
};

TEST(Selfcheck, WritesAConstantInsideItsBoundsAsItsTypeHoldsThem) {
  // Halfway from 1e-6 to 1e6 is past float16's largest number: written there, α would be inf,
  // and the rule would rightly refuse every instance.
  auto o = with_runtime("scaled_silu");
  o.types = {dtype::float16};
  const auto r = fusekit::selfcheck::check<scaled_silu>(o);
  EXPECT_TRUE(r.ok()) << r.to_table();
}

// x·σ(x), σ(x) through a Cast to the type it has or not.
struct silu_through_a_cast {
  static constexpr std::string_view name = "silu-through-a-cast";
  static constexpr auto pattern =
      commutative(op<"Mul">(capture<"x">, through_casts(op<"Sigmoid">(capture<"x">))));
  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    e.replace_root(e.op("QuickGelu", {e.value(get<"x">(m))}, {{"alpha", 1.0f}}, "com.microsoft"));
  }
};

TEST(Selfcheck, RunsTheOriginalWithACastToItsOwnTypeAsTheIdentityItIs) {
  // ONNX Runtime's CPU provider fails to load a float16 Cast to float16 between two computed
  // values; the copy it runs has an Identity in the Cast's place, and parity is proven all the
  // same.
  auto o = with_runtime("silu_through_a_cast");
  std::filesystem::remove_all(o.write_to);
  o.types = {dtype::float16};
  const auto r = fusekit::selfcheck::check<silu_through_a_cast>(o);
  EXPECT_TRUE(r.ok()) << r.to_table();
  int runnable_copies = 0;
  for (const auto& f : std::filesystem::directory_iterator(o.write_to))
    runnable_copies += f.path().string().ends_with(".ort.onnx");
  EXPECT_GT(runnable_copies, 0);
}

// [B, N, S, H] → Transpose(0,2,1,3) → Reshape(B, S, N·H), the heads merged back, with the target
// shape left open (any()): the predicate the Reshape states in code is what settles it.
bool merges_the_last_two_dims(const fusekit::graph& g, fusekit::node_id reshape) {
  const fusekit::facts& f = fusekit::facts_of(g);
  const fusekit::value_id in = g.input(reshape, 0), out = g.output(reshape, 0);
  return f.rank(in) == 4u && f.rank(out) == 3u &&
         f.same_dim(out, 0, in, 0) == fusekit::truth::yes &&
         f.same_dim(out, 1, in, 1) == fusekit::truth::yes &&
         equal(*f.dim_of(out, 2), *f.dim_of(in, 2) * *f.dim_of(in, 3)) == fusekit::truth::yes;
}
struct heads_merged_back {
  static constexpr std::string_view name = "heads-merged-back";
  static constexpr auto pattern =
      op<"Reshape">(op<"Transpose">(capture<"x">).attr<"perm">(ints(0, 2, 1, 3)), any())
          .where("the last two dims merged", merges_the_last_two_dims);
  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    const std::string turned = e.op("Transpose", {e.value(get<"x">(m))},
                                    {{"perm", std::vector<std::int64_t>{0, 2, 1, 3}}});
    e.replace_root(e.op("Reshape", {turned, e.constant(dtype::int64, {3}, {0, 0, -1})}));
  }
};

TEST(Selfcheck, DerivesAViewsOpenShapeFromWhatItRegroups) {
  auto o = with_runtime("heads_merged_back");
  o.shape = {2, 3, 4, 8};
  const auto r = fusekit::selfcheck::check<heads_merged_back>(o);
  EXPECT_TRUE(r.ok()) << r.to_table();
  // Of the candidates ([8, 3, 8], [2, 12, 8], [2, 4, 24], …) the Reshape's predicate takes the
  // third; the instance keeps it.
  const auto model = fusekit::load_model(o.write_to / "instance_0.onnx");
  bool found = false;
  for (const auto& t : model.proto.graph().initializer())
    found = found || (t.dims_size() == 1 && t.dims(0) == 3);
  EXPECT_TRUE(found) << "no three-dim target shape in instance_0.onnx";
}

// q·kᵀ with k in [B, S, N, H]: its leaf must be the other layout of q's [B, N, S, H], which only
// the leaf search's last form, two dims exchanged, writes (the guard judges it). Emitted as the
// same product through BNSH, which computes the same.
struct scores_of_bsnh_keys {
  static constexpr std::string_view name = "scores-of-bsnh-keys";
  static constexpr auto pattern =
      op<"MatMul">(capture<"q">, op<"Transpose">(capture<"k">).attr<"perm">(ints(0, 2, 3, 1)));
  static verdict guard(const fusekit::graph& g, const auto& m) {
    const fusekit::facts& f = fusekit::facts_of(g);
    const fusekit::value_id q = get<"q">(m), k = get<"k">(m);
    if (f.rank(q) == 4u && f.rank(k) == 4u && f.same_dim(q, 1, k, 2) == fusekit::truth::yes &&
        f.same_dim(q, 2, k, 1) == fusekit::truth::yes &&
        f.same_dim(q, 3, k, 3) == fusekit::truth::yes)
      return verdict::yes();
    return verdict::no("k is not q's [B, N, S, H] as [B, S, N, H]");
  }
  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    const std::string bnsh = e.op("Transpose", {e.value(get<"k">(m))},
                                  {{"perm", std::vector<std::int64_t>{0, 2, 1, 3}}});
    const std::string kt =
        e.op("Transpose", {bnsh}, {{"perm", std::vector<std::int64_t>{0, 1, 3, 2}}});
    e.replace_root(e.op("MatMul", {e.value(get<"q">(m)), kt}));
  }
};

TEST(Selfcheck, TriesTheOtherLayoutOfALeaf) {
  auto o = with_runtime("scores_of_bsnh_keys");
  o.shape = {2, 3, 4, 8};
  const auto r = fusekit::selfcheck::check<scores_of_bsnh_keys>(o);
  EXPECT_TRUE(r.ok()) << r.to_table();
}

// Concat along axis 1 of three, which the pattern states as code alone: the axis is searched as a
// view's shape is (-1, -2, -3), the rule the judge. Emitted as a Concat along axis 0 between two
// Transposes, which computes the same.
bool along_axis_one(const fusekit::graph& g, fusekit::node_id concat) {
  const auto axis = g.attribute_int(concat, "axis");
  const auto rank = fusekit::facts_of(g).rank(g.output(concat, 0));
  return axis && rank == 3u && (*axis == 1 || *axis == -2);
}
struct concat_along_axis_one {
  static constexpr std::string_view name = "concat-along-axis-one";
  static constexpr auto pattern =
      op<"Concat">(capture<"a">, capture<"b">).where("along axis 1", along_axis_one);
  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    const auto turned = [&](const std::string& x) {
      return e.op("Transpose", {x}, {{"perm", std::vector<std::int64_t>{1, 0, 2}}});
    };
    e.replace_root(
        turned(e.op("Concat", {turned(e.value(get<"a">(m))), turned(e.value(get<"b">(m)))},
                    {{"axis", std::int64_t(0)}})));
  }
};

TEST(Selfcheck, SearchesAConcatsAxisThatOnlyCodeStates) {
  const auto r = fusekit::selfcheck::check<concat_along_axis_one>(with_runtime("concat_axis"));
  EXPECT_TRUE(r.ok()) << r.to_table();
}

// Where(IsNaN(x), 0, x): x is read through IsNaN, whose output alone is the bool a Where's
// condition must be; x is of the instance's float type. Emitted with a double Not around the
// test, which computes the same.
struct nan_to_zero {
  static constexpr std::string_view name = "nan-to-zero";
  static constexpr auto pattern =
      op<"Where">(op<"IsNaN">(capture<"x">), constant_scalar<"zero">.value(0.0), capture<"x">);
  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    const std::string x = e.value(get<"x">(m));
    const std::string nan = e.op("Not", {e.op("Not", {e.op("IsNaN", {x})})});
    e.replace_root(e.op("Where", {nan, e.value(get<"zero">(m)), x}));
  }
};

TEST(Selfcheck, GivesWhatAnOpOfAnotherOutputTypeReadsItsOwnType) {
  const auto r = fusekit::selfcheck::check<nan_to_zero>(with_runtime("nan_to_zero"));
  EXPECT_TRUE(r.ok()) << r.to_table();
}

// Relu of what is already non-negative is that value: the guard proves it from x's producer, a
// Relu or an Abs, beyond the pattern. Silent on that, the rule leaves its check a graph input
// for x, which its guard refuses.
struct relu_of_non_negative_unsourced {
  static constexpr std::string_view name = "relu-of-non-negative";
  static constexpr auto pattern = op<"Relu">(capture<"x">);
  static verdict guard(const fusekit::graph& g, const auto& m) {
    const fusekit::node_id p = g.producer(get<"x">(m));
    if (p != fusekit::no_id && (g.op_type(p) == "Relu" || g.op_type(p) == "Abs"))
      return verdict::yes();
    return verdict::no("x is not proven non-negative");
  }
  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    e.replace_root(e.value(get<"x">(m)));
  }
};
// Its sources say what the guard reads, and the check writes both producers.
struct relu_of_non_negative : relu_of_non_negative_unsourced {
  static constexpr auto sources =
      fusekit::pattern::sources(source<"x">(any_of(op<"Relu">(any()), op<"Abs">(any()))));
};

TEST(Selfcheck, WritesWhatTheGuardReadsBeyondThePatternFromTheRulesSources) {
  const auto r = fusekit::selfcheck::check<relu_of_non_negative>(with_runtime("relu_of_relu"));
  EXPECT_TRUE(r.ok()) << r.to_table();
  EXPECT_EQ(r.to_table(),
            "relu-of-non-negative: ok; 7 of 7 instances fused, 6 of 6 alternatives covered; "
            "parity with ONNX Runtime 7 of 7; 0 mutants: 0 refused and named\n");
  const auto bare = fusekit::selfcheck::check<relu_of_non_negative_unsourced>({});
  EXPECT_FALSE(bare.ok());
  ASSERT_FALSE(bare.uncovered.empty());
  EXPECT_EQ(bare.uncovered.front(),
            "float type float32|float16: 1 of 2: x is not proven non-negative (and with every "
            "leaf shape searched)");
}

// A Sum of initializers as a chain of Adds, which the guard takes only of constants: every term
// is an element of the list "xs". Silent on them, the rule leaves its check graph inputs for the
// terms, which its guard refuses; its source writes each term as an initializer.
struct sum_of_constants_unsourced {
  static constexpr std::string_view name = "sum-of-constants";
  static constexpr auto pattern = op<"Sum">(all<"xs">(any()));
  static verdict guard(const fusekit::graph& g, const auto& m) {
    for (const fusekit::value_id x : get<"xs">(m))
      if (!g.is_initializer(x))
        return verdict::no(std::string(g.name(x)) + " is not an initializer");
    return verdict::yes();
  }
  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    const auto terms = get<"xs">(m);
    auto sum = e.value(terms.front());
    for (std::size_t i = 1; i < terms.size(); ++i) sum = e.op("Add", {sum, e.value(terms[i])});
    e.replace_root(sum);
  }
};
struct written_term {
  static auto write(auto& w) {
    return w.initializer(w.type(), {2, 3}, {1.0, -2.0, 3.0, 0.5, 4.0, -1.5});
  }
};
struct sum_of_constants : sum_of_constants_unsourced {
  static constexpr auto sources = fusekit::pattern::sources(source<"xs">(written<written_term>));
};

TEST(Selfcheck, WritesEachElementOfAListFromItsSource) {
  const auto r = fusekit::selfcheck::check<sum_of_constants>(with_runtime("sum_of_constants"));
  EXPECT_TRUE(r.ok()) << r.to_table();
  EXPECT_EQ(r.to_table(),
            "sum-of-constants: ok; 6 of 6 instances fused, 4 of 4 alternatives covered; parity "
            "with ONNX Runtime 6 of 6; 0 mutants: 0 refused and named\n");
  // Graph inputs for the terms: the guard refuses every instance.
  const auto bare = fusekit::selfcheck::check<sum_of_constants_unsourced>({});
  EXPECT_FALSE(bare.ok());
  ASSERT_FALSE(bare.uncovered.empty());
  EXPECT_EQ(bare.uncovered.front(),
            "float type float32|float16: 1 of 2: any_0 is not an initializer (and with every "
            "leaf shape searched)");
}

// cat(x[h:], x[:h]) on the last axis, a roll by half of it, whose bounds only the guard reads:
// the Slices' open bounds are searched as views, a half of the last axis each. Emitted as the
// same halves, sliced again from x.
struct swap_halves {
  static constexpr std::string_view name = "swap-halves";
  static constexpr auto pattern =
      op<"Concat">(op<"Slice">(capture<"x">, any(), any(), any()).bind<"upper">(),
                   op<"Slice">(capture<"x">, any(), any(), any()).bind<"lower">())
          .attr<"axis">(last_axis);
  static verdict guard(const fusekit::graph& g, const auto& m) {
    const auto one = [&](fusekit::node_id slice, std::size_t k) -> std::optional<std::int64_t> {
      const fusekit::content_fact& c = fusekit::facts_of(g).content(g.input(slice, k));
      if (!c.known || c.real || c.size() != 1) return std::nullopt;
      return c.ints[0].constant();
    };
    const auto length = fusekit::facts_of(g).dim_of(get<"x">(m), -1)->constant();
    const fusekit::node_id upper = get<"upper">(m), lower = get<"lower">(m);
    if (length && one(upper, 1) == *length / 2 && one(upper, 2) == *length && one(lower, 1) == 0 &&
        one(lower, 2) == *length / 2 && one(upper, 3) == -1 && one(lower, 3) == -1)
      return verdict::yes();
    return verdict::no("not the two halves of the last axis");
  }
  static void emit(const fusekit::graph& g, const auto& m, fusekit::rewrite::emitter& e) {
    const auto half = [&](fusekit::node_id slice) {
      return e.op("Slice", {e.value(get<"x">(m)), e.value(g.input(slice, 1)),
                            e.value(g.input(slice, 2)), e.value(g.input(slice, 3))});
    };
    e.replace_root(e.op("Concat", {half(get<"upper">(m)), half(get<"lower">(m))},
                        {{"axis", std::int64_t(-1)}}));
  }
};

TEST(Selfcheck, SearchesASlicesBoundsForAHalfOfTheLastAxis) {
  const auto r = fusekit::selfcheck::check<swap_halves>(with_runtime("swap_halves"));
  EXPECT_TRUE(r.ok()) << r.to_table();
  EXPECT_EQ(r.to_table(),
            "swap-halves: ok; 6 of 6 instances fused, 4 of 4 alternatives covered; parity with "
            "ONNX Runtime 6 of 6; 4 mutants: 4 refused and named\n");
}

// x[…, h:] − x[…, :h] from one Split of the last axis into its halves: the pattern binds the
// Split at both outputs, so an instance writes it once and reads both; its axis and sizes are
// left to the guard, which the instances' views must satisfy.
struct split_difference {
  static constexpr std::string_view name = "split-difference";
  static constexpr auto pattern =
      op<"Sub">(op<"Split">(capture<"x">, maybe(any())).output(1).bind<"split">(),
                op<"Split">(capture<"x">, maybe(any())).output(0).bind<"split">());
  static verdict guard(const fusekit::graph& g, const auto& m) {
    const fusekit::facts& f = fusekit::facts_of(g);
    const fusekit::node_id split = get<"split">(m);
    const auto length = f.dim_of(get<"x">(m), -1)->constant();
    const auto rank = f.rank(get<"x">(m));
    const auto axis = g.attribute_int(split, "axis").value_or(0);
    const fusekit::content_fact& sizes =
        g.inputs(split).size() > 1 ? f.content(g.input(split, 1)) : fusekit::content_fact{};
    if (length && rank && (axis == -1 || axis == std::int64_t(*rank) - 1) &&
        g.outputs(split).size() == 2 && sizes.known && !sizes.real && sizes.size() == 2 &&
        sizes.ints[0].is_constant(*length / 2) && sizes.ints[1].is_constant(*length / 2))
      return verdict::yes();
    return verdict::no(g.describe(split) + " does not halve the last axis");
  }
  static void emit(const fusekit::graph& g, const auto& m, fusekit::rewrite::emitter& e) {
    const std::int64_t h = *fusekit::facts_of(g).dim_of(get<"x">(m), -1)->constant() / 2;
    const auto half = [&](std::int64_t from, std::int64_t to) {
      return e.op("Slice",
                  {e.value(get<"x">(m)), e.constant(fusekit::dtype::int64, {1}, {double(from)}),
                   e.constant(fusekit::dtype::int64, {1}, {double(to)}),
                   e.constant(fusekit::dtype::int64, {1}, {-1.0})});
    };
    e.replace_root(e.op("Sub", {half(h, 2 * h), half(0, h)}));
  }
};

TEST(Selfcheck, WritesANodeThePatternBindsTwiceOnceAndSearchesItsAxisAndSizes) {
  const auto r = fusekit::selfcheck::check<split_difference>(with_runtime("split_difference"));
  EXPECT_TRUE(r.ok()) << r.to_table();
  EXPECT_EQ(r.to_table(),
            "split-difference: ok; 6 of 6 instances fused, 4 of 4 alternatives covered; parity "
            "with ONNX Runtime 6 of 6; 1 mutants: 1 refused and named\n");
}

// A Split of one piece passes x on, which only its code tells (one output): the Split's sizes are
// searched as its pieces, halves first, then the whole of an axis, with the one output that
// makes. Emitted as an Identity of x.
bool of_one_piece(const fusekit::graph& g, fusekit::node_id split) {
  return g.outputs(split).size() == 1;
}
struct split_of_one_piece {
  static constexpr std::string_view name = "split-of-one-piece";
  static constexpr auto pattern =
      op<"Split">(capture<"x">, maybe(any())).where("of one piece", of_one_piece);
  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    e.replace_root(e.op("Identity", {e.value(get<"x">(m))}));
  }
};

TEST(Selfcheck, WritesASplitOfOnePieceWhereItsCodeAsksForOne) {
  const auto r = fusekit::selfcheck::check<split_of_one_piece>(with_runtime("split_of_one_piece"));
  EXPECT_TRUE(r.ok()) << r.to_table();
  EXPECT_EQ(r.to_table(),
            "split-of-one-piece: ok; 6 of 6 instances fused, 4 of 4 alternatives covered; parity "
            "with ONNX Runtime 6 of 6; 0 mutants: 0 refused and named\n");
}

// -a + -b as -(a + b), a + b as itself: both Negs or neither, which the pattern (two optional
// Negs, which others may read too) cannot say and the guard does. The instances holding one Neg are
// combinations of alternatives that each fused in another instance: counted, no failure.
struct negated_sum {
  static constexpr std::string_view name = "negated-sum";
  static constexpr auto pattern =
      op<"Add">(optional_op(op<"Neg">(capture<"a">).multi_use().bind<"neg_a">()),
                optional_op(op<"Neg">(capture<"b">).multi_use().bind<"neg_b">()));
  static verdict guard(const fusekit::graph&, const auto& m) {
    if ((get<"neg_a">(m) == fusekit::no_id) == (get<"neg_b">(m) == fusekit::no_id))
      return verdict::yes();
    return verdict::no("one operand negated, not the other");
  }
  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    const std::string sum = e.op("Add", {e.value(get<"a">(m)), e.value(get<"b">(m))});
    e.replace_root(get<"neg_a">(m) == fusekit::no_id ? e.op("Identity", {sum})
                                                     : e.op("Neg", {sum}));
  }
};

TEST(Selfcheck, CountsACombinationTheGuardRefusesAsNoFailure) {
  const auto r = fusekit::selfcheck::check<negated_sum>(with_runtime("negated_sum"));
  EXPECT_TRUE(r.ok()) << r.to_table();
  EXPECT_EQ(r.to_table(),
            "negated-sum: ok; 2 of 6 instances fused, 8 of 8 alternatives covered (4 refused "
            "combining alternatives that fused apart); parity with ONNX Runtime 2 of 2; 0 "
            "mutants: 0 refused and named\n");
}

// -a + -b + -c as -(a + b + c), a + b + c as their Sum: all three Negs or none. A search one
// choice at a time never gets there: from an instance holding one Neg, a second is refused as the
// first was, and no nearer. The rule's example says which combination fuses.
struct negated_sum_of_three_unexampled {
  static constexpr std::string_view name = "negated-sum-of-three";
  static constexpr auto pattern =
      op<"Add">(op<"Add">(optional_op(op<"Neg">(capture<"a">).multi_use().bind<"neg_a">()),
                          optional_op(op<"Neg">(capture<"b">).multi_use().bind<"neg_b">())),
                optional_op(op<"Neg">(capture<"c">).multi_use().bind<"neg_c">()));
  static verdict guard(const fusekit::graph&, const auto& m) {
    const int negated = (get<"neg_a">(m) != fusekit::no_id) + (get<"neg_b">(m) != fusekit::no_id) +
                        (get<"neg_c">(m) != fusekit::no_id);
    if (negated == 0 || negated == 3) return verdict::yes();
    return verdict::no("some terms negated, not all");
  }
  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    const std::string sum =
        e.op("Sum", {e.value(get<"a">(m)), e.value(get<"b">(m)), e.value(get<"c">(m))});
    e.replace_root(get<"neg_a">(m) == fusekit::no_id ? sum : e.op("Neg", {sum}));
  }
};
struct negated_sum_of_three : negated_sum_of_three_unexampled {
  static constexpr auto examples =
      fusekit::pattern::examples(example{.with = {"neg_a", "neg_b", "neg_c"}});
};
// An example the guard refuses: the rule or its word is wrong, and the check says which example.
struct negated_sum_of_three_misexampled : negated_sum_of_three_unexampled {
  static constexpr auto examples =
      fusekit::pattern::examples(example{.with = {"neg_a"}, .without = {"neg_b"}});
};

// An example no choices write: a is in every instance.
struct negated_sum_of_three_unwritable : negated_sum_of_three_unexampled {
  static constexpr auto examples =
      fusekit::pattern::examples(example{.with = {"neg_a"}, .without = {"a"}});
};

TEST(Selfcheck, WritesTheRulesExamplesAndFailsOneItRefuses) {
  // The first round alone: the pattern at its plainest, then the search.
  auto o = with_runtime("negated_sum_of_three");
  o.cover_rounds = 1;
  const auto r = fusekit::selfcheck::check<negated_sum_of_three>(o);
  EXPECT_TRUE(r.ok()) << r.to_table();
  EXPECT_EQ(r.to_table(),
            "negated-sum-of-three: ok; 4 of 8 instances fused, 10 of 10 alternatives covered (4 "
            "refused combining alternatives that fused apart); parity with ONNX Runtime 4 of 4; 1 "
            "mutants: 1 refused and named\n");
  // The plainest instance first, then the example.
  ASSERT_GE(r.instances.size(), 2u);
  EXPECT_EQ(r.instances[1].example, "{with neg_a, neg_b, neg_c}");
  EXPECT_TRUE(r.instances[1].fused);

  o.write_to.clear();
  o.python.clear();
  const auto bare = fusekit::selfcheck::check<negated_sum_of_three_unexampled>(o);
  EXPECT_FALSE(bare.ok());
  ASSERT_EQ(bare.uncovered.size(), 3u);
  EXPECT_EQ(bare.uncovered.front(),
            "Neg?[@neg_a]{multi-use}(a) absent | present: 2 of 2: some terms negated, not all "
            "(and with every leaf shape searched)");

  const auto wrong = fusekit::selfcheck::check<negated_sum_of_three_misexampled>(o);
  EXPECT_FALSE(wrong.ok());
  EXPECT_NE(wrong.to_table().find("\n  example {with neg_a; without neg_b} did not fuse: some "
                                  "terms negated, not all (and with every leaf shape searched)\n"),
            std::string::npos)
      << wrong.to_table();

  const auto unwritable = fusekit::selfcheck::check<negated_sum_of_three_unwritable>(o);
  EXPECT_FALSE(unwritable.ok());
  EXPECT_NE(unwritable.to_table().find(
                "\n  example {with neg_a; without a} did not fuse: its choices write a\n"),
            std::string::npos)
      << unwritable.to_table();
}

// Relu(x) or Sigmoid(x), written again; Sigmoid only where the options ask for it. Their refusal
// is the options' alone (no_with_these_options), or, mistakenly, a plain no.
struct activation_options {
  bool sigmoid = false;
  bool refusal_is_the_options = true;
};
struct relu_or_sigmoid {
  static constexpr std::string_view name = "relu-or-sigmoid";
  using options = activation_options;
  static constexpr auto pattern =
      any_of(op<"Relu">(capture<"x">), op<"Sigmoid">(capture<"x">).bind<"sigmoid">());
  static verdict guard(const fusekit::graph&, const auto& m, const options& o) {
    if (!has<"sigmoid">(m) || o.sigmoid) return verdict::yes();
    const std::string why = "Sigmoid is fused only with options::sigmoid";
    return o.refusal_is_the_options ? verdict::no_with_these_options(why) : verdict::no(why);
  }
  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e,
                   const options&) {
    e.replace_root(e.op(has<"sigmoid">(m) ? "Sigmoid" : "Relu", {e.value(get<"x">(m))}));
  }
};

TEST(Selfcheck, CountsAnAlternativeTheOptionsRefuseAsNoGap) {
  const auto r = fusekit::selfcheck::check<relu_or_sigmoid>(with_runtime("relu_or_sigmoid"), {});
  EXPECT_TRUE(r.ok()) << r.to_table();
  EXPECT_TRUE(r.uncovered.empty());
  EXPECT_EQ(r.refused_by_options,
            std::vector<std::string>{"any_of(Relu(x), Sigmoid[@sigmoid](x)) branch: 2 of 2: "
                                     "Sigmoid is fused only with options::sigmoid"});
  // With the options that take it, it is covered like any other.
  const auto all =
      fusekit::selfcheck::check<relu_or_sigmoid>(with_runtime("relu_or_sigmoid_all"), {true});
  EXPECT_TRUE(all.ok()) << all.to_table();
  EXPECT_TRUE(all.refused_by_options.empty());
  // The same refusal as a plain no is a gap: the guard may have refused for the graph's sake.
  const auto plain = fusekit::selfcheck::check<relu_or_sigmoid>(
      with_runtime("relu_or_sigmoid_plain"), {.refusal_is_the_options = false});
  EXPECT_FALSE(plain.ok());
  EXPECT_EQ(plain.uncovered.size(), 1u);
}

// exp(−x) and exp(y) of graph inputs. A mutant whose Neg is read outside the pattern leaves the
// Neg's branch, and the other holds the graph (the Neg's output as y): that alternative's guard
// refuses it in its own words, which need not name the broken predicate.
struct exp_of_input {
  static constexpr std::string_view name = "exp-of-input";
  static constexpr auto pattern =
      op<"Exp">(any_of(op<"Neg">(capture<"x">).bind<"neg">(), capture<"y">));
  static verdict guard(const fusekit::graph& g, const auto& m) {
    if (get<"neg">(m) != fusekit::no_id || g.producer(get<"y">(m)) == fusekit::no_id)
      return verdict::yes();
    return verdict::no("y is computed by " + g.describe(g.producer(get<"y">(m))) +
                       ", not a graph input");
  }
  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    e.replace_root(
        e.op("Exp", {get<"neg">(m) == fusekit::no_id ? e.value(get<"y">(m))
                                                     : e.op("Neg", {e.value(get<"x">(m))})}));
  }
};

TEST(Selfcheck, LeavesAMutantAnotherAlternativeHoldsToItsGuard) {
  const auto r = fusekit::selfcheck::check<exp_of_input>(with_runtime("exp_of_input"));
  EXPECT_TRUE(r.ok()) << r.to_table();
  ASSERT_EQ(r.mutants.size(), 1u);
  EXPECT_TRUE(r.mutants[0].held_by_another);
  EXPECT_EQ(r.mutants[0].near_miss, "y is computed by Neg 'Neg_0', not a graph input");
  EXPECT_EQ(r.to_table(),
            "exp-of-input: ok; 7 of 7 instances fused, 6 of 6 alternatives covered; parity with "
            "ONNX Runtime 7 of 7; 1 mutants: 0 refused and named, 1 held by another "
            "alternative, whose guard refused it\n");
}

// −x[rows] as the rows of −x: a Gather reads its indices of either integer type, so the check
// cannot tell which to write, nor that each must be in x's axis. The rule writes them itself.
// The axis is open: the instances search it, and the emit must keep it.
struct negated_rows_unsourced {
  static constexpr std::string_view name = "negated-rows";
  static constexpr auto pattern =
      op<"Gather">(op<"Neg">(capture<"x">), capture<"rows">).bind<"gather">();
  static void emit(const fusekit::graph& g, const auto& m, fusekit::rewrite::emitter& e) {
    const std::int64_t axis = g.attribute_int(get<"gather">(m), "axis").value_or(0);
    e.replace_root(e.op("Neg", {e.op("Gather", {e.value(get<"x">(m)), e.value(get<"rows">(m))},
                                     {{"axis", axis}})}));
  }
};
struct written_rows {
  // The parity run feeds an integer input 0s and 1s: in any axis of two or more.
  static auto write(auto& w) { return w.input(dtype::int64, {w.dim("x", 0)}); }
};
struct negated_rows : negated_rows_unsourced {
  static constexpr auto sources = fusekit::pattern::sources(source<"rows">(written<written_rows>));
};
struct written_from_nothing {
  static auto write(auto& w) { return w.input(dtype::int64, {w.dim("y", 0)}); }
};
struct negated_rows_misread : negated_rows_unsourced {
  static constexpr auto sources =
      fusekit::pattern::sources(source<"rows">(written<written_from_nothing>));
};

TEST(Selfcheck, WritesAValueNoSchemaSaysAsTheRuleWritesIt) {
  const auto r = fusekit::selfcheck::check<negated_rows>(with_runtime("negated_rows"));
  EXPECT_TRUE(r.ok()) << r.to_table();
  EXPECT_EQ(r.to_table(),
            "negated-rows: ok; 6 of 6 instances fused, 4 of 4 alternatives covered; parity with "
            "ONNX Runtime 6 of 6; 1 mutants: 1 refused and named\n");
  // Written as a float (the check's own type where an input admits several): no model, which
  // the check tells before ONNX Runtime refuses to load it.
  const auto bare =
      fusekit::selfcheck::check<negated_rows_unsourced>(with_runtime("negated_rows_unsourced"));
  EXPECT_FALSE(bare.ok());
  EXPECT_TRUE(bare.instances.empty());
  ASSERT_FALSE(bare.uncovered.empty());
  EXPECT_EQ(bare.uncovered[0],
            "float type float32|float16: 1 of 2: Gather 'Gather_1' reads float32 at input 1, "
            "which ai.onnx opset 18 does not admit there: no model, not judged");
  // A dim of a capture the pattern holds nowhere: an error naming it, no graph.
  try {
    fusekit::selfcheck::check<negated_rows_misread>({});
    ADD_FAILURE() << "a written source read a capture never written";
  } catch (const fusekit::error& e) {
    EXPECT_STREQ(e.what(),
                 "selfcheck: a written source reads dim 0 of 'y', which is not written before it");
  }
}

// a · bᵀ with bᵀ given as it is read: a's dims with the last two exchanged, which no leaf shape
// the search tries is. The rule writes bᵀ from a's dims, or, where bᵀ is written first (under a
// Neg, an op, written before the leaf a), from the shape the search gives it as a leaf,
// exchanged so.
struct times_transposed_unsourced {
  static constexpr std::string_view name = "times-transposed";
  static constexpr auto pattern =
      op<"MatMul">(capture<"a">, any_of(capture<"bt">, op<"Neg">(capture<"bt">).bind<"neg">()));
  static verdict guard(const fusekit::graph& g, const auto& m) {
    const fusekit::facts& f = fusekit::facts_of(g);
    const fusekit::value_id a = get<"a">(m), bt = get<"bt">(m);
    const auto rank = f.rank(a);
    bool exchanged = rank && *rank >= 2 && f.rank(bt) == rank &&
                     f.same_dim(a, -1, bt, -2) == fusekit::truth::yes &&
                     f.same_dim(a, -2, bt, -1) == fusekit::truth::yes;
    for (int i = 0; exchanged && i + 2 < int(*rank); ++i)
      exchanged = f.same_dim(a, i, bt, i) == fusekit::truth::yes;
    if (exchanged) return verdict::yes();
    return verdict::no("bᵀ " + f.shape_text(bt) + " is not a " + f.shape_text(a) +
                       " with its last two dims exchanged");
  }
  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    const std::string bt = e.value(get<"bt">(m));
    e.replace_root(e.op("MatMul", {e.value(get<"a">(m)), has<"neg">(m) ? e.op("Neg", {bt}) : bt}));
  }
};
struct written_transposed {
  static auto write(auto& w) {
    const auto of_a = w.written("a") ? w.dims("a") : std::nullopt;
    std::vector<std::int64_t> dims = of_a ? *of_a : w.leaf_shape();
    if (dims.size() >= 2) std::swap(dims[dims.size() - 2], dims[dims.size() - 1]);
    return w.input(w.type(), dims);
  }
};
struct times_transposed : times_transposed_unsourced {
  static constexpr auto sources =
      fusekit::pattern::sources(source<"bt">(written<written_transposed>));
};

TEST(Selfcheck, WritesAValueFromTheDimsOfAnotherOrAsALeaf) {
  const auto r = fusekit::selfcheck::check<times_transposed>(with_runtime("times_transposed"));
  EXPECT_TRUE(r.ok()) << r.to_table();
  // Both branches fused: bᵀ written from a's dims, and under the Neg from its own leaf shape.
  EXPECT_EQ(r.to_table(),
            "times-transposed: ok; 7 of 7 instances fused, 6 of 6 alternatives covered; parity "
            "with ONNX Runtime 7 of 7; 1 mutants: 0 refused and named, 1 fused by another "
            "alternative\n");
  // As a leaf, bᵀ takes a's shape, its last dim, a scalar or a's dims before the last
  // exchanged: never a's last two exchanged, and the guard refuses every instance.
  const auto bare = fusekit::selfcheck::check<times_transposed_unsourced>({});
  EXPECT_FALSE(bare.ok());
  EXPECT_EQ(bare.uncovered.size(), 6u) << bare.to_table();
}

// A number the facts fold: the check writes such a capture as a constant.
inline constexpr auto folded = [](const fusekit::facts& f, fusekit::value_id v) {
  return f.real_scalar(v) ? fusekit::truth::yes : fusekit::truth::unknown;
};
// (x / d) · m is x where m is d: a relation between two constants no pattern says, and the guard
// proves. The rule writes m as the number d holds.
struct divided_back_unsourced {
  static constexpr std::string_view name = "divided-back";
  static constexpr auto pattern = op<"Mul">(
      op<"Div">(capture<"x">, capture<"d">.proven_value("a scalar of known value", folded)),
      capture<"m">);
  static verdict guard(const fusekit::graph& g, const auto& m) {
    const fusekit::facts& f = fusekit::facts_of(g);
    const auto times = f.real_scalar(get<"m">(m)), by = f.real_scalar(get<"d">(m));
    if (!times || times != by) return verdict::no("the factor is not proven the divisor");
    return verdict::yes();
  }
  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    e.replace_root(e.op("Identity", {e.value(get<"x">(m))}));
  }
};
struct written_divisor {
  static auto write(auto& w) {
    return w.initializer(w.type(), {}, {w.written("d") ? w.scalar("d") : 0.0});
  }
};
struct divided_back : divided_back_unsourced {
  static constexpr auto sources = fusekit::pattern::sources(source<"m">(written<written_divisor>));
};
struct written_from_an_input {
  static auto write(auto& w) { return w.initializer(w.type(), {}, {w.scalar("x")}); }
};
struct divided_back_misread : divided_back_unsourced {
  static constexpr auto sources =
      fusekit::pattern::sources(source<"m">(written<written_from_an_input>));
};

TEST(Selfcheck, WritesANumberAsTheConstantItFollowsHoldsIt) {
  const auto r = fusekit::selfcheck::check<divided_back>(with_runtime("divided_back"));
  EXPECT_TRUE(r.ok()) << r.to_table();
  // Without its source, m is a graph input: nothing the guard can prove.
  const auto bare = fusekit::selfcheck::check<divided_back_unsourced>({});
  EXPECT_FALSE(bare.ok());
  EXPECT_EQ(bare.instances.at(0).reason,
            "the factor is not proven the divisor (and with every leaf shape searched)");
  // The number of a capture that is a graph input: an error naming it, no graph.
  try {
    fusekit::selfcheck::check<divided_back_misread>({});
    ADD_FAILURE() << "a written source read a number from a graph input";
  } catch (const fusekit::error& e) {
    EXPECT_STREQ(e.what(),
                 "selfcheck: a written source reads the number 'x' holds, which is no constant "
                 "scalar");
  }
}

// divided-back's guard refusal said as a graph: m a number other than the divisor.
struct written_past_the_divisor {
  static auto write(auto& w) { return w.initializer(w.type(), {}, {w.scalar("d") + 1.0}); }
};
template <fixed_string Text, class Writes>
struct divided_back_refusing : divided_back {
  static constexpr auto refusals =
      fusekit::pattern::refusals(refusal<Text>(source<"m">(written<Writes>)));
};

TEST(Selfcheck, WritesEachRefusalTheRuleDeclares) {
  // m one past the divisor, written into the first instance that fused: refused in those words.
  const auto r = fusekit::selfcheck::check<
      divided_back_refusing<"the factor is not proven the divisor", written_past_the_divisor>>({});
  EXPECT_TRUE(r.ok()) << r.to_table();
  EXPECT_EQ(r.to_table(),
            "divided-back: ok; 6 of 6 instances fused, 4 of 4 alternatives covered; parity with "
            "ONNX Runtime not checked (no Python with onnxruntime given); 2 mutants (1 of them the "
            "rule's refusals): 2 refused and named\n");
  // A refusal whose graph the guard accepts (m the divisor itself): the rule's word is wrong.
  const auto accepted = fusekit::selfcheck::check<
      divided_back_refusing<"the factor is not proven the divisor", written_divisor>>({});
  EXPECT_FALSE(accepted.ok());
  EXPECT_EQ(accepted.to_table(),
            "divided-back: FAILED; 6 of 6 instances fused, 4 of 4 alternatives covered; parity "
            "with ONNX Runtime not checked (no Python with onnxruntime given); 2 mutants (1 of "
            "them the rule's refusals): 1 refused and named\n"
            "  mutant (refusal \"the factor is not proven the divisor\") fused: the rule declares "
            "that its guard refuses it\n");
  // Refused, but in other words than the rule says.
  const auto misworded = fusekit::selfcheck::check<
      divided_back_refusing<"the factor is zero", written_past_the_divisor>>({});
  EXPECT_FALSE(misworded.ok());
  EXPECT_EQ(misworded.mutants.back().near_miss, "the factor is not proven the divisor");
}

// x / c as x · (1 / c), c a constant tensor: a fold computed from the constant's values. Written
// of ones, as a constant<> is by default, a fold that forgot to invert c computes the same.
template <bool Inverts>
struct division_as_product_unsourced {
  static constexpr std::string_view name = "division-as-product";
  static constexpr auto pattern = op<"Div">(capture<"x">, constant<"c">);
  static void emit(const fusekit::graph& g, const auto& m, fusekit::rewrite::emitter& e) {
    const fusekit::array c(g, get<"c">(m));
    e.replace_root(e.op("Mul", {e.value(get<"x">(m)), e.constant(Inverts ? 1.0 / c : c)}));
  }
};
struct written_divisor_of_four {
  static auto write(auto& w) { return w.initializer(w.type(), {}, {4.0}); }
};
template <bool Inverts>
struct division_as_product : division_as_product_unsourced<Inverts> {
  static constexpr auto sources =
      fusekit::pattern::sources(source<"c">(written<written_divisor_of_four>));
};

TEST(Selfcheck, WritesAConstantTensorAsItsSourceSays) {
  // Of ones, the fold that forgot to invert c passes unseen.
  EXPECT_TRUE(fusekit::selfcheck::check<division_as_product_unsourced<false>>(
                  with_runtime("division_of_ones"))
                  .ok());
  // A divisor of 4, as the rule's source writes it: that fold computes x · 4 for x / 4.
  const auto wrong =
      fusekit::selfcheck::check<division_as_product<false>>(with_runtime("division_wrong"));
  EXPECT_FALSE(wrong.ok());
  for (const auto& i : wrong.instances)
    EXPECT_TRUE(!i.fused || i.parity.starts_with("differs")) << i.choices << ": " << i.parity;
  const auto right =
      fusekit::selfcheck::check<division_as_product<true>>(with_runtime("division_right"));
  EXPECT_TRUE(right.ok()) << right.to_table();
}

// x + y, each as given or with its two leading dims merged into one: a merged one beside one as
// given cannot run (its first dim does not broadcast), so each merge fuses only beside the other.
// Emitted as Sum, which broadcasts as Add does.
bool merges_two_leading_dims(const fusekit::graph& g, fusekit::node_id reshape) {
  const fusekit::facts& f = fusekit::facts_of(g);
  const fusekit::value_id in = g.input(reshape, 0), out = g.output(reshape, 0);
  return f.rank(in) == 4u && f.rank(out) == 3u &&
         equal(*f.dim_of(out, 0), *f.dim_of(in, 0) * *f.dim_of(in, 1)) == fusekit::truth::yes;
}
inline constexpr auto maybe_merged = any_of(
    op<"Reshape">(any(), any()).where("two leading dims merged", merges_two_leading_dims), any());
struct merged_sum {
  static constexpr std::string_view name = "merged-sum";
  static constexpr auto pattern = op<"Add">(capture<"x">(maybe_merged), capture<"y">(maybe_merged));
  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    e.replace_root(e.op("Sum", {e.value(get<"x">(m)), e.value(get<"y">(m))}));
  }
};

TEST(Selfcheck, ReachesAlternativesThatFuseOnlyTogether) {
  auto o = with_runtime("merged_sum");
  o.shape = {2, 3, 4, 8};
  // The first round alone: the pattern at its plainest, then one merge at a time, from which
  // the other one's change leads to a model.
  o.cover_rounds = 1;
  const auto r = fusekit::selfcheck::check<merged_sum>(o);
  EXPECT_TRUE(r.ok()) << r.to_table();
  EXPECT_TRUE(r.uncovered.empty());
}

// GELU of either domain as ONNX Runtime's: ai.onnx's came in opset 20, so the graphs of 17 that
// hold it are no model: not judged, and no instances.
struct either_gelu {
  static constexpr std::string_view name = "either-gelu";
  static constexpr auto pattern = any_of(op<"Gelu", "com.microsoft">(capture<"x">),
                                         op<"Gelu">(capture<"x">).attr<"approximate">("none"));
  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    e.replace_root(e.op("Gelu", {e.value(get<"x">(m))}, {}, "com.microsoft"));
  }
};

TEST(Selfcheck, JudgesNoInstanceHoldingAnOpItsOpsetLacks) {
  fusekit::selfcheck::options o = with_runtime("either_gelu");
  o.opsets = {17, 20};
  const auto r = fusekit::selfcheck::check<either_gelu>(o);
  EXPECT_TRUE(r.ok()) << r.to_table();
  EXPECT_EQ(r.to_table(),
            "either-gelu: ok; 8 of 8 instances fused, 6 of 6 alternatives covered (2 graphs "
            "written no model, not judged); parity with ONNX Runtime 8 of 8; 1 mutants: 1 refused "
            "and named\n");
  EXPECT_EQ(r.no_models, 2u);
}

// LogSoftmax of Softmax's input as one op: its instances of bfloat16 at opset 11, where Softmax
// admits float16, float and double only, are no models: the one alternative that makes none.
struct log_of_softmax {
  static constexpr std::string_view name = "log-of-softmax";
  static constexpr auto pattern = op<"Log">(op<"Softmax">(capture<"x">).bind_attr<"axis", "a">());
  static void emit(const fusekit::graph&, const auto& m, fusekit::rewrite::emitter& e) {
    e.replace_root(e.op("LogSoftmax", {e.value(get<"x">(m))}, {{"axis", get<"a">(m)->i()}}));
  }
};

TEST(Selfcheck, JudgesNoInstanceOfATypeItsOpDoesNotAdmit) {
  fusekit::selfcheck::options o = with_runtime("log_of_softmax");
  o.types = {dtype::float32, dtype::bfloat16};
  o.opsets = {11};
  const auto r = fusekit::selfcheck::check<log_of_softmax>(o);
  // Every float32 instance fused and computes what it replaced; bfloat16 makes no model at 11,
  // which the table says of it, where ONNX Runtime's refusal to load read as the rule's failure.
  for (const auto& i : r.instances) EXPECT_EQ(i.parity, "ok") << i.choices;
  EXPECT_GT(r.no_models, 0u);
  ASSERT_EQ(r.uncovered.size(), 1u) << r.to_table();
  EXPECT_EQ(r.uncovered[0],
            "float type float32|bfloat16: 2 of 2: Softmax 'Softmax_0' reads bfloat16 at input 0, "
            "which ai.onnx opset 11 does not admit there: no model, not judged");
}

TEST(Selfcheck, TellsTheFirstFailuresAndCountsTheRest) {
  // A pattern of thousands of alternatives that fails at one view fails at most of them: the
  // table names the first, then how many more there are.
  fusekit::selfcheck::result r;
  r.rule = "views";
  r.alternatives = 3;
  r.uncovered = {"a: why", "b: why", "c: why"};
  EXPECT_EQ(r.to_table(2),
            "views: FAILED; 0 of 0 instances fused, 0 of 3 alternatives covered; parity with ONNX "
            "Runtime not checked (no Python with onnxruntime given); 0 mutants: 0 refused and "
            "named\n"
            "  not covered: a: why\n"
            "  not covered: b: why\n"
            "  1 more failure not shown\n");
}

TEST(Selfcheck, EveryRuleOfTheLibraryHasItsCheck) {
  // `fusekit selfcheck` runs the checks it knows: a library rule missing there would pass over it
  // without a word. The sweeps have no pattern to write instances of (sweeps_test specifies them).
  std::vector<std::string_view> rules;
  for (std::string_view name : fusekit::rules::names())
    if (name != fusekit::rules::duplicate_elimination &&
        name != fusekit::rules::dead_node_elimination)
      rules.push_back(name);
  EXPECT_EQ(fusekit::rules::checked_rules(), rules);
}

TEST(Selfcheck, ASweepIsRefusedByName) {
  const std::string only[] = {"dead-node-elimination"};
  EXPECT_EQ(fusekit::testing::error_of([&] {
              return fusekit::rules::check_bundled({}, only, fusekit::rules::every_target,
                                                   fusekit::rules::provider::cpu);
            }),
            "dead-node-elimination has no pattern to check: it is a sweep, whose specifications "
            "are its tests (rules/README.md)");
}

}  // namespace
