// Specifications of constant evaluation (rules/fusekit/rules/constant_evaluation.hpp): a value
// computed from constants alone, larger than the facts hold, becomes an initializer where a node
// on the inputs reads it, its whole chain in one pass. A chain holding an op the evaluator lacks,
// a constant it would copy, a result over the limit or an integer a double cannot hold stays.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "fusekit/graph/model_builder.hpp"
#include "fusekit/graph/tensor.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "fusekit/rules/all.hpp"
#include "fusekit/rules/constant_evaluation.hpp"
#include "test_support.hpp"

namespace {

using fusekit::dtype;
using fusekit::build::model_builder;
using fusekit::build::value;
using fusekit::rewrite::fuse;
using fusekit::rules::constant_evaluation;
using fusekit::testing::fuse_compiled;

std::string ops_of(const fusekit::model& m) {
  std::string out;
  for (const auto& n : m.proto.graph().node()) out += n.op_type() + " ";
  return out;
}

const onnx::TensorProto* initializer_named(const fusekit::model& m, const std::string& name) {
  for (const auto& t : m.proto.graph().initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

std::vector<double> elements(const onnx::TensorProto& t) {
  const fusekit::tensor_values values(t, {});
  std::vector<double> out;
  for (std::int64_t i = 0; i < values.size(); ++i) out.push_back(values.as_double(i));
  return out;
}

fusekit::rewrite::report expect_unchanged(fusekit::model m,
                                          const fusekit::rules::fusion_options& o = {}) {
  const std::string before = m.proto.SerializeAsString();
  const std::array rules{fusekit::rules::constant_evaluation_rule(o)};
  const auto report = fuse(m, rules);
  EXPECT_EQ(m.proto.SerializeAsString(), before);
  return report;
}

// A shifted window's mask, as Swin builds it: ids written into a zero image by ScatterND, one
// row band at a time; every pair of positions of equal id 0, else -100.
//
//   ConstantOfShape [12, 12] ── ScatterND(rows 4…7, 1) ── ScatterND(rows 8…11, 2) ── Reshape [144]
//     ── Unsqueeze(1) − Unsqueeze(0) ── Equal(·, 0) ── Where(·, 0, -100) ── Add(scores, ·)
fusekit::model window_mask(int bands = 2) {
  model_builder b(17);
  auto scores = b.input("scores", dtype::float32, {144, 144});
  auto ids = b.op("ConstantOfShape", {b.initializer(dtype::int64, {2}, {12, 12})},
                  {{"value", fusekit::build::make_tensor("", dtype::float32, {1}, {0})}});
  for (int band = 1; band <= bands; ++band) {
    std::vector<double> rows;
    for (int r = 0; r < 12 / (bands + 1); ++r) rows.push_back(band * (12 / (bands + 1)) + r);
    ids = b.op("ScatterND", {ids, b.initializer(dtype::int64, {std::int64_t(rows.size()), 1}, rows),
                             b.initializer(dtype::float32, {std::int64_t(rows.size()), 12},
                                           std::vector<double>(rows.size() * 12, band))});
  }
  auto flat = b.op("Reshape", {ids, b.initializer(dtype::int64, {1}, {144})});
  auto column = b.op("Unsqueeze", {flat, b.initializer(dtype::int64, {1}, {1})});
  auto row = b.op("Unsqueeze", {flat, b.initializer(dtype::int64, {1}, {0})});
  auto same = b.op("Equal", {b.op("Sub", {column, row}), b.scalar(dtype::float32, 0)});
  auto mask = b.op("Where", {same, b.scalar(dtype::float32, 0), b.scalar(dtype::float32, -100)});
  b.output(b.op("Add", {scores, mask}), dtype::float32, {144, 144});
  return b.build_model();
}

TEST(ConstantEvaluation, AShiftedWindowsMaskBecomesOneInitializer) {
  fusekit::model m = window_mask();
  const auto report = fuse_compiled<constant_evaluation>(m);
  EXPECT_EQ(ops_of(m), "Add ");
  const onnx::TensorProto* mask = initializer_named(m, m.proto.graph().node(0).input(1));
  ASSERT_NE(mask, nullptr);
  EXPECT_EQ(mask->data_type(), int(dtype::float32));
  const std::vector<double> values = elements(*mask);
  ASSERT_EQ(values.size(), 144u * 144u);
  // Three bands of 48 positions: 3 · 48² pairs of equal id.
  EXPECT_EQ(std::count(values.begin(), values.end(), 0.0), 3 * 48 * 48);
  EXPECT_EQ(std::count(values.begin(), values.end(), -100.0), 144 * 144 - 3 * 48 * 48);
  EXPECT_EQ(values[0], 0.0);                // (0, 0): band 0 and band 0
  EXPECT_EQ(values[100], -100.0);           // (0, 100): band 0 and band 2
  EXPECT_EQ(values[143 * 144 + 100], 0.0);  // (143, 100): band 2 twice
  // What only the chain read went with it: the mask is the one initializer left.
  EXPECT_EQ(m.proto.graph().initializer_size(), 1);
  EXPECT_TRUE(report.fixed_point);
  fusekit::rewrite::check_invariants(m);
  const std::string once = m.proto.SerializeAsString();
  fuse_compiled<constant_evaluation>(m);
  EXPECT_EQ(m.proto.SerializeAsString(), once);
}

TEST(ConstantEvaluation, AChainDeeperThanThePassesFoldsInOne) {
  // Eleven ScatterNDs, each a band of one row: the driver stops at 8 passes, the chain needs one.
  fusekit::model m = window_mask(11);
  const auto report = fuse_compiled<constant_evaluation>(m);
  EXPECT_EQ(ops_of(m), "Add ");
  EXPECT_TRUE(report.fixed_point);
  const std::vector<double> values =
      elements(*initializer_named(m, m.proto.graph().node(0).input(1)));
  EXPECT_EQ(std::count(values.begin(), values.end(), 0.0), 12 * 12 * 12);
}

TEST(ConstantEvaluation, SlicesGathersAndTransposesOfAConstant) {
  // w [9, 9] ── Transpose ── Slice(rows 1…, step 2) ── Gather([3, -1]) ── Add(x, ·)
  model_builder b(17);
  std::vector<double> w(81);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = double(i);
  auto x = b.input("x", dtype::float32, {2, 9});
  auto t = b.op("Transpose", {b.initializer(dtype::float32, {9, 9}, w)});
  auto sliced =
      b.op("Slice", {t, b.initializer(dtype::int64, {1}, {1}),
                     b.initializer(dtype::int64, {1}, {double(std::int64_t(1) << 62)}),
                     b.initializer(dtype::int64, {1}, {0}), b.initializer(dtype::int64, {1}, {2})});
  auto picked = b.op("Gather", {sliced, b.initializer(dtype::int64, {2}, {3, -1})});
  b.output(b.op("Add", {x, picked}), dtype::float32, {2, 9});
  fusekit::model m = b.build_model();
  fuse_compiled<constant_evaluation>(m);
  EXPECT_EQ(ops_of(m), "Add ");
  // Rows 1, 3, 5, 7 of wᵀ; of them the fourth (7) and the last (7): wᵀ[7][j] = w[j][7] = 9j + 7.
  std::vector<double> expected;
  for (int k = 0; k < 2; ++k)
    for (int j = 0; j < 9; ++j) expected.push_back(9 * j + 7);
  EXPECT_EQ(elements(*initializer_named(m, m.proto.graph().node(0).input(1))), expected);
}

TEST(ConstantEvaluation, ATableThatTwoChainsIndexFoldsInBoth) {
  // Swin's relative position bias: every block gathers from its table by one index of 49².
  // The table and the index are read by two chains, each on constants only: both fold, and
  // then nothing reads them.
  model_builder b(17);
  std::vector<double> table(100), index(70);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = double(i) / 4;
  for (std::size_t i = 0; i < index.size(); ++i) index[i] = double((i * 7) % 20);
  auto t = b.initializer(dtype::float32, {20, 5}, table);
  auto at = b.initializer(dtype::int64, {70}, index);
  auto x = b.input("x", dtype::float32, {70, 5});
  auto first = b.op("Add", {x, b.op("Gather", {t, at})});
  auto second = b.op("Mul", {first, b.op("Neg", {b.op("Gather", {t, at})})});
  b.output(second, dtype::float32, {70, 5});
  fusekit::model m = b.build_model();
  fuse_compiled<constant_evaluation>(m);
  EXPECT_EQ(ops_of(m), "Add Mul ");
  EXPECT_EQ(m.proto.graph().initializer_size(), 2);
  const std::vector<double> gathered =
      elements(*initializer_named(m, m.proto.graph().node(0).input(1)));
  EXPECT_EQ(gathered[5 * 1 + 2], table[7 * 5 + 2]);  // row 1 of the index is 7
}

TEST(ConstantEvaluation, AChainThatEndsAtAGraphOutputFoldsUpToItsWriter) {
  // The Identity writes the model's output, whose name must live on: it stays a node, and what
  // it reads is the chain's end.
  model_builder b(17);
  std::vector<double> data(81);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = double(i);
  auto scattered =
      b.op("ScatterND", {b.initializer(dtype::float32, {9, 9}, data),
                         b.initializer(dtype::int64, {2, 1}, {1, 4}),
                         b.initializer(dtype::float32, {2, 9}, std::vector<double>(18, -1))});
  b.output(b.op("Identity", {scattered}), dtype::float32, {9, 9});
  fusekit::model m = b.build_model();
  fuse_compiled<constant_evaluation>(m);
  EXPECT_EQ(ops_of(m), "Identity ");
  const std::vector<double> values =
      elements(*initializer_named(m, m.proto.graph().node(0).input(0)));
  EXPECT_EQ(values[8], 8);
  EXPECT_EQ(values[9], -1);   // row 1
  EXPECT_EQ(values[40], -1);  // row 4
  EXPECT_EQ(values[45], 45);
}

TEST(ConstantEvaluation, NearMissAnOpTheEvaluatorLacks) {
  // A MatMul of two constants is fixed, but the evaluator computes no MatMul: the chain stays.
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {9, 9});
  auto w = b.initializer(dtype::float32, {9, 9}, std::vector<double>(81, 0.5));
  auto product = b.op("MatMul", {w, w});
  b.output(b.op("Add", {x, b.op("Neg", {product})}), dtype::float32, {9, 9});
  EXPECT_TRUE(expect_unchanged(b.build_model()).near_misses.empty());
}

TEST(ConstantEvaluation, NearMissALargeConstantSomethingElseReads) {
  // w's negation would be a second copy of its 81 elements: w is read by the Mul too.
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {9, 9});
  auto w = b.initializer(dtype::float32, {9, 9}, std::vector<double>(81, 0.5));
  auto y = b.op("Add", {x, b.op("Neg", {w})});
  b.output(b.op("Mul", {y, w}), dtype::float32, {9, 9});
  EXPECT_TRUE(expect_unchanged(b.build_model()).near_misses.empty());
}

TEST(ConstantEvaluation, NearMissAResultOverTheLimit) {
  // The mask is 144 · 144 floats, 82,944 bytes: over a limit of 64 kB.
  fusekit::rules::fusion_options o;
  o.fold_limit_bytes = 65536;
  const auto report = expect_unchanged(window_mask(), o);
  ASSERT_EQ(report.near_misses.size(), 1u);
  EXPECT_EQ(report.near_misses[0].reason,
            "Where 'Where_19' computes 82944 bytes (float32 [144, 144]), over the fold limit of "
            "65536");
}

TEST(ConstantEvaluation, NearMissIntegersADoubleCannotHold) {
  // 2^60 + 1 is no double: the sum is left to the runtime, which computes it in int64.
  model_builder b(17);
  auto x = b.input("x", dtype::int64, {70});
  auto big = b.op("Add", {b.initializer(dtype::int64, {70}, std::vector<double>(70, 0x1p60)),
                          b.scalar(dtype::int64, 1)});
  b.output(b.op("Add", {x, big}), dtype::int64, {70});
  EXPECT_TRUE(expect_unchanged(b.build_model()).near_misses.empty());
}

TEST(ConstantEvaluation, NearMissAValueTheInputsDecide) {
  // x + w is no constant, however large w.
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {9, 9});
  auto w = b.initializer(dtype::float32, {9, 9}, std::vector<double>(81, 0.5));
  b.output(b.op("Relu", {b.op("Add", {x, w})}), dtype::float32, {9, 9});
  EXPECT_TRUE(expect_unchanged(b.build_model()).near_misses.empty());
}

}  // namespace
