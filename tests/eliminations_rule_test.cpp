// Specifications of the eliminations (rules/fusekit/rules/eliminations.hpp): a node that computes
// nothing at inference goes and its readers read its input; a Constant becomes an initializer of
// its output's name. Each look-alike stays byte for byte, and neither rule reports near misses.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fusekit/graph/model_builder.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "fusekit/rules/all.hpp"
#include "fusekit/rules/eliminations.hpp"
#include "test_support.hpp"

namespace {

using fusekit::dtype;
using fusekit::build::model_builder;
using fusekit::build::value;
using fusekit::rules::castlike_to_cast;
using fusekit::rules::constant_to_initializer;
using fusekit::rules::identity_elimination;
using fusekit::rules::noop_elimination;
using fusekit::rules::not_elimination;
using fusekit::testing::fuse_compiled;

// "Op(input, …) -> output" per node, in graph order.
std::string nodes_of(const fusekit::model& m) {
  std::string out;
  for (const auto& n : m.proto.graph().node()) {
    out += n.op_type() + "(";
    for (int i = 0; i < n.input_size(); ++i) out += (i ? ", " : "") + n.input(i);
    out += ")->" + n.output(0) + " ";
  }
  return out;
}

template <class R>
void expect_unchanged(fusekit::model m) {
  const std::string before = m.proto.SerializeAsString();
  const auto report = fuse_compiled<R>(m);
  EXPECT_EQ(m.proto.SerializeAsString(), before);
  EXPECT_TRUE(report.fusions.empty());
  EXPECT_TRUE(report.near_misses.empty());
}

// x ── node ── y ── Relu ── out
fusekit::model read_through(std::string_view op,
                            std::initializer_list<fusekit::build::attr> attrs = {},
                            dtype type = dtype::float32, std::int64_t opset = 17) {
  model_builder b(opset);
  auto x = b.input("x", type, {2, 3});
  auto y = b.op(op, {x}, attrs);
  b.output(b.op("Relu", {y}), type, {2, 3});
  return b.build_model();
}

TEST(IdentityElimination, IdentityReadersReadItsInput) {
  fusekit::model m = read_through("Identity");
  const auto report = fuse_compiled<identity_elimination>(m);
  EXPECT_EQ(nodes_of(m), "Relu(x)->Relu_1 ");
  EXPECT_EQ(report.fusions.size(), 1u);
  fusekit::rewrite::check_invariants(m);
}

TEST(IdentityElimination, CastToItsOwnTypeGoes) {
  fusekit::model m = read_through("Cast", {{"to", dtype::float32}});
  fuse_compiled<identity_elimination>(m);
  EXPECT_EQ(nodes_of(m), "Relu(x)->Relu_1 ");
}

TEST(IdentityElimination, DropoutAtInferenceGoes) {
  fusekit::model m = read_through("Dropout");
  fuse_compiled<identity_elimination>(m);
  EXPECT_EQ(nodes_of(m), "Relu(x)->Relu_1 ");
}

TEST(IdentityElimination, AChainGoesWhole) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {2, 3});
  auto y = b.op("Identity", {b.op("Identity", {b.op("Identity", {x})})});
  b.output(b.op("Relu", {y}), dtype::float32, {2, 3});
  fusekit::model m = b.build_model();
  fuse_compiled<identity_elimination>(m);
  EXPECT_EQ(nodes_of(m), "Relu(x)->Relu_3 ");
}

TEST(IdentityElimination, NearMissCastToAnotherType) {
  // A Cast that converts computes something.
  expect_unchanged<identity_elimination>(read_through("Cast", {{"to", dtype::float16}}));
}

TEST(IdentityElimination, NearMissDropoutInTraining) {
  // training_mode true: the Dropout drops elements.
  model_builder b;
  auto x = b.input("x", dtype::float32, {2, 3});
  auto y = b.op("Dropout", {x, b.scalar(dtype::float32, 0.5), b.scalar(dtype::boolean, 1)});
  b.output(b.op("Relu", {y}), dtype::float32, {2, 3});
  expect_unchanged<identity_elimination>(b.build_model());
}

TEST(IdentityElimination, NearMissDropoutWhoseMaskIsRead) {
  // Its mask is a second result someone reads: the node must stay.
  model_builder b;
  auto x = b.input("x", dtype::float32, {2, 3});
  auto outs = b.ops("Dropout", {x}, {}, {.outputs = 2});
  b.output(b.op("Relu", {outs[0]}), dtype::float32, {2, 3});
  b.output(outs[1], dtype::boolean, {2, 3});
  expect_unchanged<identity_elimination>(b.build_model());
}

TEST(IdentityElimination, NearMissIdentityWritingAGraphOutput) {
  // The output's name is the model's interface: it must live on.
  model_builder b;
  auto x = b.input("x", dtype::float32, {2, 3});
  b.output(b.op("Identity", {b.op("Relu", {x})}), dtype::float32, {2, 3});
  expect_unchanged<identity_elimination>(b.build_model());
}

TEST(IdentityElimination, ExplainedWhereTheNameMustLiveOn) {
  // No near miss by default; asked to explain, the rule names the graph output.
  model_builder b;
  auto x = b.input("x", dtype::float32, {2, 3});
  b.output(b.op("Identity", {b.op("Relu", {x})}, {}, {.name = "id"}), dtype::float32, {2, 3});
  fusekit::model m = b.build_model();
  const auto report = fuse_compiled<identity_elimination>(m, {.explain = true});
  ASSERT_EQ(report.near_misses.size(), 1u);
  EXPECT_EQ(report.near_misses[0].reason,
            "Identity 'id': writes a graph output, whose name must live on");
}

// x [2, 3] ── op(x, the given int64 inputs) ── Relu ── out
fusekit::model viewed_by(std::string_view op, std::vector<std::vector<double>> inputs,
                         fusekit::build::shape_spec out = {2, 3}) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, 3});
  std::vector<value> args = {x};
  for (const auto& v : inputs)
    args.push_back(b.initializer(dtype::int64, {std::int64_t(v.size())}, v));
  b.output(b.op("Relu", {b.op(op, args)}), dtype::float32, out);
  return b.build_model();
}

TEST(NoopElimination, AViewToItsInputsOwnShapeGoes) {
  for (fusekit::model m :
       {viewed_by("Reshape", {{2, 3}}), viewed_by("Reshape", {{2, -1}}), viewed_by("Expand", {{1}}),
        viewed_by("Tile", {{1, 1}}), viewed_by("Slice", {{0}, {1 << 30}, {1}}),
        viewed_by("Pad", {{0, 0, 0, 0}}), viewed_by("Split", {{2}})}) {
    fuse_compiled<noop_elimination>(m);
    ASSERT_EQ(m.proto.graph().node_size(), 1);
    EXPECT_EQ(m.proto.graph().node(0).input(0), "x");
    fusekit::rewrite::check_invariants(m);
  }
}

TEST(NoopElimination, NearMissAReshapeToAnotherShape) {
  // [3, 2] holds x's elements under other dims.
  expect_unchanged<noop_elimination>(viewed_by("Reshape", {{3, 2}}, {3, 2}));
}

TEST(NoopElimination, NearMissASliceThatReverses) {
  // Step −1 keeps the dims and reverses the elements.
  expect_unchanged<noop_elimination>(
      viewed_by("Slice", {{-1}, {-(std::int64_t(1) << 40)}, {1}, {-1}}));
}

TEST(NoopElimination, NearMissPadsThatCancel) {
  // One column added on the left and one taken on the right: the dims stay, the elements move.
  expect_unchanged<noop_elimination>(viewed_by("Pad", {{0, 1, 0, -1}}));
}

TEST(NoopElimination, NearMissASplitWhoseEmptyPieceIsRead) {
  // x whole in the first piece, and an empty second one, which a Shape reads: the node stays.
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, 3});
  auto pieces = b.ops("Split", {x, b.initializer(dtype::int64, {2}, {2, 0})}, {}, {.outputs = 2});
  b.output(b.op("Relu", {pieces[0]}), dtype::float32, {2, 3});
  b.output(b.op("Shape", {pieces[1]}), dtype::int64, {2});
  expect_unchanged<noop_elimination>(b.build_model());
}

TEST(NoopElimination, NearMissAnExpandThatGrows) {
  // Expanded to [4, 2, 3]: a new axis.
  expect_unchanged<noop_elimination>(viewed_by("Expand", {{4, 2, 3}}, {4, 2, 3}));
}

// x [2, 3] of `type` ── op(x, c) (or op(c, x) where `first`) ── Relu ── out; c the scalar `value`
// of x's type, of rank `rank`.
fusekit::model by_a_scalar(std::string_view op, double value, bool first = false,
                           dtype type = dtype::float32, std::size_t rank = 0) {
  model_builder b(17);
  auto x = b.input("x", type, {2, 3});
  auto c = b.initializer(type, std::vector<std::int64_t>(rank, 1), {value});
  auto y = first ? b.op(op, {c, x}) : b.op(op, {x, c});
  b.output(b.op("Relu", {y}), type,
           rank > 2 ? fusekit::build::shape_spec{1, 2, 3} : fusekit::build::shape_spec{2, 3});
  return b.build_model();
}

TEST(NoopElimination, ArithmeticByItsIdentityGoes) {
  for (fusekit::model m :
       {by_a_scalar("Mul", 1), by_a_scalar("Mul", 1, true), by_a_scalar("Div", 1),
        by_a_scalar("Sub", 0), by_a_scalar("Mul", 1, false, dtype::float16, 2),
        by_a_scalar("Mul", 1, true, dtype::int64)}) {
    fuse_compiled<noop_elimination>(m);
    ASSERT_EQ(m.proto.graph().node_size(), 1);
    EXPECT_EQ(m.proto.graph().node(0).input(0), "x");
    fusekit::rewrite::check_invariants(m);
  }
}

TEST(NoopElimination, NearMissPlusZero) {
  // −0 + 0 is +0: in a float type the sign of a zero changes.
  expect_unchanged<noop_elimination>(by_a_scalar("Add", 0));
}

TEST(NoopElimination, NearMissAScalarOfMoreDims) {
  // A [1, 1, 1] one broadcasts x to [1, 2, 3]: the dims change.
  expect_unchanged<noop_elimination>(by_a_scalar("Mul", 1, false, dtype::float32, 3));
}

TEST(NoopElimination, NearMissOneDividedByX) {
  // 1 / x is x's reciprocal, not x.
  expect_unchanged<noop_elimination>(by_a_scalar("Div", 1, true));
}

TEST(NoopElimination, NearMissAlmostOne) {
  // The float nearest 1 above it still scales x.
  expect_unchanged<noop_elimination>(by_a_scalar("Mul", 1.0000001192092896));
}

// x [2, 3] ── Mul(w, x) ── Relu ── out, w [3] the `weight`: a norm's scale.
fusekit::model weighted(std::vector<double> weight) {
  model_builder b(17);
  auto x = b.input("x", dtype::float16, {2, 3});
  auto w = b.initializer(dtype::float16, {3}, weight);
  b.output(b.op("Relu", {b.op("Mul", {w, x})}), dtype::float16, {2, 3});
  return b.build_model();
}

TEST(NoopElimination, AWeightOfOnesGoes) {
  fusekit::model m = weighted({1, 1, 1});
  fuse_compiled<noop_elimination>(m);
  ASSERT_EQ(m.proto.graph().node_size(), 1);
  EXPECT_EQ(m.proto.graph().node(0).input(0), "x");
  fusekit::rewrite::check_invariants(m);
}

TEST(NoopElimination, NearMissAWeightWithAnElementNotOne) {
  // Element 1 scales x's second column.
  expect_unchanged<noop_elimination>(weighted({1, 2, 1}));
}

// Where(Not(mask), x, fill) ── out, the Not read elsewhere too where `shared`.
fusekit::model masked_fill(bool shared) {
  model_builder b(17);
  auto mask = b.input("mask", dtype::boolean, {2, 3});
  auto x = b.input("x", dtype::float32, {2, 3});
  auto kept = b.op("Not", {mask});
  b.output(b.op("Where", {kept, x, b.scalar(dtype::float32, -100)}), dtype::float32, {2, 3});
  if (shared)
    b.output(b.op("Cast", {kept}, {{"to", std::int64_t(dtype::float32)}}), dtype::float32, {2, 3});
  return b.build_model();
}

TEST(NotElimination, TheBranchesSwapForTheCondition) {
  fusekit::model m = masked_fill(false);
  fuse_compiled<not_elimination>(m);
  ASSERT_EQ(m.proto.graph().node_size(), 1);
  const auto& where = m.proto.graph().node(0);
  EXPECT_EQ(where.op_type(), "Where");
  EXPECT_EQ(where.input(0), "mask");
  EXPECT_EQ(where.input(2), "x");
  fusekit::rewrite::check_invariants(m);
}

TEST(NotElimination, NearMissANotReadElsewhere) {
  // Its other reader keeps the Not: swapping would save no node.
  expect_unchanged<not_elimination>(masked_fill(true));
}

// x [2, 3] float32 ── CastLike(x, like) ── Relu ── out, `like` the output of `like_op`.
fusekit::model cast_like(std::string_view like_op, std::string_view domain = {}) {
  model_builder b(17);
  if (!domain.empty()) b.opset_import(std::string(domain), 1);
  auto x = b.input("x", dtype::float32, {2, 3});
  auto like =
      b.op(like_op, {b.input("h", dtype::float16, {4})}, {}, {.domain = std::string(domain)});
  auto y = b.op("CastLike", {x, like}, {}, {.name = "c"});
  b.output(b.op("Relu", {y}), dtype::float16, {2, 3});
  return b.build_model();
}

TEST(CastLikeToCast, TheTypeOfTheSecondInputIsStated) {
  fusekit::model m = cast_like("Neg");
  fuse_compiled<castlike_to_cast>(m);
  // The Neg was read for its type alone: nothing reads it now.
  EXPECT_EQ(nodes_of(m), "Cast(x)->c Relu(c)->Relu_1 ");
  EXPECT_EQ(m.proto.graph().node(0).attribute(0).i(), int(dtype::float16));
  fusekit::rewrite::check_invariants(m);
}

TEST(CastLikeToCast, NearMissASecondInputOfUnknownType) {
  // An op of a domain the model does not describe: nothing says what type its output has.
  expect_unchanged<castlike_to_cast>(cast_like("Mystery", "com.example"));
}

TEST(ConstantToInitializer, TheTensorKeepsTheOutputsName) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {2, 3});
  auto c = b.constant(dtype::float32, {3}, {1, 2, 3});
  b.output(b.op("Add", {x, c}), dtype::float32, {2, 3});
  fusekit::model m = b.build_model();
  const std::string name = m.proto.graph().node(0).output(0);
  onnx::TensorProto tensor = m.proto.graph().node(0).attribute(0).t();
  tensor.set_name(name);
  const auto report = fuse_compiled<constant_to_initializer>(m);
  EXPECT_EQ(nodes_of(m), "Add(x, " + name + ")->Add_1 ");
  ASSERT_EQ(m.proto.graph().initializer_size(), 1);
  EXPECT_EQ(m.proto.graph().initializer(0).SerializeAsString(), tensor.SerializeAsString());
  EXPECT_EQ(report.fusions.size(), 1u);
  fusekit::rewrite::check_invariants(m);
  // Nothing is left to do a second time.
  const auto again = fuse_compiled<constant_to_initializer>(m);
  EXPECT_TRUE(again.fusions.empty());
}

TEST(ConstantToInitializer, NearMissConstantWritingAGraphOutput) {
  // A graph output is written by a node.
  model_builder b;
  b.input("x", dtype::float32, {2, 3});
  b.output(b.constant(dtype::float32, {3}, {1, 2, 3}), dtype::float32, {3});
  expect_unchanged<constant_to_initializer>(b.build_model());
}

TEST(ConstantToInitializer, NearMissBeforeIrVersion4) {
  // Below IR 4 an initializer must also be a graph input, which a user could then override.
  model_builder b(7);
  b.ir_version(3);
  auto x = b.input("x", dtype::float32, {2, 3});
  b.output(b.op("Add", {x, b.constant(dtype::float32, {3}, {1, 2, 3})}), dtype::float32, {2, 3});
  expect_unchanged<constant_to_initializer>(b.build_model());
}

TEST(CleaningRules, TheLibraryCountsTheirEditsInsteadOfListingThem) {
  // Thousands of Constants in a vision export would be thousands of report lines.
  model_builder b;
  auto x = b.input("x", dtype::float32, {2, 3});
  auto y = b.op("Identity", {b.op("Add", {x, b.constant(dtype::float32, {3}, {1, 2, 3})})});
  b.output(b.op("Relu", {y}), dtype::float32, {2, 3});
  fusekit::model m = b.build_model();
  const auto report = fusekit::rules::fuse_all(m);
  EXPECT_EQ(nodes_of(m), "Add(x, Constant_0)->Add_1 Relu(Add_1)->Relu_3 ");
  EXPECT_TRUE(report.fusions.empty());
  const std::string table = report.to_table();
  EXPECT_NE(table.find("identity-elimination: removed Identity 1;\n"), std::string::npos) << table;
  EXPECT_NE(table.find("constant-to-initializer: removed Constant 1;\n"), std::string::npos)
      << table;
  EXPECT_EQ(report.to_json()["cleaned"].dump(),
            R"({"batch-normalization-into-conv":{},)"
            R"("batch-normalization-into-conv-transpose":{},)"
            R"("batch-normalization-into-gemm":{},"bias-into-conv":{},)"
            R"("bias-into-gemm":{},"castlike-to-cast":{},"concat-folding":{},)"
            R"("constant-evaluation":{},"constant-folding":{},)"
            R"("constant-to-initializer":{"Constant":1},)"
            R"("constant-view-folding":{},"dead-node-elimination":{},)"
            R"("duplicate-elimination":{},"factor-folding":{},)"
            R"("identity-elimination":{"Identity":1},"matmul-add-to-gemm":{},)"
            R"("no-op-elimination":{},"not-elimination":{},"pad-into-average-pool":{},)"
            R"("pad-into-conv":{},"pad-into-max-pool":{},)"
            R"("reshape-folding":{},)"
            R"("reshape-target-folding":{},"slice-folding":{},)"
            R"("squeeze-unsqueeze-elimination":{},"transpose-folding":{},)"
            R"("unsqueeze-folding":{}})");
  // Named without them, the library leaves the graph as it is.
  fusekit::model kept = b.build_model();
  const std::string before = kept.proto.SerializeAsString();
  fusekit::rules::fuse_all(kept, {.rules = {"gelu"}});
  EXPECT_EQ(kept.proto.SerializeAsString(), before);
}

TEST(CleaningRules, AConstantWhoseReadersAFusionRemovesLeavesNoInitializer) {
  // The GELU's constants are Constant nodes: made initializers in the pass that fuses the GELU,
  // nothing would read them.
  model_builder b;
  auto x = b.input("x", dtype::float32, {2, 3});
  auto erf = b.op("Erf", {b.op("Div", {x, b.constant_scalar(dtype::float32, 1.4142135)})});
  auto cdf = b.op("Add", {erf, b.constant_scalar(dtype::float32, 1.0)});
  auto half = b.op("Mul", {x, b.constant_scalar(dtype::float32, 0.5)});
  b.output(b.op("Mul", {half, cdf}), dtype::float32, {2, 3});
  fusekit::model m = b.build_model();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(m.proto.graph().node_size(), 1);
  EXPECT_EQ(m.proto.graph().node(0).op_type(), "Gelu");
  EXPECT_EQ(m.proto.graph().initializer_size(), 0);
  fusekit::rewrite::check_invariants(m);
}

}  // namespace
