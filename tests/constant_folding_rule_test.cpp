// Specifications of constant folding (rules/fusekit/rules/constant_folding.hpp): a node whose
// every element the facts prove becomes an initializer, and what only it read goes with it. A
// value the model's inputs decide, one its type cannot hold, and a graph output stay as they are.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fusekit/graph/model_builder.hpp"
#include "fusekit/graph/tensor.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "fusekit/rules/all.hpp"
#include "fusekit/rules/constant_folding.hpp"
#include "test_support.hpp"

namespace {

using fusekit::dtype;
using fusekit::build::model_builder;
using fusekit::build::value;
using fusekit::rules::constant_folding;
using fusekit::rules::constant_view_folding;
using fusekit::testing::fuse_compiled;

std::string ops_of(const fusekit::model& m) {
  std::string out;
  for (const auto& n : m.proto.graph().node()) out += n.op_type() + " ";
  return out;
}

// The elements of the initializer the graph's last node reads as input `slot`.
std::vector<double> read_by_last(const fusekit::model& m, int slot) {
  const auto& graph = m.proto.graph();
  const std::string& name = graph.node(graph.node_size() - 1).input(slot);
  for (const auto& t : graph.initializer())
    if (t.name() == name) {
      const fusekit::tensor_values values(t, {});
      std::vector<double> out;
      for (std::int64_t i = 0; i < values.size(); ++i) out.push_back(values.as_double(i));
      return out;
    }
  ADD_FAILURE() << name << " is no initializer";
  return {};
}

template <class R = constant_folding>
void expect_unchanged(fusekit::model m) {
  const std::string before = m.proto.SerializeAsString();
  const auto report = fuse_compiled<R>(m);
  EXPECT_EQ(m.proto.SerializeAsString(), before);
  EXPECT_TRUE(report.near_misses.empty());
}

// x [1, 3, 8, 8] ── Shape ── Gather(dim) ── Unsqueeze ── Concat(·, [-1]) ── Reshape(x, ·)
fusekit::model flattened_by_its_shape(fusekit::build::shape_spec dims, std::int64_t dim,
                                      fusekit::build::shape_spec out) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, dims);
  auto size = b.op("Gather", {b.op("Shape", {x}), b.scalar(dtype::int64, double(dim))});
  auto row = b.op("Unsqueeze", {size, b.initializer(dtype::int64, {1}, {0})});
  auto target =
      b.op("Concat", {row, b.constant(dtype::int64, {1}, {-1})}, {{"axis", std::int64_t(0)}});
  b.output(b.op("Reshape", {x, target}), dtype::float32, out);
  return b.build_model();
}

TEST(ConstantFolding, AShapeComputationOnStaticDimsFoldsInOnePass) {
  fusekit::model m = flattened_by_its_shape({1, 3, 8, 8}, 2, {8, 24});
  const auto report = fuse_compiled<constant_folding>(m);
  EXPECT_EQ(ops_of(m), "Reshape ");
  EXPECT_EQ(read_by_last(m, 1), (std::vector<double>{8, -1}));
  // The initializers only the chain read went with it.
  EXPECT_EQ(m.proto.graph().initializer_size(), 1);
  fusekit::rewrite::check_invariants(m);
  // Running again changes nothing.
  const std::string once = m.proto.SerializeAsString();
  fuse_compiled<constant_folding>(m);
  EXPECT_EQ(m.proto.SerializeAsString(), once);
  EXPECT_FALSE(report.fusions.empty());
}

TEST(ConstantFolding, NearMissASymbolicDim) {
  // The batch size is the caller's: its Shape is no constant.
  expect_unchanged(flattened_by_its_shape({"N", 3, 8, 8}, 0, {"N", 192}));
}

TEST(ConstantFolding, PartOfAShapeFoldsWhereItsDimsAreNumbers) {
  // Dim 2 is a number even where dim 0 is not: that Gather folds, the Shape stays for nothing.
  fusekit::model m = flattened_by_its_shape({"N", 3, 8, 8}, 2, {8, "M"});
  fuse_compiled<constant_folding>(m);
  EXPECT_EQ(ops_of(m), "Reshape ");
  EXPECT_EQ(read_by_last(m, 1), (std::vector<double>{8, -1}));
}

TEST(ConstantFolding, RangeAndConstantOfShapeFold) {
  model_builder b(17);
  auto x = b.input("x", dtype::int64, {4});
  auto steps = b.op(
      "Range", {b.scalar(dtype::int64, 0), b.scalar(dtype::int64, 8), b.scalar(dtype::int64, 2)});
  auto zeros = b.op("ConstantOfShape", {b.initializer(dtype::int64, {1}, {4})},
                    {{"value", fusekit::build::make_tensor("", dtype::int64, {1}, {5})}});
  b.output(b.op("Add", {x, b.op("Add", {steps, zeros})}), dtype::int64, {4});
  fusekit::model m = b.build_model();
  fuse_compiled<constant_folding>(m);
  EXPECT_EQ(ops_of(m), "Add ");
  EXPECT_EQ(read_by_last(m, 1), (std::vector<double>{5, 7, 9, 11}));
}

TEST(ConstantFolding, FloatsAreRoundedToTheOutputsType) {
  // 1/3 in float16 is 0.333251953125, the nearest half, as ONNX Runtime computes it.
  model_builder b(17);
  auto x = b.input("x", dtype::float16, {1});
  auto third = b.op("Div", {b.scalar(dtype::float16, 1), b.scalar(dtype::float16, 3)});
  b.output(b.op("Mul", {x, third}), dtype::float16, {1});
  fusekit::model m = b.build_model();
  fuse_compiled<constant_folding>(m);
  EXPECT_EQ(ops_of(m), "Mul ");
  EXPECT_EQ(read_by_last(m, 1), (std::vector<double>{0.333251953125}));
  EXPECT_EQ(m.proto.graph().initializer(0).data_type(), int(dtype::float16));
}

TEST(ConstantFolding, NearMissAProductItsTypeCannotHold) {
  // 65536² overflows int32: what a runtime computes there is no number the facts hold.
  model_builder b(17);
  auto x = b.input("x", dtype::int32, {1});
  auto big = b.op("Mul", {b.scalar(dtype::int32, 65536), b.scalar(dtype::int32, 65536)});
  b.output(b.op("Add", {x, big}), dtype::int32, {1});
  expect_unchanged(b.build_model());
}

TEST(ConstantFolding, NearMissAGraphOutput) {
  // The model's interface names it: a node keeps writing it.
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, 3});
  b.output(b.op("Shape", {x}), dtype::int64, {2});
  expect_unchanged(b.build_model());
}

// x ── MatMul(x, Transpose(W)) ── y: a Linear as TorchScript writes it unfolded. W has 80
// elements, more than the facts hold.
fusekit::model linear_of_transposed(fusekit::build::value (*weight)(model_builder&)) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, 8});
  b.output(b.op("MatMul", {x, b.op("Transpose", {weight(b)})}), dtype::float32, {2, 10});
  return b.build_model();
}
std::vector<double> counting(int n) {
  std::vector<double> out;
  for (int i = 0; i < n; ++i) out.push_back(i);
  return out;
}

TEST(ConstantViewFolding, ATransposedWeightIsWrittenTransposed) {
  fusekit::model m = linear_of_transposed([](model_builder& b) {
    return b.initializer(dtype::float32, {10, 8}, counting(80));
  });
  fuse_compiled<constant_view_folding>(m);
  EXPECT_EQ(ops_of(m), "MatMul ");
  const std::vector<double> t = read_by_last(m, 1);
  ASSERT_EQ(t.size(), 80u);
  // Element [i, j] of Wᵀ [8, 10] is W's [j, i], which holds 8j + i.
  EXPECT_EQ(t[1], 8);
  EXPECT_EQ(t[10], 1);
  EXPECT_EQ(t[79], 79);
  ASSERT_EQ(m.proto.graph().initializer_size(), 1);
  EXPECT_EQ(m.proto.graph().initializer(0).dims(0), 8);
}

TEST(ConstantViewFolding, AReshapeKeepsTheElementsUnderOtherDims) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {4, 20});
  auto w = b.op("Reshape", {b.constant(dtype::float32, {80}, counting(80)),
                            b.initializer(dtype::int64, {2}, {4, -1})});
  b.output(b.op("Add", {x, w}), dtype::float32, {4, 20});
  fusekit::model m = b.build_model();
  fuse_compiled<constant_view_folding>(m);
  EXPECT_EQ(ops_of(m), "Add ");
  EXPECT_EQ(read_by_last(m, 1), counting(80));
  EXPECT_EQ(m.proto.graph().initializer(0).dims_size(), 2);
}

TEST(ConstantViewFolding, NearMissATransposeOfAnInput) {
  // What the caller feeds is no constant.
  expect_unchanged<constant_view_folding>(linear_of_transposed([](model_builder& b) {
    return b.input("w", dtype::float32, {10, 8});
  }));
}

TEST(ConstantViewFolding, NearMissAWeightAnotherNodeReadsToo) {
  // Folded, the weight would be stored twice: 80 elements are past what a fold may add.
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, 8});
  auto w = b.initializer(dtype::float32, {10, 8}, counting(80));
  b.output(b.op("MatMul", {x, b.op("Transpose", {w})}), dtype::float32, {2, 10});
  b.output(b.op("Neg", {w}), dtype::float32, {10, 8});
  expect_unchanged<constant_view_folding>(b.build_model());
}

TEST(ConstantFolding, TheLibraryCountsWhatItRemoved) {
  fusekit::model m = flattened_by_its_shape({1, 3, 8, 8}, 2, {8, 24});
  const auto report = fusekit::rules::fuse_all(m);
  EXPECT_EQ(ops_of(m), "Reshape ");
  const std::string table = report.to_table();
  // The Constant [-1] became an initializer in the same pass.
  EXPECT_NE(table.find("constant-folding: removed Concat 1; Gather 1; Shape 1; Unsqueeze 1;\n"),
            std::string::npos)
      << table;
}

}  // namespace
