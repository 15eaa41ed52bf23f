// The graph index: what every pattern and rewrite reads. Each test states one property.
#include "fusekit/graph/graph.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fusekit/graph/model_builder.hpp"

namespace {

using fusekit::dtype;
using fusekit::graph;
using fusekit::no_id;
using fusekit::use;
using fusekit::value_id;
using fusekit::build::model_builder;
using fusekit::build::value;

value_id id(const graph& g, const value& v) { return *g.find_value(v.name); }

// MatMul(q, kᵀ) → Cast → Mul(scale) → Softmax → Cast → MatMul(·, v): the DiT attention core.
struct dit_block {
  model_builder b{17};
  value q = b.input("q", dtype::float16, {2, 16, "S", 64});
  value kt = b.input("kt", dtype::float16, {2, 16, 64, "S"});
  value v = b.input("v", dtype::float16, {2, 16, "S", 64});
  value scores = b.op("MatMul", {q, kt});
  value up = b.op("Cast", {scores}, {{"to", dtype::float32}});
  value scaled = b.op("Mul", {up, b.scalar(dtype::float32, 100.0)});
  value probs = b.op("Softmax", {scaled}, {{"axis", -1}});
  value down = b.op("Cast", {probs}, {{"to", dtype::float16}});
  value out = b.op("MatMul", {down, v});
};

// The index's name look-up: every name inserted is found with its id across the table's growth,
// and a name never inserted is not, even one that differs in a single byte or only in length.
TEST(NameTable, FindsEveryNameAcrossGrowthAndNothingElse) {
  std::vector<std::string> names;
  for (int i = 0; i < 5000; ++i) names.push_back("/blocks." + std::to_string(i) + "/attn/MatMul");
  struct name_of {
    const std::vector<std::string>* names;
    std::string_view operator()(std::uint32_t id) const { return (*names)[id]; }
  };
  fusekit::name_table<name_of> table{name_of{&names}};
  for (std::uint32_t id = 0; id < names.size(); ++id) table.insert(names[id], id);
  for (std::uint32_t id = 0; id < names.size(); ++id) EXPECT_EQ(table.find(names[id]), id);
  EXPECT_EQ(table.find("/blocks.0/attn/MatMuk"), std::nullopt);
  EXPECT_EQ(table.find("/blocks.0/attn/MatMul_"), std::nullopt);
  EXPECT_EQ(table.find("/blocks.0/attn/MatMu"), std::nullopt);
  EXPECT_EQ(table.find(""), std::nullopt);
  EXPECT_NE(fusekit::name_hash("/blocks.0/attn/MatMul"),
            fusekit::name_hash("/blocks.1/attn/MatMul"));
}

TEST(GraphIndex, ProducersConsumersAndSlots) {
  dit_block d;
  d.b.output(d.out);
  const auto model = d.b.build();
  const graph g(model);

  ASSERT_EQ(g.node_count(), 6u);
  const auto scores = id(g, d.scores);
  EXPECT_EQ(g.op_type(g.producer(scores)), "MatMul");
  EXPECT_EQ(g.producer_slot(scores), 0u);
  ASSERT_EQ(g.consumers(scores).size(), 1u);
  EXPECT_EQ(g.op_type(g.consumers(scores)[0].node), "Cast");
  EXPECT_EQ(g.consumers(scores)[0].slot, 0u);

  const auto v = id(g, d.v);
  EXPECT_EQ(g.producer(v), no_id);
  EXPECT_TRUE(g.is_graph_input(v));
  ASSERT_EQ(g.consumers(v).size(), 1u);
  EXPECT_EQ(g.consumers(v)[0].slot, 1u);

  EXPECT_TRUE(g.is_graph_output(id(g, d.out)));
  EXPECT_FALSE(g.is_graph_output(scores));
  EXPECT_TRUE(g.consumers(id(g, d.out)).empty());
}

TEST(GraphIndex, ConsumersListEveryReadInNodeOrder) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto sq = b.op("Mul", {x, x});
  auto y = b.op("Add", {sq, x});
  b.output(y);
  const auto model = b.build();
  const graph g(model);
  const auto uses = g.consumers(id(g, x));
  ASSERT_EQ(uses.size(), 3u);
  EXPECT_EQ(uses[0], (use{0, 0}));
  EXPECT_EQ(uses[1], (use{0, 1}));
  EXPECT_EQ(uses[2], (use{1, 1}));
}

TEST(GraphIndex, OpTypesAreInternedAndIndexed) {
  dit_block d;
  d.b.output(d.out);
  const auto model = d.b.build();
  const graph g(model);
  constexpr auto matmul = *fusekit::find_known_op("", "MatMul");
  static_assert(*fusekit::find_known_op("ai.onnx", "MatMul") == matmul);
  const auto matmuls = g.nodes_of(matmul);
  ASSERT_EQ(matmuls.size(), 2u);
  EXPECT_EQ(g.op(matmuls[0]), matmul);
  EXPECT_LT(matmuls[0], matmuls[1]);
  EXPECT_EQ(g.nodes_of(*fusekit::find_known_op("", "Cast")).size(), 2u);
  EXPECT_TRUE(g.nodes_of(*fusekit::find_known_op("", "Conv")).empty());
}

TEST(GraphIndex, UnknownOpsGetIdsPerModel) {
  model_builder b;
  b.opset_import("my.ops", 1);
  auto x = b.input("x", dtype::float32, {4});
  auto y = b.op("Frobnicate", {x}, {}, {.domain = "my.ops"});
  b.output(b.op("Frobnicate", {y}, {}, {.domain = "my.ops"}));
  const auto model = b.build();
  const graph g(model);
  const auto op = g.ops().find("my.ops", "Frobnicate");
  ASSERT_TRUE(op.has_value());
  EXPECT_GE(*op, fusekit::known_op_count);
  EXPECT_EQ(g.nodes_of(*op).size(), 2u);
  EXPECT_EQ(g.ops().domain(*op), "my.ops");
  EXPECT_EQ(g.describe(0), "Frobnicate 'Frobnicate_0'");
}

TEST(GraphIndex, OmittedOptionalInputsAndOutputsHaveNoId) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto lo = b.scalar(dtype::float32, 0.0);
  auto y = b.op("Clip", {x, lo, value{}});
  b.output(y);
  const auto model = b.build();
  const graph g(model);
  ASSERT_EQ(g.inputs(0).size(), 3u);
  EXPECT_EQ(g.input(0, 2), no_id);
  EXPECT_EQ(g.input(0, 7), no_id);
  // Walkers that step onto an omitted input find a value with nothing: no crash.
  EXPECT_EQ(g.producer(no_id), no_id);
  EXPECT_TRUE(g.consumers(no_id).empty());
  EXPECT_EQ(g.type(no_id), dtype::undefined);
  EXPECT_FALSE(g.shape(no_id).known);
  EXPECT_FALSE(g.is_constant(no_id));
  EXPECT_EQ(g.name(no_id), "");
}

TEST(GraphIndex, ShapesStaticAndSymbolic) {
  dit_block d;
  d.b.output(d.out);
  const auto model = d.b.build();
  const graph g(model);
  const auto& shape = g.shape(id(g, d.q));
  ASSERT_TRUE(shape.known);
  ASSERT_EQ(shape.rank(), 4u);
  EXPECT_EQ(shape.dims[0].size, 2);
  EXPECT_TRUE(shape.dims[2].is_symbolic());
  EXPECT_EQ(shape.dims[2].symbol, "S");
  EXPECT_FALSE(shape.dims[2].is_static());
  EXPECT_FALSE(g.shape(id(g, d.scores)).known);
  const auto& scalar = g.shape(*g.find_value(g.node(2).input(1)));
  EXPECT_TRUE(scalar.known);
  EXPECT_EQ(scalar.rank(), 0u);
}

TEST(DtypePropagation, FollowsCastsThroughTheAttentionChain) {
  dit_block d;
  d.b.output(d.out);
  const auto model = d.b.build();
  const graph g(model);
  EXPECT_EQ(g.type(id(g, d.scores)), dtype::float16);
  EXPECT_EQ(g.type(id(g, d.up)), dtype::float32);
  EXPECT_EQ(g.type(id(g, d.scaled)), dtype::float32);
  EXPECT_EQ(g.type(id(g, d.probs)), dtype::float32);
  EXPECT_EQ(g.type(id(g, d.down)), dtype::float16);
  EXPECT_EQ(g.type(id(g, d.out)), dtype::float16);
}

TEST(DtypePropagation, DeclaredTypesWin) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto y = b.op("Relu", {x});
  // value_info says bfloat16; a model's own annotation beats fusekit's guess.
  b.value_info(y, dtype::bfloat16);
  b.output(b.op("Neg", {y}));
  const auto model = b.build();
  const graph g(model);
  EXPECT_EQ(g.type(id(g, y)), dtype::bfloat16);
  EXPECT_EQ(g.type(*g.find_value("Neg_1")), dtype::bfloat16);
}

TEST(DtypePropagation, ShapeOpsWhereConcatComparisonsAndUnknownOps) {
  model_builder b;
  auto x = b.input("x", dtype::float16, {2, "S"});
  auto c = b.input("c", dtype::boolean, {2, "S"});
  auto shape = b.op("Shape", {x});
  auto reshaped = b.op("Reshape", {x, shape});
  auto where = b.op("Where", {c, reshaped, x});
  auto custom = b.op("Custom", {x}, {}, {.domain = "x"});
  auto cat = b.op("Concat", {custom, where}, {{"axis", 0}});
  auto less = b.op("Less", {x, x});
  auto like = b.op("CastLike", {less, x});
  auto split = b.ops("Split", {x}, {{"axis", 1}}, {.outputs = 2});
  auto topk = b.ops("TopK", {x, b.scalar(dtype::int64, 1)}, {}, {.outputs = 2});
  for (const auto& v : {cat, like, split[1], topk[1]}) b.output(v);
  const auto model = b.build();
  const graph g(model);
  EXPECT_EQ(g.type(id(g, shape)), dtype::int64);
  EXPECT_EQ(g.type(id(g, reshaped)), dtype::float16);
  EXPECT_EQ(g.type(id(g, where)), dtype::float16);
  EXPECT_EQ(g.type(id(g, custom)), dtype::undefined);
  EXPECT_EQ(g.type(id(g, cat)), dtype::float16);
  EXPECT_EQ(g.type(id(g, less)), dtype::boolean);
  EXPECT_EQ(g.type(id(g, like)), dtype::float16);
  EXPECT_EQ(g.type(id(g, split[1])), dtype::float16);
  EXPECT_EQ(g.type(id(g, topk[0])), dtype::float16);
  EXPECT_EQ(g.type(id(g, topk[1])), dtype::int64);
}

TEST(DtypePropagation, WorksOnUnsortedGraphs) {
  model_builder b;
  auto x = b.input("x", dtype::float16, {4});
  auto y = b.op("Cast", {x}, {{"to", dtype::float32}});
  auto z = b.op("Relu", {y});
  b.output(z);
  auto model = b.build();
  model.mutable_graph()->mutable_node()->SwapElements(0, 1);
  const graph g(model);
  EXPECT_EQ(g.type(*g.find_value(z.name)), dtype::float32);
  ASSERT_EQ(g.topological_order().size(), 2u);
  EXPECT_EQ(g.topological_order()[0], 1u);
}

TEST(Attributes, SoftmaxAxisDefaultDependsOnOpset) {
  for (const auto& [opset, axis] : {std::pair{11, 1}, {12, 1}, {13, -1}, {21, -1}}) {
    model_builder b(opset);
    auto x = b.input("x", dtype::float32, {2, 3});
    b.output(b.op("Softmax", {x}));
    const auto model = b.build();
    const graph g(model);
    const auto found = g.attribute(0, "axis");
    ASSERT_TRUE(found) << "opset " << opset;
    EXPECT_TRUE(found.is_default);
    EXPECT_EQ(g.attribute_int(0, "axis"), axis) << "opset " << opset;
    EXPECT_EQ(g.opset(""), opset);
    EXPECT_EQ(g.opset("ai.onnx"), opset);
  }
}

TEST(Attributes, ExplicitValueBeatsDefault) {
  model_builder b(11);
  auto x = b.input("x", dtype::float32, {2, 3});
  b.output(b.op("Softmax", {x}, {{"axis", -1}}));
  const auto model = b.build();
  const graph g(model);
  EXPECT_FALSE(g.attribute(0, "axis").is_default);
  EXPECT_EQ(g.attribute_int(0, "axis"), -1);
}

TEST(Attributes, TypedAccessorsAndMissingAttributes) {
  model_builder b;
  b.opset_import("com.microsoft", 1);
  auto x = b.input("x", dtype::float32, {2, 3, 4});
  auto t = b.op("Transpose", {x}, {{"perm", std::vector<std::int64_t>{0, 2, 1}}});
  auto ln = b.op("LayerNormalization", {t, b.scalar(dtype::float32, 1.0)});
  b.output(b.op("Gelu", {ln}, {}, {.domain = "com.microsoft"}));
  const auto model = b.build();
  const graph g(model);
  const auto perm = g.attribute_ints(0, "perm");
  ASSERT_TRUE(perm);
  EXPECT_EQ(std::vector<std::int64_t>(perm->begin(), perm->end()),
            (std::vector<std::int64_t>{0, 2, 1}));
  EXPECT_FALSE(g.attribute_int(0, "perm"));  // wrong kind: ints, not int
  EXPECT_FLOAT_EQ(*g.attribute_float(1, "epsilon"), 1e-5f);
  EXPECT_EQ(g.attribute_int(1, "axis"), -1);
  EXPECT_FALSE(g.attribute(1, "no_such_attribute"));
  // Schemas of com.microsoft ops are not in libonnx: no defaults, no crash.
  EXPECT_FALSE(g.attribute(2, "approximate"));
  EXPECT_EQ(g.opset("com.microsoft"), 1);
  EXPECT_EQ(g.opset("not.imported"), 0);
}

TEST(Constants, InitializersAndConstantNodesAreConstantScalars) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {4});
  auto init = b.scalar(dtype::float16, 0.125);
  auto node = b.constant(dtype::float32, {1}, {8.0});
  auto vector = b.initializer("w", dtype::float32, {2}, {1.0, 2.0});
  b.output(b.op("Mul", {b.op("Mul", {x, init}), b.op("Add", {node, vector})}));
  const auto model = b.build();
  const graph g(model);
  EXPECT_TRUE(g.is_initializer(id(g, init)));
  EXPECT_TRUE(g.is_constant(id(g, init)));
  EXPECT_EQ(g.constant_scalar(id(g, init)), 0.125);
  EXPECT_FALSE(g.is_initializer(id(g, node)));
  EXPECT_TRUE(g.is_constant(id(g, node)));
  EXPECT_EQ(g.constant_scalar(id(g, node)), 8.0);
  EXPECT_TRUE(g.is_constant(id(g, vector)));
  EXPECT_FALSE(g.constant_scalar(id(g, vector)));
  EXPECT_FALSE(g.is_constant(id(g, x)));
  EXPECT_EQ(g.constant_tensor(id(g, x)), nullptr);
  EXPECT_EQ(g.type(id(g, node)), dtype::float32);
  EXPECT_EQ(g.shape(id(g, vector)).dims[0].size, 2);
}

// If(cond) { then: x + one_outer } else { x * x }: bodies read x from the enclosing graph.
struct if_model {
  model_builder b{17};
  value x = b.input("x", dtype::float32, {4});
  value cond = b.input("cond", dtype::boolean, {});
  value one = b.scalar(dtype::float32, 1.0);
  onnx::ModelProto model = make();

  onnx::ModelProto make() {
    auto then_branch = b.subgraph("then");
    then_branch.output(then_branch.op("Add", {x, one}), dtype::float32);
    auto else_branch = b.subgraph("else");
    auto inner_cond = b.subgraph("inner");
    inner_cond.output(inner_cond.op("Neg", {x}), dtype::float32);
    auto nested = else_branch.op(
        "If", {cond}, {{"then_branch", inner_cond.proto()}, {"else_branch", inner_cond.proto()}});
    else_branch.output(else_branch.op("Mul", {nested, x}), dtype::float32);
    b.output(b.op("If", {cond},
                  {{"then_branch", then_branch.proto()}, {"else_branch", else_branch.proto()}}));
    return b.build();
  }
};

TEST(Subgraphs, BodiesAreIndexedWithOuterScopeResolved) {
  if_model m;
  const graph g(m.model);
  ASSERT_EQ(g.node_count(), 1u);
  ASSERT_EQ(g.subgraphs(0).size(), 2u);
  EXPECT_EQ(g.subgraphs(0)[0].attribute, "then_branch");
  const graph& then_body = *g.subgraphs(0)[0].body;
  EXPECT_EQ(then_body.parent(), &g);
  EXPECT_EQ(then_body.owner(), 0u);
  const auto x = *then_body.find_value("x");
  EXPECT_TRUE(then_body.is_outer_scope(x));
  EXPECT_EQ(then_body.type(x), dtype::float32);
  const auto [where, outer] = then_body.definition(x);
  EXPECT_EQ(where, &g);
  EXPECT_TRUE(g.is_graph_input(outer));
  // The outer constant stays a constant inside the body.
  EXPECT_EQ(then_body.type(*then_body.find_value(m.one.name)), dtype::float32);
  EXPECT_EQ(then_body.type(*then_body.find_value("Add_1")), dtype::float32);
}

TEST(Subgraphs, OuterValuesReadByBodiesCountAsImplicitUses) {
  if_model m;
  const graph g(m.model);
  // x is read only inside the bodies: the If node holds it alive, with no input slot.
  const auto x = *g.find_value("x");
  ASSERT_FALSE(g.consumers(x).empty());
  for (const use& u : g.consumers(x)) {
    EXPECT_EQ(u.node, 0u);
    EXPECT_TRUE(u.is_implicit());
  }
  const auto cond = *g.find_value("cond");
  EXPECT_EQ(g.consumers(cond)[0], (use{0, 0}));
}

TEST(Subgraphs, NestedBodiesResolveThroughEveryScope) {
  if_model m;
  const graph g(m.model);
  const graph& else_body = *g.subgraphs(0)[1].body;
  const auto nested_if = else_body.nodes_of(*fusekit::find_known_op("", "If"));
  ASSERT_EQ(nested_if.size(), 1u);
  const graph& inner = *else_body.subgraphs(nested_if[0])[0].body;
  const auto x = *inner.find_value("x");
  EXPECT_TRUE(inner.is_outer_scope(x));
  EXPECT_EQ(inner.definition(x).first, &g);
  // In the else body, x is outer too, and read implicitly by the nested If.
  const auto else_x = *else_body.find_value("x");
  bool implicit_by_nested_if = false;
  for (const use& u : else_body.consumers(else_x))
    implicit_by_nested_if |= u.node == nested_if[0] && u.is_implicit();
  EXPECT_TRUE(implicit_by_nested_if);
}

}  // namespace
