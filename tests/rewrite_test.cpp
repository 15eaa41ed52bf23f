// The rewrite engine: rules applied whole or not at all, overlaps resolved deterministically, dead
// nodes only removed, names and outputs kept, subgraphs rewritten, and a second run a no-op.
#include "fusekit/rewrite/driver.hpp"
#include "test_support.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "fusekit/graph/model_builder.hpp"
#include "fusekit/pattern/pattern.hpp"

namespace {

using fusekit::testing::bytes;
using fusekit::testing::op_types;

using namespace fusekit::pattern;
using fusekit::dtype;
using fusekit::graph;
using fusekit::model;
using fusekit::build::model_builder;
using fusekit::build::value;
using fusekit::rewrite::any_rule;
using fusekit::rewrite::emitter;
using fusekit::rewrite::fuse;
using fusekit::rewrite::verdict;

// Neg(Neg(x)) → x: the replacement is an existing value.
struct double_negation {
  static constexpr std::string_view name = "double-negation";
  static constexpr auto pattern = op<"Neg">(op<"Neg">(capture<"x">));
  static void emit(const graph&, const auto& m, emitter& e) {
    e.replace_root(e.value(get<"x">(m)));
  }
};

// x · sigmoid(x) → com.microsoft QuickGelu(alpha = 1), ONNX Runtime's fused SiLU.
struct silu {
  static constexpr std::string_view name = "silu";
  static constexpr auto pattern = commutative(op<"Mul">(capture<"x">, op<"Sigmoid">(capture<"x">)));
  static verdict guard(const graph& g, const auto& m) {
    if (!fusekit::is_float(g.type(get<"x">(m))))
      return verdict::no("x is " + std::string(dtype_name(g.type(get<"x">(m)))) +
                         ", QuickGelu needs a float type");
    return verdict::yes();
  }
  static void emit(const graph&, const auto& m, emitter& e) {
    const auto out = e.op("QuickGelu", {e.value(get<"x">(m))}, {{"alpha", 1.0}}, "com.microsoft");
    e.replace_root(out);
    e.note("activation", "silu");
  }
};

// silu with options of its own: whether float16 may fuse (a runtime without the kernel says no).
struct silu_options {
  bool float16 = true;
};
struct configurable_silu : silu {
  static constexpr std::string_view name = "configurable-silu";
  using options = silu_options;
  static verdict guard(const graph& g, const auto& m, const options& o) {
    if (g.type(get<"x">(m)) == dtype::float16 && !o.float16)
      return verdict::no("float16 is off in this rule's options");
    return silu::guard(g, m);
  }
};

// A rule bound to a temporary's options would read them after they are gone.
template <class O>
constexpr bool binds = requires(O&& o) {
  any_rule::of<configurable_silu>(std::forward<O>(o));
};
static_assert(binds<const silu_options&>);
static_assert(!binds<silu_options>);

// Emits a node, then fails: the model must come out untouched.
struct fails_half_way {
  static constexpr std::string_view name = "fails-half-way";
  static constexpr auto pattern = op<"Relu">(capture<"x">);
  static void emit(const graph&, const auto& m, emitter& e) {
    e.op("Abs", {e.value(get<"x">(m))});
    throw std::runtime_error("out of ideas");
  }
};

// Relu → Abs, at higher priority than a rule wanting the same Relu.
struct relu_to_abs {
  static constexpr std::string_view name = "relu-to-abs";
  static constexpr int priority = 1;
  static constexpr auto pattern = op<"Relu">(capture<"x">);
  static void emit(const graph&, const auto& m, emitter& e) {
    e.replace_root(e.op("Abs", {e.value(get<"x">(m))}));
  }
};
struct relu_to_neg {
  static constexpr std::string_view name = "relu-to-neg";
  static constexpr auto pattern = op<"Relu">(capture<"x">);
  static void emit(const graph&, const auto& m, emitter& e) {
    e.replace_root(e.op("Neg", {e.value(get<"x">(m))}));
  }
};

// Neg(Relu(x)) → Abs(x), where the Relu may have other readers.
struct neg_of_relu {
  static constexpr std::string_view name = "neg-of-relu";
  static constexpr auto pattern = op<"Neg">(op<"Relu">(capture<"x">).multi_use());
  static void emit(const graph&, const auto& m, emitter& e) {
    e.replace_root(e.op("Abs", {e.value(get<"x">(m))}));
  }
};

// x · 1 → x.
struct drop_scale {
  static constexpr std::string_view name = "drop-scale";
  static constexpr auto pattern = op<"Mul">(capture<"x">, constant_scalar<"s">.value(1.0));
  static void emit(const graph&, const auto& m, emitter& e) {
    e.replace_root(e.value(get<"x">(m)));
  }
};

// Relu(x) → Neg(Abs(x)): one fresh intermediate value, to see which names the emitter picks.
struct negated_abs {
  static constexpr std::string_view name = "t";
  static constexpr auto pattern = op<"Relu">(capture<"x">);
  static void emit(const graph&, const auto& m, emitter& e) {
    e.replace_root(e.op("Neg", {e.op("Abs", {e.value(get<"x">(m))})}));
  }
};

// Abs(x) → a new Abs(x): matches its own output forever.
struct abs_again {
  static constexpr std::string_view name = "abs-again";
  static constexpr auto pattern = op<"Abs">(capture<"x">);
  static void emit(const graph&, const auto& m, emitter& e) {
    e.replace_root(e.op("Abs", {e.value(get<"x">(m))}));
  }
};

// Refuses an Add fed by QuickGelu by throwing, as a guard reading a broken external file would:
// it throws only once silu has fused, in the second pass.
struct throws_after_silu {
  static constexpr std::string_view name = "throws-after-silu";
  static constexpr auto pattern = op<"Add">(capture<"a">, capture<"b">);
  static verdict guard(const graph& g, const auto& m) {
    const fusekit::node_id p = g.producer(get<"a">(m));
    if (p != fusekit::no_id && g.op_type(p) == "QuickGelu") throw fusekit::error("cannot read");
    return verdict::no("not fed by QuickGelu");
  }
  static void emit(const graph&, const auto&, emitter&) {}
};

// A decoder's key cache: present = Concat(past, new) is a graph output and what Kᵀ transposes.
// The rule computes present anew next to the scores (one Einsum), replacing the graph output, as a
// fused attention node with present key/value outputs does.
struct cached_scores {
  static constexpr std::string_view name = "cached-scores";
  static constexpr auto pattern = op<"MatMul">(
      capture<"q">,
      op<"Transpose">(
          op<"Concat">(capture<"past">, capture<"new">).attr<"axis">(2).multi_use().bind<"cache">())
          .attr<"perm">(ints(0, 1, 3, 2)));
  static void emit(const graph& g, const auto& m, emitter& e) {
    const std::string present = e.op("Concat", {e.value(get<"past">(m)), e.value(get<"new">(m))},
                                     {{"axis", std::int64_t(2)}});
    e.replace(g.output(get<"cache">(m), 0), present);
    e.replace_root(
        e.op("Einsum", {e.value(get<"q">(m)), present}, {{"equation", "bnsh,bnth->bnst"}}));
  }
};

// Reads a value computed after the Relu it replaces.
struct reads_later {
  static constexpr std::string_view name = "reads-later";
  static constexpr auto pattern = op<"Relu">(capture<"x">);
  static void emit(const graph& g, const auto& m, emitter& e) {
    e.replace_root(e.op("Add", {e.value(get<"x">(m)), e.value(*g.find_value("late"))}));
  }
};

// Relu as max(x, 0) broadcast to [4], writing an op opset 7 does not have: Expand came in opset 8.
struct broadcast_relu {
  static constexpr std::string_view name = "broadcast-relu";
  static constexpr auto pattern = op<"Relu">(capture<"x">);
  static void emit(const graph&, const auto& m, emitter& e) {
    const std::string x =
        e.op("Expand", {e.value(get<"x">(m)), e.constant(dtype::int64, {1}, {4})});
    e.replace_root(e.op("Max", {x, e.constant(dtype::float32, {}, {0})}));
  }
};

model silu_model(dtype type = dtype::float32) {
  model_builder b;
  auto x = b.input("x", type, {2, 4});
  auto act = b.op("Mul", {b.op("Sigmoid", {x}), x});
  auto y = b.op("Add", {act, x});
  b.output(act, type, {2, 4});  // read by Add and a graph output: the name must survive
  b.output(y, type, {2, 4});
  return b.build_model();
}

TEST(Fuse, ReplacesTheMatchKeepingOutputNamesAndReaders) {
  model m = silu_model();
  const auto report = fuse<silu>(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(op_types(m), (std::vector<std::string>{"QuickGelu", "Add"}));
  EXPECT_EQ(m.proto.graph().node(0).output(0), "Mul_1");
  EXPECT_EQ(m.proto.graph().node(1).input(0), "Mul_1");
  EXPECT_EQ(m.proto.graph().output(0).name(), "Mul_1");
  EXPECT_EQ(m.proto.opset_import(1).domain(), "com.microsoft");
  EXPECT_EQ(report.fusions[0].removed, (std::map<std::string, int>{{"Mul", 1}, {"Sigmoid", 1}}));
  EXPECT_EQ(report.fusions[0].added, (std::map<std::string, int>{{"QuickGelu", 1}}));
  EXPECT_EQ(report.fusions[0].params["activation"], "silu");
  fusekit::rewrite::check_invariants(m);
}

TEST(Fuse, ASecondRunChangesNothing) {
  model m = silu_model();
  fuse<silu, double_negation>(m);
  const std::string once = bytes(m);
  const auto again = fuse<silu, double_negation>(m);
  EXPECT_TRUE(again.fusions.empty());
  EXPECT_EQ(again.passes, 0);
  EXPECT_EQ(bytes(m), once);
}

TEST(Fuse, AnEmitThatFailsLeavesTheModelByteForByte) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  b.output(b.op("Relu", {x}), dtype::float32, {4});
  model m = b.build_model();
  const std::string before = bytes(m);
  const auto report = fuse<fails_half_way>(m);
  EXPECT_EQ(bytes(m), before);
  ASSERT_EQ(report.near_misses.size(), 1u);
  EXPECT_EQ(report.near_misses[0].reason, "emit failed, nothing changed: out of ideas");
}

TEST(Fuse, GuardRefusalsAreNearMissesWithTheirReason) {
  model_builder b;
  auto x = b.input("x", dtype::int32, {4});
  b.output(b.op("Mul", {x, b.op("Sigmoid", {x})}), dtype::int32);
  model m = b.build_model();
  const std::string before = bytes(m);
  const auto report = fuse<silu>(m);
  EXPECT_EQ(bytes(m), before);
  ASSERT_EQ(report.near_misses.size(), 1u);
  EXPECT_EQ(report.near_misses[0].anchor, "Mul 'Mul_1'");
  EXPECT_EQ(report.near_misses[0].reason, "x is int32, QuickGelu needs a float type");
}

TEST(RuleOptions, EachRuleReadsTheOptionsItWasBoundTo) {
  model m = silu_model(dtype::float16);
  const std::string before = bytes(m);
  const silu_options no_float16{.float16 = false};
  const any_rule refusing[] = {any_rule::of<configurable_silu>(no_float16)};
  const auto report = fuse(m, refusing);
  EXPECT_EQ(bytes(m), before);
  ASSERT_EQ(report.near_misses.size(), 1u);
  EXPECT_EQ(report.near_misses[0].reason, "float16 is off in this rule's options");
  // The same rule with its options' defaults, as fuse<…> binds it.
  EXPECT_EQ(fuse<configurable_silu>(m).fusions.size(), 1u);
}

TEST(RuleOptions, AProbeJudgesOneNodeWithTheOptionsItWasBoundTo) {
  const model m = silu_model(dtype::float16);
  const graph g(m.proto);
  const fusekit::node_id mul = g.producer(*g.find_value("Mul_1"));
  const silu_options no_float16{.float16 = false};
  const silu_options any_float{};
  // The pattern matches and the guard, with these options, refuses: why, as a near miss says it.
  const auto refused = any_rule::of<configurable_silu>(no_float16).probe(g, mul);
  EXPECT_TRUE(refused.matched);
  EXPECT_FALSE(refused.guard);
  EXPECT_EQ(refused.guard.reason, "float16 is off in this rule's options");
  // The same node with other options: accepted.
  const auto accepted = any_rule::of<configurable_silu>(any_float).probe(g, mul);
  EXPECT_TRUE(accepted.matched);
  EXPECT_TRUE(accepted.guard);
  // At the Sigmoid the pattern fails: no verdict, and how far it got is explained.
  fusekit::pattern::explanation why;
  const fusekit::node_id sigmoid = g.producer(*g.find_value(std::string(g.node(mul).input(0))));
  EXPECT_FALSE(any_rule::of<configurable_silu>(any_float).probe(g, sigmoid, &why).matched);
  EXPECT_EQ(why.message, "expected Mul, found Sigmoid 'Sigmoid_0'");
}

TEST(RuleOptions, TheRunsOptionsPickRulesByName) {
  model m = silu_model();
  const any_rule rules[] = {any_rule::of<double_negation>(), any_rule::of<silu>()};
  const auto report = fuse(m, rules, {.rules = {"double-negation"}});
  EXPECT_EQ(report.rules, std::vector<std::string>{"double-negation"});
  EXPECT_TRUE(report.fusions.empty());  // silu would have matched
  EXPECT_EQ(fuse(m, rules).fusions.size(), 1u);
}

TEST(Fuse, ReplacementByAnExistingValueGoesThroughIdentityWhenNamed) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto twice = b.op("Neg", {b.op("Neg", {x})});
  b.output(twice, dtype::float32, {4});
  model m = b.build_model();
  fuse<double_negation>(m);
  // The graph output keeps its name, now an Identity of x.
  ASSERT_EQ(op_types(m), std::vector<std::string>{"Identity"});
  EXPECT_EQ(m.proto.graph().node(0).input(0), "x");
  EXPECT_EQ(m.proto.graph().node(0).output(0), twice.name);
  fusekit::rewrite::check_invariants(m);
}

TEST(Fuse, ReplacementByAnExistingValueForwardsItsReaders) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  b.output(b.op("Relu", {b.op("Neg", {b.op("Neg", {x})})}), dtype::float32, {4});
  model m = b.build_model();
  fuse<double_negation>(m);
  // An elimination leaves nothing where it was: Relu reads x.
  ASSERT_EQ(op_types(m), std::vector<std::string>{"Relu"});
  EXPECT_EQ(m.proto.graph().node(0).input(0), "x");
  fusekit::rewrite::check_invariants(m);
}

TEST(Fuse, ForwardsOfOnePassAreFollowedToTheirEnd) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto n = x;
  for (int i = 0; i < 4; ++i) n = b.op("Neg", {n});
  b.output(b.op("Relu", {n}), dtype::float32, {4});
  model m = b.build_model();
  const auto report = fuse<double_negation>(m);
  // Both pairs go in one pass; the second's readers are forwarded to the first's root, which is
  // forwarded to x.
  EXPECT_EQ(report.fusions.size(), 2u);
  EXPECT_EQ(report.passes, 1);
  ASSERT_EQ(op_types(m), std::vector<std::string>{"Relu"});
  EXPECT_EQ(m.proto.graph().node(0).input(0), "x");
}

TEST(Fuse, AValueASubgraphReadsByNameKeepsItThroughIdentity) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto twice = b.op("Neg", {b.op("Neg", {x})});
  auto body = b.subgraph("then");
  body.output(body.op("Relu", {twice}), dtype::float32, {4});
  b.output(b.op("If", {b.input("cond", dtype::boolean, {})},
                {{"then_branch", body.proto()}, {"else_branch", body.proto()}}),
           dtype::float32, {4});
  model m = b.build_model();
  fuse<double_negation>(m);
  // The body reads the pair's output by its name, which only an Identity can keep.
  EXPECT_EQ(op_types(m), (std::vector<std::string>{"Identity", "If"}));
  fusekit::rewrite::check_invariants(m);
}

TEST(Fuse, OverlapsResolveByGraphOrderThenAnotherPass) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto n1 = b.op("Neg", {x});
  auto n2 = b.op("Neg", {n1});
  auto n3 = b.op("Neg", {n2});
  auto n4 = b.op("Neg", {n3});
  b.output(n4, dtype::float32, {4});
  model m = b.build_model();
  const auto report = fuse<double_negation>(m);
  // (n1, n2) and (n3, n4) first; the overlapping (n2, n3) loses to (n1, n2) by graph order.
  EXPECT_EQ(report.fusions.size(), 2u);
  EXPECT_EQ(report.fusions[0].root, "Neg 'Neg_1'");
  EXPECT_EQ(report.fusions[1].root, "Neg 'Neg_3'");
  fusekit::rewrite::check_invariants(m);
}

TEST(Fuse, HigherPriorityWinsAContestedNode) {
  model_builder b;
  b.output(b.op("Relu", {b.input("x", dtype::float32, {4})}), dtype::float32, {4});
  model m = b.build_model();
  const auto report = fuse<relu_to_neg, relu_to_abs>(m);
  EXPECT_EQ(op_types(m), std::vector<std::string>{"Abs"});
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].rule, "relu-to-abs");
}

TEST(Fuse, MultiUseInteriorNodesStayWhileSomethingReadsThem) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto relu = b.op("Relu", {x});
  b.output(b.op("Neg", {relu}), dtype::float32, {4});
  b.output(b.op("Sqrt", {relu}), dtype::float32, {4});
  model m = b.build_model();
  fuse<neg_of_relu>(m);
  EXPECT_EQ(op_types(m), (std::vector<std::string>{"Relu", "Abs", "Sqrt"}));
  fusekit::rewrite::check_invariants(m);
}

// Neg(Slice(x)) → Slice(Neg(x)): a rule whose interior view, the Slice, a Shape outside the match
// reads.
struct negated_front {
  static constexpr std::string_view name = "negated-front";
  static constexpr auto pattern =
      op<"Neg">(op<"Slice">(capture<"x">, capture<"from">, capture<"to">, capture<"axes">));
  static void emit(const graph&, const auto& m, emitter& e) {
    e.replace_root(e.op("Slice", {e.op("Neg", {e.value(get<"x">(m))}), e.value(get<"from">(m)),
                                  e.value(get<"to">(m)), e.value(get<"axes">(m))}));
  }
};

TEST(Fuse, AShapeOfAnInteriorViewReadsItsNumbersAndTheDimsOfAnInput) {
  // The Slice's dims are [B, 4]: B is x's dim 0, 4 a number. The Shape reads x's dim 0 and the 4
  // joined, and the matched Slice goes with the match.
  model_builder b;
  auto x = b.input("x", dtype::float32, {"B", 8});
  auto ints = [&](double v) { return b.initializer(dtype::int64, {1}, {v}); };
  auto front = b.op("Slice", {x, ints(0), ints(4), ints(1)}, {}, {.name = "front"});
  b.output(b.op("Neg", {front}), dtype::float32, {"B", 4});
  b.output(b.op("Shape", {front}, {}, {.name = "front_dims"}), dtype::int64, {2});
  model m = b.build_model();
  const auto report = fuse<negated_front>(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].removed.at("Shape"), 1);
  EXPECT_EQ(op_types(m), (std::vector<std::string>{"Neg", "Slice", "Shape", "Constant", "Gather",
                                                   "Constant", "Concat"}));
  EXPECT_EQ(m.proto.graph().node(2).input(0), "x");
  fusekit::rewrite::check_invariants(m);
}

TEST(Fuse, AShapeOfAnInteriorViewWhoseDimsNothingProvesPinsTheMatch) {
  // The Slice ends where a model input says: its dim 1 is born there, and only the Slice holds it.
  model_builder b;
  auto x = b.input("x", dtype::float32, {"B", 8});
  auto ints = [&](double v) { return b.initializer(dtype::int64, {1}, {v}); };
  auto front = b.op("Slice", {x, ints(0), b.input("end", dtype::int64, {1}), ints(1)}, {},
                    {.name = "front"});
  b.output(b.op("Neg", {front}, {}, {.name = "negated"}), dtype::float32, {"B", "E"});
  b.output(b.op("Shape", {front}, {}, {.name = "front_dims"}), dtype::int64, {2});
  model m = b.build_model();
  const auto report = fuse<negated_front>(m);
  EXPECT_TRUE(report.fusions.empty());
  ASSERT_EQ(report.near_misses.size(), 1u);
  EXPECT_EQ(report.near_misses[0].reason,
            "output of Slice 'front' is also read by Shape 'front_dims', outside the pattern, and "
            "no value the fusion keeps holds its dims [B, dim 1 of 'front']; dim 1 of 'front' is "
            "unknown: Slice 'front' cannot prove dim 1 of its output [B, dim 1 of 'front'] from "
            "its inputs [B, 8], [1], [1], [1]");
}

// Neg(Concat(past, new)) → Concat(Neg(past), Neg(new)): a rule whose interior join a Shape
// outside the match reads, as a decode step's mask is sliced to its keys' count.
struct negated_join {
  static constexpr std::string_view name = "negated-join";
  static constexpr auto pattern = op<"Neg">(op<"Concat">(capture<"past">, capture<"new">));
  static void emit(const graph&, const auto& m, emitter& e) {
    e.replace_root(e.op(
        "Concat", {e.op("Neg", {e.value(get<"past">(m))}), e.op("Neg", {e.value(get<"new">(m))})},
        {{"axis", 1}}));
  }
};

TEST(Fuse, AShapeOfAnInteriorValueReadsADimOfAnInputPlusANumber) {
  // The join is [B, P + 1]: B is past's dim 0, P + 1 its dim 1 plus 1, which no input holds.
  model_builder b;
  auto past = b.input("past", dtype::float32, {"B", "P"});
  auto fresh = b.input("new", dtype::float32, {"B", 1});
  auto joined = b.op("Concat", {past, fresh}, {{"axis", 1}}, {.name = "join"});
  b.output(b.op("Neg", {joined}), dtype::float32, {"B", "P + 1"});
  b.output(b.op("Shape", {joined}, {}, {.name = "join_dims"}), dtype::int64, {2});
  model m = b.build_model();
  const auto report = fuse<negated_join>(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].removed.at("Shape"), 1);
  const auto& nodes = m.proto.graph().node();
  const auto add = std::find_if(nodes.begin(), nodes.end(),
                                [](const onnx::NodeProto& n) { return n.op_type() == "Add"; });
  ASSERT_NE(add, nodes.end());
  const onnx::NodeProto* offset = nullptr;
  for (const onnx::NodeProto& n : nodes)
    if (n.output(0) == add->input(1)) offset = &n;
  ASSERT_NE(offset, nullptr);
  EXPECT_EQ(offset->attribute(0).t().int64_data(0), 1);
  fusekit::rewrite::check_invariants(m);
}

TEST(Fuse, OrphanedInitializersGoWithTheirReaders) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto shared = b.scalar(dtype::float32, 1.0);
  b.output(b.op("Mul", {b.op("Relu", {x}), shared}), dtype::float32, {4});
  model m = b.build_model();
  fuse<drop_scale>(m);
  EXPECT_EQ(m.proto.graph().initializer_size(), 0);
  EXPECT_EQ(op_types(m), (std::vector<std::string>{"Relu", "Identity"}));
}

TEST(Fuse, SubgraphsAreRewrittenToo) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto cond = b.input("cond", dtype::boolean, {});
  auto body = b.subgraph("then");
  body.output(body.op("Mul", {x, body.op("Sigmoid", {x})}), dtype::float32, {4});
  b.output(b.op("If", {cond}, {{"then_branch", body.proto()}, {"else_branch", body.proto()}}),
           dtype::float32, {4});
  model m = b.build_model();
  const auto report = fuse<silu>(m);
  EXPECT_EQ(report.fusions.size(), 2u);
  for (const auto& a : m.proto.graph().node(0).attribute()) {
    ASSERT_EQ(a.g().node_size(), 1);
    EXPECT_EQ(a.g().node(0).op_type(), "QuickGelu");
  }
  fusekit::rewrite::check_invariants(m);
}

// x.squeeze(1) as TorchScript writes it for a dim it cannot size: If(dim 1 is 1) → Squeeze,
// else x as it is. Here x's dim 1 is 1, and the facts prove whether it is `compared_to`.
model squeeze_by_if(std::int64_t compared_to) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, 1, 4});
  auto dim = b.op("Gather", {b.op("Shape", {x}), b.initializer(dtype::int64, {1}, {1})});
  auto is_it = b.op("Equal", {dim, b.initializer(dtype::int64, {1}, {double(compared_to)})});
  auto then_body = b.subgraph("then");
  then_body.output(
      then_body.op("Squeeze", {x, then_body.initializer("axes", dtype::int64, {1}, {1})}, {},
                   {.name = "squeezed"}),
      dtype::float32);
  auto else_body = b.subgraph("else");
  else_body.output(x, dtype::float32);
  auto picked =
      b.op("If", {is_it}, {{"then_branch", then_body.proto()}, {"else_branch", else_body.proto()}},
           {.name = "squeeze_if"});
  if (compared_to == 1)
    b.output(b.op("Relu", {picked}), dtype::float32, {2, 4});
  else
    b.output(b.op("Relu", {picked}), dtype::float32, {2, 1, 4});
  return b.build_model();
}

TEST(Fuse, AnIfWhoseConditionTheFactsProveIsTheBranchItTakes) {
  model m = squeeze_by_if(1);
  const auto report = fuse<double_negation>(m);
  // The branch's initializer is a Constant; the Squeeze writes the If's output, which Relu reads.
  EXPECT_EQ(op_types(m),
            (std::vector<std::string>{"Shape", "Gather", "Equal", "Constant", "Squeeze", "Relu"}));
  const auto& squeeze = m.proto.graph().node(4);
  EXPECT_EQ(squeeze.name(), "squeeze_if/squeezed_0");
  EXPECT_EQ(squeeze.input(0), "x");
  EXPECT_EQ(squeeze.output(0), m.proto.graph().node(5).input(0));
  ASSERT_EQ(report.notes.size(), 1u);
  EXPECT_EQ(report.notes[0],
            "inlined the then branch of If 'squeeze_if': the facts prove its condition true");
  fusekit::rewrite::check_invariants(m);
  // Nothing is left to decide: a second run changes nothing.
  const std::string once = bytes(m);
  fuse<double_negation>(m);
  EXPECT_EQ(bytes(m), once);
}

TEST(Fuse, ABranchThatPassesAnOuterValueOnIsAnIdentity) {
  model m = squeeze_by_if(2);
  const auto report = fuse<double_negation>(m);
  EXPECT_EQ(op_types(m),
            (std::vector<std::string>{"Shape", "Gather", "Equal", "Identity", "Relu"}));
  EXPECT_EQ(m.proto.graph().node(3).input(0), "x");
  ASSERT_EQ(report.notes.size(), 1u);
  EXPECT_EQ(report.notes[0],
            "inlined the else branch of If 'squeeze_if': the facts prove its condition false");
  fusekit::rewrite::check_invariants(m);
}

TEST(Names, FreshNamesAvoidEveryNameInTheModel) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  b.output(b.op("Relu", {x}), dtype::float32, {4});
  model m = b.build_model();
  // The names the emitter would pick first, taken by a sparse initializer, a value_info, a value in
  // an If body and a node of a model-local function.
  auto* sparse = m.proto.mutable_graph()->add_sparse_initializer();
  sparse->mutable_values()->set_name("t/Abs_0");
  sparse->mutable_indices()->set_name("t/Abs_0/indices");
  m.proto.mutable_graph()->add_value_info()->set_name("t/Abs_1");
  auto* branch = m.proto.mutable_graph()->add_node();
  branch->set_op_type("If");
  auto* then = branch->add_attribute();
  then->set_name("then_branch");
  then->set_type(onnx::AttributeProto_AttributeType_GRAPH);
  then->mutable_g()->add_node()->add_output("t/Abs_2/out_0");
  m.proto.mutable_functions()->Add()->add_node()->set_name("t/Neg_0");

  fusekit::rewrite::name_pool names(m.proto);
  EXPECT_EQ(names.fresh("t/Abs"), "t/Abs_2");
  EXPECT_EQ(names.fresh("t/Abs_2/out"), "t/Abs_2/out_1");
  EXPECT_EQ(names.fresh("t/Neg"), "t/Neg_1");
  EXPECT_EQ(names.fresh("t/Abs"), "t/Abs_3");
}

TEST(Names, TheEmitterSkipsASparseInitializersName) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  b.output(b.op("Relu", {x}), dtype::float32, {4});
  model m = b.build_model();
  auto* sparse = m.proto.mutable_graph()->add_sparse_initializer();
  sparse->mutable_values()->set_name("t/Abs_0/out_0");
  sparse->mutable_values()->set_data_type(onnx::TensorProto_DataType_FLOAT);
  sparse->mutable_indices()->set_name("t/indices");
  sparse->mutable_indices()->set_data_type(onnx::TensorProto_DataType_INT64);
  fuse<negated_abs>(m);
  ASSERT_EQ(op_types(m), (std::vector<std::string>{"Abs", "Neg"}));
  EXPECT_EQ(m.proto.graph().node(0).name(), "t/Abs_0");
  EXPECT_EQ(m.proto.graph().node(0).output(0), "t/Abs_0/out_1");
  EXPECT_EQ(m.proto.graph().node(1).input(0), "t/Abs_0/out_1");
}

TEST(Fuse, AFailureInALaterPassRestoresEveryGraphAndTheOpsetImports) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {2, 4});
  auto cond = b.input("cond", dtype::boolean, {});
  auto body = b.subgraph("then");
  body.output(body.op("Mul", {x, body.op("Sigmoid", {x})}), dtype::float32, {2, 4});
  auto branch = b.op("If", {cond}, {{"then_branch", body.proto()}, {"else_branch", body.proto()}});
  auto act = b.op("Mul", {b.op("Sigmoid", {x}), x});
  b.output(b.op("Add", {act, branch}), dtype::float32, {2, 4});
  model m = b.build_model();
  const std::string before = bytes(m);
  // Pass 1 fuses three SiLUs (two bodies and the main graph) and imports com.microsoft; pass 2
  // throws.
  EXPECT_THROW((fuse<silu, throws_after_silu>(m)), fusekit::error);
  EXPECT_EQ(bytes(m), before);
  // Without the rule that throws, the same model fuses.
  EXPECT_EQ(fuse<silu>(m).fusions.size(), 3u);
}

TEST(Fuse, ARunStoppedByThePassCapSaysSo) {
  model_builder b;
  b.output(b.op("Abs", {b.input("x", dtype::float32, {4})}), dtype::float32, {4});
  model m = b.build_model();
  const auto report = fuse<abs_again>(m);
  EXPECT_EQ(report.passes, fusekit::rewrite::max_passes);
  EXPECT_FALSE(report.fixed_point);
  EXPECT_EQ(report.to_json()["fixed_point"], false);
  EXPECT_EQ(report.to_table(),
            "abs-again: 8 fused, 0 near misses\n"
            "  fused Abs 'Abs_0'\n  fused Abs 'abs-again/Abs_0'\n  fused Abs 'abs-again/Abs_1'\n"
            "  fused Abs 'abs-again/Abs_2'\n  fused Abs 'abs-again/Abs_3'\n"
            "  fused Abs 'abs-again/Abs_4'\n  fused Abs 'abs-again/Abs_5'\n"
            "  fused Abs 'abs-again/Abs_6'\n"
            "removed: Abs 8;\nadded: Abs 8;\n"
            "no fixed point: stopped after 8 passes with rules still matching; running them "
            "again changes the model\n");
  fusekit::rewrite::check_invariants(m);
}

TEST(Fuse, AFixedPointIsReported) {
  model m = silu_model();
  const auto report = fuse<silu>(m);
  EXPECT_TRUE(report.fixed_point);
  EXPECT_EQ(report.to_json()["fixed_point"], true);
}

// q·(Concat(past, new))ᵀ with present = Concat(…) a graph output; `early_reader` adds a reader of
// present before the scores, `late_reader` one after them.
model decoder_model(bool early_reader = false, bool late_reader = false) {
  model_builder b;
  auto q = b.input("q", dtype::float32, {1, 2, 3, 4});
  auto past = b.input("past_key", dtype::float32, {1, 2, 5, 4});
  auto key = b.input("key", dtype::float32, {1, 2, 3, 4});
  auto present = b.op("Concat", {past, key}, {{"axis", std::int64_t(2)}}, {.name = "present"});
  if (early_reader) b.output(b.op("Neg", {present}), dtype::float32, {1, 2, 8, 4});
  auto kt = b.op("Transpose", {present}, {{"perm", std::vector<std::int64_t>{0, 1, 3, 2}}});
  auto scores = b.op("MatMul", {q, kt});
  b.output(scores, dtype::float32, {1, 2, 3, 8});
  b.output(present, dtype::float32, {1, 2, 8, 4});
  if (late_reader) b.output(b.op("Sqrt", {present}), dtype::float32, {1, 2, 8, 4});
  return b.build_model();
}

TEST(MultiOutput, ARuleReplacesAGraphOutputThatIsAnInteriorValue) {
  model m = decoder_model(false, true);
  const auto report = fuse<cached_scores>(m);
  ASSERT_EQ(report.fusions.size(), 1u) << report.to_table();
  EXPECT_EQ(op_types(m), (std::vector<std::string>{"Concat", "Einsum", "Sqrt"}));
  EXPECT_EQ(m.proto.graph().node(0).name(), "cached-scores/Concat_0");
  EXPECT_EQ(m.proto.graph().node(0).output(0), "present");  // the graph output keeps its name
  EXPECT_EQ(m.proto.graph().node(1).input(1), "present");
  EXPECT_EQ(m.proto.graph().node(2).input(0), "present");
  EXPECT_EQ(report.fusions[0].removed,
            (std::map<std::string, int>{{"Concat", 1}, {"MatMul", 1}, {"Transpose", 1}}));
  EXPECT_EQ(report.fusions[0].added, (std::map<std::string, int>{{"Concat", 1}, {"Einsum", 1}}));
  fusekit::rewrite::check_invariants(m);
}

// Fuses with R alone; expects the model unchanged and one near miss, and returns its reason.
template <class R>
std::string refusal(model& m) {
  const std::string before = bytes(m);
  const auto report = fuse<R>(m);
  EXPECT_EQ(bytes(m), before);
  if (report.near_misses.size() != 1)
    return "near misses: " + std::to_string(report.near_misses.size());
  return report.near_misses[0].reason;
}

TEST(MultiOutput, AReplacedValueReadBeforeTheInsertionPointIsRefused) {
  model m = decoder_model(true, false);
  EXPECT_EQ(refusal<cached_scores>(m),
            "emit replaces 'present', which Neg 'Neg_0' reads before the insertion point MatMul "
            "'MatMul_2', nothing changed");
}

TEST(Validate, AnEmittedReadOfALaterValueIsRefused) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto relu = b.op("Relu", {x});
  auto late = b.op("Sigmoid", {x}, {}, {.name = "late"});
  b.output(b.op("Add", {relu, late}), dtype::float32, {4});
  model m = b.build_model();
  EXPECT_EQ(refusal<reads_later>(m),
            "emit reads 'late', which Sigmoid 'late' computes after the insertion point Relu "
            "'Relu_0', nothing changed");
}

model relu_model(std::int64_t opset) {
  model_builder b(opset);
  auto x = b.input("x", dtype::float32, {4});
  b.output(b.op("Relu", {x}), dtype::float32, {4});
  return b.build_model();
}

TEST(Validate, AnEmittedOpTheModelsOpsetLacksIsRefused) {
  model m = relu_model(7);
  EXPECT_EQ(refusal<broadcast_relu>(m),
            "emit writes Expand, which ai.onnx opset 7 does not have (it came in opset 8), nothing "
            "changed");
  // The same edit where the op exists.
  model later = relu_model(8);
  EXPECT_EQ(fuse<broadcast_relu>(later).fusions.size(), 1u);
  fusekit::rewrite::check_invariants(later);
}

TEST(Checker, AnErrorTheInputHadAlreadyIsANote) {
  model m = silu_model();
  // ONNX Runtime would run this model with a custom op of that name; the checker knows no such op
  // and says so on several lines.
  auto* custom = m.proto.mutable_graph()->add_node();
  custom->set_op_type("Frobnicate");
  custom->set_name("custom");
  custom->add_input("x");
  custom->add_output("frobnicated");
  const std::string input_error = fusekit::rewrite::checker_error(m);
  EXPECT_EQ(input_error,
            "No Op registered for Frobnicate with domain_version of 17; ==> Context: Bad node spec "
            "for node. Name: custom OpType: Frobnicate");
  fuse<silu>(m);
  EXPECT_EQ(fusekit::rewrite::check_rewrite(m, input_error),
            "the ONNX checker rejects the input already, and the output for the same reason: " +
                input_error);
}

TEST(Checker, AnErrorTheRewriteIntroducedIsARefusal) {
  model m = silu_model();
  const std::string input_error = fusekit::rewrite::checker_error(m);
  EXPECT_EQ(input_error, "");
  fuse<silu>(m);
  EXPECT_EQ(fusekit::rewrite::check_rewrite(m, input_error), std::nullopt);
  m.proto.mutable_graph()->clear_name();  // as a faulty rewrite might
  try {
    fusekit::rewrite::check_rewrite(m, input_error);
    FAIL() << "no refusal";
  } catch (const fusekit::error& e) {
    EXPECT_EQ(std::string(e.what()),
              "the ONNX checker rejects the fused model: Field 'name' of 'graph' is required to be "
              "non-empty.");
  }
}

TEST(Checker, AGraphOutputWithoutAShapeIsNamed) {
  // The checker's own words name the field only; which value lacks it comes first.
  model_builder b;
  b.output(b.op("Relu", {b.input("x", dtype::float32, {2})}), dtype::float32);
  EXPECT_EQ(fusekit::rewrite::checker_error(b.build_model()),
            "graph output 'Relu_0': Field 'shape' of 'type' is required but missing.");
}

// An opset-23 model whose standard Attention is well formed, with one attribute of the caller's
// choosing added to it: the checker, run past the opsets Debian's onnx knew, reads it.
model attention_model(std::int64_t opset, std::initializer_list<fusekit::build::attr> extra = {}) {
  model_builder b(opset);
  auto q = b.input("q", dtype::float32, {1, 2, 4, 8});
  auto k = b.input("k", dtype::float32, {1, 2, 4, 8});
  auto v = b.input("v", dtype::float32, {1, 2, 4, 8});
  b.output(b.op("Attention", {q, k, v}, extra, {.name = "attention"}), dtype::float32,
           {1, 2, 4, 8});
  return b.build_model();
}

TEST(Checker, RunsOnOpset23Models) {
  EXPECT_EQ(fusekit::rewrite::checker_error(attention_model(23, {{"is_causal", 1}})), "");
  // Near miss: is_causal is an INT attribute; a string one is the error the checker must name.
  EXPECT_EQ(fusekit::rewrite::checker_error(attention_model(23, {{"is_causal", "yes"}})),
            "Mismatched attribute type in 'attention : is_causal'. Expected: 'INT', actual: "
            "'STRING'; ==> Context: Bad node spec for node. Name: attention OpType: Attention");
}

TEST(Checker, RunsPastTheOpsetsTheLinkedOnnxKnows) {
  // Near miss: a model from a newer exporter is still checked, against the newest schemas known.
  EXPECT_EQ(fusekit::rewrite::checker_error(attention_model(99, {{"is_causal", "yes"}})),
            "Mismatched attribute type in 'attention : is_causal'. Expected: 'INT', actual: "
            "'STRING'; ==> Context: Bad node spec for node. Name: attention OpType: Attention");
}

TEST(Checker, HoldsOnnxRuntimeOpsToTheirContracts) {
  model_builder b(18);
  b.opset_import("com.microsoft", 1);
  auto x = b.input("x", dtype::float32, {2, 8});
  auto scale = b.initializer("scale", dtype::float32, {8}, std::vector<double>(8, 1.0));
  // ONNX Runtime registers SimplifiedLayerNormalization in ai.onnx: a valid node passes.
  auto norm =
      b.op("SimplifiedLayerNormalization", {x, scale}, {{"epsilon", 1e-6}}, {.name = "norm"});
  b.output(norm, dtype::float32, {2, 8});
  EXPECT_EQ(fusekit::rewrite::checker_error(b.build_model()), "");

  // Near miss: MultiHeadAttention needs num_heads; the contract's checker says so rather than
  // passing a com.microsoft node it cannot read.
  model_builder c(18);
  c.opset_import("com.microsoft", 1);
  auto q = c.input("q", dtype::float32, {1, 4, 16});
  c.output(c.op("MultiHeadAttention", {q, q, q}, {}, {.name = "mha", .domain = "com.microsoft"}),
           dtype::float32, {1, 4, 16});
  EXPECT_EQ(fusekit::rewrite::checker_error(c.build_model()),
            "Required attribute 'num_heads' is missing.; ==> Context: Bad node spec for node. "
            "Name: mha OpType: MultiHeadAttention");
}

// ONNX Runtime judges the decoder rule: tests/python/test_engine_models.py runs both models.
TEST(WrittenModels, DecoderCacheRule) {
  // Where the python suite reads them when run as the written_models fixture; otherwise the
  // test's own scratch directory, so the test still runs whole.
  const char* dir = std::getenv("FUSEKIT_MODEL_DIR");
  const std::filesystem::path out =
      std::filesystem::path(dir != nullptr ? dir : ::testing::TempDir()) / "engine";
  std::filesystem::create_directories(out);
  model m = decoder_model(false, true);
  fusekit::save_model(m, out / "decoder_unfused.onnx");
  ASSERT_EQ(fuse<cached_scores>(m).fusions.size(), 1u);
  fusekit::save_model(m, out / "decoder_fused.onnx");
}

TEST(Report, JsonAndTable) {
  model m = silu_model();
  const auto report = fuse<silu, fails_half_way>(m);
  const auto json = report.to_json();
  EXPECT_EQ(json["passes"], 1);
  EXPECT_EQ(json["removed"]["Sigmoid"], 1);
  EXPECT_EQ(json["rules"][0]["name"], "silu");
  EXPECT_EQ(json["rules"][0]["matches"][0]["root"], "Mul 'Mul_1'");
  EXPECT_EQ(report.to_table(),
            "silu: 1 fused, 0 near misses\n"
            "  fused Mul 'Mul_1'  {\"activation\":\"silu\"}\n"
            "fails-half-way: 0 fused, 0 near misses\n"
            "removed: Mul 1; Sigmoid 1;\n"
            "added: QuickGelu 1;\n");
}

}  // namespace
