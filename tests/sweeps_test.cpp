// Specifications of the sweeps (rules/fusekit/rules/sweeps.hpp): duplicate nodes merged, a chain
// of any length in one walk, and with them initializers that hold the same tensor and values the
// facts prove equal; nodes and initializers nothing reads removed. A node of another
// result (attributes, a random op, a subgraph) is no duplicate, and a name a graph output or a
// subgraph reads lives on.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "fusekit/graph/model_builder.hpp"
#include "fusekit/rewrite/invariants.hpp"
#include "fusekit/rules/all.hpp"
#include "fusekit/rules/sweeps.hpp"

namespace {

using fusekit::dtype;
using fusekit::build::model_builder;
using fusekit::rules::merge_duplicates;
using fusekit::rules::merge_proven_equal;
using fusekit::rules::remove_dead;
using fusekit::rules::removed_ops;

std::string ops_of(const onnx::GraphProto& g) {
  std::string out;
  for (const auto& n : g.node()) out += n.op_type() + " ";
  return out;
}

// x ── Relu ── Neg ── Add ──┐  twice, the second a copy of the first: y = a + b
fusekit::model repeated_chain(bool second_differs = false) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {4});
  auto one = b.initializer(dtype::float32, {1}, {1});
  auto chain = [&](double alpha) {
    return b.op("Add", {b.op("LeakyRelu", {b.op("Neg", {x})}, {{"alpha", alpha}}), one});
  };
  auto a = chain(0.1);
  auto c = chain(second_differs ? 0.2 : 0.1);
  b.output(b.op("Mul", {a, c}), dtype::float32, {4});
  return b.build_model();
}

TEST(DuplicateElimination, AChainOfAnyLengthMergesInOneWalk) {
  fusekit::model m = repeated_chain();
  removed_ops removed;
  merge_duplicates(*m.proto.mutable_graph(), removed);
  EXPECT_EQ(ops_of(m.proto.graph()), "Neg LeakyRelu Add Mul ");
  // The product reads the first chain's sum twice.
  const auto& mul = m.proto.graph().node(3);
  EXPECT_EQ(mul.input(0), mul.input(1));
  EXPECT_EQ(removed, (removed_ops{{"Add", 1}, {"LeakyRelu", 1}, {"Neg", 1}}));
  fusekit::rewrite::check_invariants(m);
  // Running again changes nothing.
  const std::string once = m.proto.SerializeAsString();
  merge_duplicates(*m.proto.mutable_graph(), removed);
  EXPECT_EQ(m.proto.SerializeAsString(), once);
}

TEST(DuplicateElimination, NearMissAnotherAttribute) {
  // The second LeakyRelu's slope differs: from there on the chains compute other values.
  fusekit::model m = repeated_chain(true);
  removed_ops removed;
  merge_duplicates(*m.proto.mutable_graph(), removed);
  EXPECT_EQ(ops_of(m.proto.graph()), "Neg LeakyRelu Add LeakyRelu Add Mul ");
  EXPECT_EQ(removed, (removed_ops{{"Neg", 1}}));
}

TEST(DuplicateElimination, NearMissRandomOps) {
  // Two draws of the same distribution are two samples, not one.
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {4});
  b.output(b.op("Add", {b.op("RandomNormalLike", {x}), b.op("RandomNormalLike", {x})}),
           dtype::float32, {4});
  fusekit::model m = b.build_model();
  const std::string before = m.proto.SerializeAsString();
  removed_ops removed;
  merge_duplicates(*m.proto.mutable_graph(), removed);
  EXPECT_EQ(m.proto.SerializeAsString(), before);
}

TEST(DuplicateElimination, NearMissAGraphOutputsName) {
  // Both copies are graph outputs: each name must live on.
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {4});
  b.output(b.op("Relu", {x}), dtype::float32, {4});
  b.output(b.op("Relu", {x}), dtype::float32, {4});
  fusekit::model m = b.build_model();
  removed_ops removed;
  merge_duplicates(*m.proto.mutable_graph(), removed);
  EXPECT_EQ(ops_of(m.proto.graph()), "Relu Relu ");
}

// x ── Add(c1) and x ── Add(c2) ── Mul, c1 and c2 initializers holding `first` and `second`.
fusekit::model added_twice(double first, double second) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {4});
  auto a = b.op("Add", {x, b.initializer(dtype::float32, {1}, {first})});
  auto c = b.op("Add", {x, b.initializer(dtype::float32, {1}, {second})});
  b.output(b.op("Mul", {a, c}), dtype::float32, {4});
  return b.build_model();
}

TEST(DuplicateElimination, InitializersOfTheSameTensorAreOne) {
  // Two initializers of one value, one per reader: the second Add is the first.
  fusekit::model m = added_twice(2, 2);
  removed_ops removed;
  merge_duplicates(*m.proto.mutable_graph(), removed);
  EXPECT_EQ(ops_of(m.proto.graph()), "Add Mul ");
  EXPECT_EQ(removed, (removed_ops{{"Add", 1}, {"initializer", 1}}));
  EXPECT_EQ(m.proto.graph().initializer_size(), 1);
  fusekit::rewrite::check_invariants(m);
}

TEST(DuplicateElimination, AnInitializerInAnExternalFileIsReadToo) {
  // The second constant's bytes lie beside the model: the result must not depend on where.
  fusekit::model m = added_twice(2, 2);
  const std::filesystem::path directory = std::filesystem::path(::testing::TempDir()) / "sweeps";
  std::filesystem::create_directories(directory);
  onnx::TensorProto& t = *m.proto.mutable_graph()->mutable_initializer(1);
  {
    std::ofstream out(directory / "weights.bin", std::ios::binary);
    out << t.raw_data();
  }
  const std::string length = std::to_string(t.raw_data().size());
  t.clear_raw_data();
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  for (const auto& [key, entry] : {std::pair<std::string, std::string>{"location", "weights.bin"},
                                   {"offset", "0"},
                                   {"length", length}}) {
    auto& e = *t.add_external_data();
    e.set_key(key);
    e.set_value(entry);
  }
  removed_ops removed;
  merge_duplicates(*m.proto.mutable_graph(), removed, directory);
  EXPECT_EQ(ops_of(m.proto.graph()), "Add Mul ");
  EXPECT_EQ(removed, (removed_ops{{"Add", 1}, {"initializer", 1}}));
}

TEST(DuplicateElimination, NearMissInitializersOfOtherValues) {
  // 2 and 3: the Adds compute other sums.
  fusekit::model m = added_twice(2, 3);
  removed_ops removed;
  merge_duplicates(*m.proto.mutable_graph(), removed);
  EXPECT_EQ(ops_of(m.proto.graph()), "Add Add Mul ");
}

TEST(DuplicateElimination, NearMissAnInitializerTheCallerMayReplace) {
  // The second constant is also a graph input: a caller may feed another value in its place.
  fusekit::model m = added_twice(2, 2);
  auto& g = *m.proto.mutable_graph();
  auto& in = *g.add_input();
  in.set_name(g.initializer(1).name());
  in.mutable_type()->mutable_tensor_type()->set_elem_type(int(dtype::float32));
  removed_ops removed;
  merge_duplicates(g, removed);
  EXPECT_EQ(ops_of(g), "Add Add Mul ");
}

// a [B, 4] ── Shape ── Gather(0) ── Unsqueeze ─┐
// b [`dim`, 4] ── Shape ── Gather(0) ── Unsqueeze ── Concat ── out
fusekit::model batch_read_twice(const char* dim) {
  model_builder b(17);
  auto x = b.input("a", dtype::float32, {"B", 4});
  auto y = b.input("b", dtype::float32, {dim, 4});
  auto zero = b.initializer(dtype::int64, {}, {0});
  auto axes = b.initializer(dtype::int64, {1}, {0});
  auto batch = [&](fusekit::build::value v) {
    return b.op("Unsqueeze", {b.op("Gather", {b.op("Shape", {v}), zero}, {{"axis", 0}}), axes});
  };
  b.output(b.op("Concat", {batch(x), batch(y)}, {{"axis", 0}}), dtype::int64, {2});
  return b.build_model();
}

TEST(DuplicateElimination, ValuesTheFactsProveEqualAreOne) {
  // Both batch sizes are B: the Concat reads the first twice, and the second's nodes go.
  fusekit::model m = batch_read_twice("B");
  removed_ops removed;
  merge_proven_equal(m, removed);
  EXPECT_EQ(removed, (removed_ops{{"Gather", 1}, {"Shape", 1}, {"Unsqueeze", 1}}));
  const auto& concat = m.proto.graph().node(m.proto.graph().node_size() - 1);
  EXPECT_EQ(concat.input(0), concat.input(1));
  fusekit::rewrite::check_invariants(m);
}

TEST(DuplicateElimination, NearMissDimsNotProvenEqual) {
  // b's first dim is C: nothing proves it is a's B.
  fusekit::model m = batch_read_twice("C");
  const std::string before = m.proto.SerializeAsString();
  removed_ops removed;
  merge_proven_equal(m, removed);
  EXPECT_EQ(m.proto.SerializeAsString(), before);
}

TEST(DuplicateElimination, NearMissAProvenEqualGraphOutput) {
  // Each Shape is a graph output: both names must live on.
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {"B", 4});
  b.output(b.op("Shape", {x}), dtype::int64, {2});
  b.output(b.op("Shape", {b.op("Relu", {x})}), dtype::int64, {2});
  fusekit::model m = b.build_model();
  const std::string before = m.proto.SerializeAsString();
  removed_ops removed;
  merge_proven_equal(m, removed);
  EXPECT_EQ(m.proto.SerializeAsString(), before);
}

TEST(DeadNodeElimination, WhatNothingReadsGoesWithWhatOnlyItRead) {
  // x ── Neg ── Relu (read by nothing), and an initializer nothing reads.
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {4});
  auto w = b.initializer(dtype::float32, {4}, {1, 2, 3, 4});
  b.op("Relu", {b.op("Add", {b.op("Neg", {x}), w})});
  b.initializer(dtype::float32, {2}, {5, 6});
  b.output(b.op("Abs", {x}), dtype::float32, {4});
  fusekit::model m = b.build_model();
  removed_ops removed;
  EXPECT_EQ(remove_dead(*m.proto.mutable_graph(), removed), 2);
  EXPECT_EQ(ops_of(m.proto.graph()), "Abs ");
  EXPECT_EQ(removed, (removed_ops{{"Add", 1}, {"Neg", 1}, {"Relu", 1}}));
  EXPECT_EQ(m.proto.graph().initializer_size(), 0);
  fusekit::rewrite::check_invariants(m);
}

TEST(DeadNodeElimination, NearMissAGraphInputsInitializer) {
  // An initializer that is also a graph input is the caller's default to override: it stays.
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {4});
  b.output(b.op("Abs", {x}), dtype::float32, {4});
  fusekit::model m = b.build_model();
  auto& g = *m.proto.mutable_graph();
  auto& t = *g.add_initializer();
  t.set_name("scale");
  t.set_data_type(int(dtype::float32));
  t.add_float_data(2);
  auto& in = *g.add_input();
  in.set_name("scale");
  in.mutable_type()->mutable_tensor_type()->set_elem_type(int(dtype::float32));
  removed_ops removed;
  EXPECT_EQ(remove_dead(g, removed), 0);
  EXPECT_EQ(g.initializer_size(), 1);
}

// x ── Abs ── y in a local function `outer`, called once, and an `unused` copy nothing calls;
// `outer`'s body calls `inner` where `nested`.
fusekit::model with_functions(bool nested) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {4});
  b.output(b.op("Abs", {x}), dtype::float32, {4});
  fusekit::model m = b.build_model();
  fusekit::build::move_into_local_function(m.proto, "inner", "local", "call_inner");
  if (nested) fusekit::build::move_into_local_function(m.proto, "outer", "local", "call_outer");
  *m.proto.add_functions() = m.proto.functions(0);
  m.proto.mutable_functions(m.proto.functions_size() - 1)->set_name("unused");
  return m;
}

TEST(DeadNodeElimination, AFunctionNoNodeCallsGoes) {
  // Only `unused` goes: `inner` is called from `outer`'s body, which the graph calls.
  for (bool nested : {false, true}) {
    fusekit::model m = with_functions(nested);
    EXPECT_EQ(fusekit::rules::remove_uncalled_functions(m.proto), 1) << nested;
    std::string kept;
    for (const auto& f : m.proto.functions()) kept += f.name() + " ";
    EXPECT_EQ(kept, nested ? "inner outer " : "inner ");
    fusekit::rewrite::check_invariants(m);
  }
}

TEST(Sweeps, NodesOutOfOrderAreReadAsTheirEdgesSay) {
  // The model lists the readers before their producers, as some converters write: the sweeps
  // follow the edges, not the list. Reversed, the copy comes first and stays.
  fusekit::model m = repeated_chain();
  auto& nodes = *m.proto.mutable_graph()->mutable_node();
  std::reverse(nodes.begin(), nodes.end());
  removed_ops merged, dead;
  merge_duplicates(*m.proto.mutable_graph(), merged);
  EXPECT_EQ(merged, (removed_ops{{"Add", 1}, {"LeakyRelu", 1}, {"Neg", 1}}));
  EXPECT_EQ(remove_dead(*m.proto.mutable_graph(), dead), 0);
  EXPECT_TRUE(dead.empty());
  EXPECT_EQ(ops_of(m.proto.graph()), "Mul Add LeakyRelu Neg ");
  const auto& mul = m.proto.graph().node(0);
  EXPECT_EQ(mul.input(0), mul.input(1));
  EXPECT_EQ(m.proto.graph().node(1).output(0), mul.input(0));
}

TEST(Sweeps, FuseAllRunsThemByNameAndCountsWhatWent) {
  // The chain's copy merges, and then its nodes, read by nothing, go.
  fusekit::model m = repeated_chain();
  const auto report = fusekit::rules::fuse_all(m);
  EXPECT_EQ(ops_of(m.proto.graph()), "Neg LeakyRelu Add Mul ");
  EXPECT_EQ(report.cleaned.at("duplicate-elimination"),
            (removed_ops{{"Add", 1}, {"LeakyRelu", 1}, {"Neg", 1}}));
  EXPECT_TRUE(report.cleaned.at("dead-node-elimination").empty());
  // Left out by name, they leave the model as it is.
  fusekit::model kept = repeated_chain();
  const std::string before = kept.proto.SerializeAsString();
  fusekit::rules::fuse_all(kept, {.rules = {"gelu", "dead-node-elimination"}});
  EXPECT_EQ(kept.proto.SerializeAsString(), before);
}

}  // namespace

TEST(Sweeps, TheRulesRunAgainOnWhatTheyLeave) {
  // Where(Not(mask), 0, -inf) twice, each reading its own copy of the constants, as each layer of
  // a TorchScript export does: not-elimination passes over a Not read twice. The sweep makes the
  // copies one; the Not then has one reader, and the rules run again to a fixed point.
  model_builder b(17);
  auto mask = b.input("mask", dtype::boolean, {4});
  auto flipped = b.op("Not", {mask});
  auto bias = [&] {
    return b.op("Where", {flipped, b.scalar(dtype::float32, 0), b.scalar(dtype::float32, -1e4)});
  };
  b.output(b.op("Add", {b.input("x", dtype::float32, {4}), bias()}), dtype::float32, {4});
  b.output(b.op("Add", {b.input("y", dtype::float32, {4}), bias()}), dtype::float32, {4});
  fusekit::model m = b.build_model();
  const auto report = fusekit::rules::fuse_all(m);
  EXPECT_EQ(ops_of(m.proto.graph()), "Where Add Add ");
  EXPECT_EQ(report.cleaned.at("not-elimination"), (removed_ops{{"Not", 1}, {"Where", 1}}));
  EXPECT_EQ(report.cleaned.at("duplicate-elimination"),
            (removed_ops{{"Where", 1}, {"initializer", 2}}));
  // A second run changes nothing.
  const std::string once = m.proto.SerializeAsString();
  fusekit::rules::fuse_all(m);
  EXPECT_EQ(m.proto.SerializeAsString(), once);
}

TEST(Sweeps, ADuplicateADeadSubgraphReadMergesInTheSameRun) {
  // b = Neg(x) copies a = Neg(x), but the branch of an If nothing reads reads b by name, so b
  // lives on until the If goes. The sweeps then run again: a second run changes nothing.
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {4});
  auto first = b.op("Neg", {x});
  auto copy = b.op("Neg", {x});
  b.output(b.op("Mul", {first, copy}), dtype::float32, {4});
  auto then_branch = b.subgraph("then");
  then_branch.output(then_branch.op("Abs", {copy}), dtype::float32);
  auto else_branch = b.subgraph("else");
  else_branch.output(else_branch.op("Relu", {copy}), dtype::float32);
  b.op("If", {b.input("flag", dtype::boolean, {})},
       {{"then_branch", then_branch.proto()}, {"else_branch", else_branch.proto()}});
  fusekit::model m = b.build_model();
  fusekit::rules::fuse_all(m);
  EXPECT_EQ(ops_of(m.proto.graph()), "Neg Mul ");
  const std::string once = m.proto.SerializeAsString();
  fusekit::rules::fuse_all(m);
  EXPECT_EQ(m.proto.SerializeAsString(), once);
}

TEST(Sweeps, SizesOfTwoNodesMergedAsAlikeMergeInTheSameRun) {
  // NonZero(mask) twice, as HunyuanVideo 1.5's TorchScript export writes for each text: the facts
  // name each count a dim of its own until the copies are one; then the sizes read from each,
  // along paths no two nodes spell alike, are proven equal. A second run changes nothing.
  model_builder b(17);
  auto mask = b.input("mask", dtype::boolean, {2, 8});
  auto first = b.op("NonZero", {mask});
  auto copy = b.op("NonZero", {mask});
  auto count = b.op("Gather", {b.op("Shape", {first}), b.scalar(dtype::int64, 1)});
  auto transposed = b.op("Transpose", {copy}, {{"perm", std::vector<std::int64_t>{1, 0}}});
  auto count_again = b.op("Gather", {b.op("Shape", {transposed}), b.scalar(dtype::int64, 0)});
  b.output(b.op("Add", {count, count_again}), dtype::int64, {});
  fusekit::model m = b.build_model();
  fusekit::rules::fuse_all(m);
  EXPECT_EQ(ops_of(m.proto.graph()), "NonZero Shape Gather Add ");
  const auto& sum = m.proto.graph().node(m.proto.graph().node_size() - 1);
  EXPECT_EQ(sum.input(0), sum.input(1));
  const std::string once = m.proto.SerializeAsString();
  fusekit::rules::fuse_all(m);
  EXPECT_EQ(m.proto.SerializeAsString(), once);
}

TEST(Sweeps, TheModelAsItCameIsSurveyedOnce) {
  // The model holds a fused Attention and a node nothing reads: the sweep changes the model
  // before any rule does, and the rules look again; the report names the fused op once.
  model_builder b(23);
  auto q = b.input("q", dtype::float32, {1, 2, 3, 4});
  auto k = b.input("k", dtype::float32, {1, 2, 3, 4});
  auto v = b.input("v", dtype::float32, {1, 2, 3, 4});
  b.output(b.op("Attention", {q, k, v}, {}, {.name = "attention"}), dtype::float32, {1, 2, 3, 4});
  b.op("Neg", {q});
  fusekit::model m = b.build_model();
  const auto report = fusekit::rules::fuse_all(m);
  EXPECT_EQ(ops_of(m.proto.graph()), "Attention ");
  EXPECT_EQ(report.already_fused, std::vector<std::string>{"Attention 'attention'"});
}
