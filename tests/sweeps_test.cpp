// Specifications of the sweeps (rules/fusekit/rules/sweeps.hpp): duplicate nodes merged, a chain
// of any length in one walk; nodes and initializers nothing reads removed. A node of another
// result (attributes, a random op, a subgraph) is no duplicate, and a name a graph output or a
// subgraph reads lives on.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fusekit/graph/model_builder.hpp"
#include "fusekit/rewrite/invariants.hpp"
#include "fusekit/rules/all.hpp"
#include "fusekit/rules/sweeps.hpp"

namespace {

using fusekit::dtype;
using fusekit::build::model_builder;
using fusekit::rules::merge_duplicates;
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
