// The rewrite engine: rules applied whole or not at all, overlaps resolved deterministically, dead
// nodes only removed, names and outputs kept, subgraphs rewritten, and a second run a no-op.
#include "fusekit/rewrite/driver.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

#include "fusekit/graph/model_builder.hpp"
#include "fusekit/pattern/pattern.hpp"

namespace {

using namespace fusekit::pattern;
using fusekit::dtype;
using fusekit::graph;
using fusekit::model;
using fusekit::build::model_builder;
using fusekit::build::value;
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
  static verdict guard(const graph& g, const auto& m, const fusekit::rewrite::options&) {
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

std::string bytes(const model& m) { return fusekit::detail::serialize_deterministic(m.proto); }

std::vector<std::string> op_types(const model& m) {
  std::vector<std::string> ops;
  for (const auto& n : m.proto.graph().node()) ops.push_back(n.op_type());
  return ops;
}

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
