// Rotary position embeddings in the halves form (rotate_half), fused by the bundled library into
// ONNX Runtime's RotaryEmbedding or ONNX's RotaryEmbedding-23; then near misses, each with the
// reason the report gives. ONNX Runtime parity on the real exports is
// tests/python/test_conformance.py.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fusekit/graph/model_builder.hpp"
#include "fusekit/rules/all.hpp"
#include "test_support.hpp"

namespace {

using fusekit::dtype;
using fusekit::model;
using fusekit::build::model_builder;
using fusekit::build::value;
using fusekit::testing::bytes;
using fusekit::testing::op_types;
using target = fusekit::rules::target;

// q (batch 2, 4 heads, S positions, head size 8) rotated as transformers' apply_rotary_pos_emb
// writes it: q·cos + rotate_half(q)·sin, cos and sin unsqueezed at the heads.
struct rotary_spec {
  enum class angles {
    computed,        // cos(cat(θ, θ)), θ [batch, S, 4] an input: LLaMA's rotary embedding
    cached,          // Gather(a constant cache of equal halves, positions): GPT-NeoX's
    cached_unequal,  // the same cache with one element off
    input,           // cos and sin inputs of the model: nothing proves their halves
    per_head,        // cos [1, 4, S, 8]: an angle per head, which the op does not take
  } source = angles::computed;
  dtype type = dtype::float32;
  int opset = 17;
  std::int64_t lower_to = 4;  // where the lower half's Slice ends
  std::int64_t angle_batch = 2;

  model build() const {
    model_builder b(opset);
    value q = b.input("q", type, {2, 4, "S", 8});
    auto ints = [&](std::vector<double> v) {
      return b.initializer(dtype::int64, {std::int64_t(v.size())}, v);
    };
    value cos, sin;
    switch (source) {
      case angles::computed: {
        value theta = b.input("theta", type, {angle_batch, "S", 4});
        value both = b.op("Concat", {theta, theta}, {{"axis", -1}}, {.name = "emb"});
        cos = b.op("Cos", {both}, {}, {.name = "cos"});
        sin = b.op("Sin", {both}, {}, {.name = "sin"});
        break;
      }
      case angles::cached:
      case angles::cached_unequal: {
        std::vector<double> c, s;
        for (int p = 0; p < 16; ++p)
          for (int i = 0; i < 8; ++i) {
            c.push_back(0.1 * p + 0.01 * (i % 4));
            s.push_back(-0.1 * p + 0.02 * (i % 4));
          }
        if (source == angles::cached_unequal) c[2 * 8 + 5] = 7.0;
        value positions = b.input("positions", dtype::int64, {angle_batch, "S"});
        cos = b.op("Gather", {b.initializer("cos_cache", type, {16, 8}, c), positions}, {},
                   {.name = "cos"});
        sin = b.op("Gather", {b.initializer("sin_cache", type, {16, 8}, s), positions}, {},
                   {.name = "sin"});
        break;
      }
      case angles::input:
        cos = b.input("cos", type, {angle_batch, "S", 8});
        sin = b.input("sin", type, {angle_batch, "S", 8});
        break;
      case angles::per_head:
        cos = b.input("cos", type, {1, 4, "S", 8});
        sin = b.input("sin", type, {1, 4, "S", 8});
        break;
    }
    if (source != angles::per_head) {
      cos = b.op("Unsqueeze", {cos, ints({1})}, {}, {.name = "cos_heads"});
      sin = b.op("Unsqueeze", {sin, ints({1})}, {}, {.name = "sin_heads"});
    }
    value lower =
        b.op("Slice", {q, ints({0}), ints({double(lower_to)}), ints({-1})}, {}, {.name = "lower"});
    value upper =
        b.op("Slice", {q, ints({4}), ints({9.2e18}), ints({3}), ints({1})}, {}, {.name = "upper"});
    value rotated = b.op("Concat", {b.op("Neg", {upper}), lower}, {{"axis", -1}});
    value y =
        b.op("Add", {b.op("Mul", {q, cos}), b.op("Mul", {rotated, sin})}, {}, {.name = "q_embed"});
    b.output(y, type, {2, 4, "S", 8});
    return b.build_model();
  }
};

fusekit::rules::fusion_options on(target t) {
  fusekit::rules::fusion_options o;
  o.fused_target = t;
  return o;
}

std::string near_misses(model m, target t = target::ort) {
  const std::string before = bytes(m);
  const auto report = fusekit::rules::fuse_all(m, {.rules = {"rotary-embedding"}}, on(t));
  EXPECT_EQ(bytes(m), before);
  EXPECT_TRUE(report.fusions.empty());
  std::string out;
  for (const auto& n : report.near_misses) out += n.anchor + ": " + n.reason + "\n";
  return out;
}

// The op, and where it reads its cache and positions from (the rest are views and a Range).
std::vector<std::string> rotary_ops(const model& m) {
  std::vector<std::string> out;
  for (const auto& n : m.proto.graph().node())
    if (n.op_type() == "RotaryEmbedding" || n.op_type() == "Expand")
      out.push_back((n.domain().empty() ? "" : n.domain() + ".") + n.op_type() + "(" + n.input(0) +
                    ")");
  return out;
}

TEST(RotaryEmbeddingRule, ComputedAnglesBecomeOneOpReadingTheModelsOwnAngles) {
  model m = rotary_spec{}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].rule, "rotary-embedding");
  EXPECT_EQ(report.fusions[0].params.dump(), R"({"form":"halves"})");
  // Angles with a row per batch row: the positions index the cache row by row, no Expand.
  EXPECT_EQ(rotary_ops(m), std::vector<std::string>{"com.microsoft.RotaryEmbedding(q)"});
  EXPECT_TRUE(report.near_misses.empty());
}

TEST(RotaryEmbeddingRule, AnglesOfOneRowAreExpandedOverTheBatch) {
  model m = rotary_spec{.angle_batch = 1}.build();
  fusekit::rules::fuse_all(m);
  const auto ops = rotary_ops(m);
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[1], "com.microsoft.RotaryEmbedding(q)");
  EXPECT_EQ(ops[0].substr(0, 7), "Expand(");
}

TEST(RotaryEmbeddingRule, ACacheOfEqualHalvesGatheredByPosition) {
  model m = rotary_spec{.source = rotary_spec::angles::cached}.build();
  const auto report = fusekit::rules::fuse_all(m);
  EXPECT_EQ(report.fusions.size(), 1u);
}

TEST(RotaryEmbeddingRule, TargetOnnxWritesRotaryEmbeddingTwentyThree) {
  model m = rotary_spec{.opset = 23}.build();
  fusekit::rules::fuse_all(m, {}, on(target::onnx));
  EXPECT_EQ(rotary_ops(m), std::vector<std::string>{"RotaryEmbedding(q)"});
}

TEST(RotaryEmbeddingRule, RunningTwiceChangesNothingTheSecondTime) {
  model m = rotary_spec{}.build();
  fusekit::rules::fuse_all(m);
  const std::string once = bytes(m);
  const auto again = fusekit::rules::fuse_all(m);
  EXPECT_TRUE(again.fusions.empty());
  EXPECT_EQ(bytes(m), once);
}

TEST(RotaryEmbeddingRuleNearMiss, AnglesTheModelIsGiven) {
  // Nothing says a given cos has equal halves; the op would read only the lower one.
  EXPECT_EQ(near_misses(rotary_spec{.source = rotary_spec::angles::input}.build()),
            "Add 'q_embed': the halves of graph input 'cos' are not proven equal: it is an input "
            "of the model: RotaryEmbedding reads one angle for each rotated pair (i, i + 4)\n");
}

TEST(RotaryEmbeddingRuleNearMiss, ACacheWhoseHalvesDiffer) {
  // One element of the upper half differs from its pair's: the model rotates by both angles.
  EXPECT_EQ(near_misses(rotary_spec{.source = rotary_spec::angles::cached_unequal}.build()),
            "Add 'q_embed': the halves of initializer 'cos_cache' differ: element 17 is not "
            "element 21: RotaryEmbedding reads one angle for each rotated pair (i, i + 4)\n");
}

TEST(RotaryEmbeddingRuleNearMiss, ASliceThatIsNotTheLowerHalf) {
  // x[…, :3] with x[…, 4:] rotates no pairs the op knows.
  EXPECT_EQ(near_misses(rotary_spec{.lower_to = 3}.build()),
            "Add 'q_embed': Slice 'lower' keeps [0, 3) of the last axis of x, not its lower half "
            "[0, 4)\n");
}

TEST(RotaryEmbeddingRuleNearMiss, AnAnglePerHead) {
  // The op's angles depend on batch row and position alone.
  EXPECT_EQ(near_misses(rotary_spec{.source = rotary_spec::angles::per_head}.build()),
            "Add 'q_embed': graph input 'cos' is float32 [1, 4, S, 8] against x float32 [2, 4, "
            "S, 8]: RotaryEmbedding takes the angles in x's type, one per (batch row or every "
            "row, position, pair), the same for every head\n");
}

TEST(RotaryEmbeddingRuleNearMiss, FloatSixteen) {
  // The layer ops fuse float32 alone (rules/fusekit/rules/layer_ops.hpp says why).
  EXPECT_EQ(near_misses(rotary_spec{.type = dtype::float16}.build()),
            "Add 'q_embed': graph input 'q' is float16: ONNX Runtime's CPU provider runs these "
            "ops of a float16 model in float32, and RotaryEmbedding would round its output where "
            "the model does not\n");
}

TEST(RotaryEmbeddingRuleNearMiss, TargetOnnxBeforeOpsetTwentyThree) {
  // RotaryEmbedding came in opset 23; fusekit never raises a model's opset.
  EXPECT_EQ(near_misses(rotary_spec{}.build(), target::onnx),
            "Add 'q_embed': target onnx needs ai.onnx opset 23 for RotaryEmbedding; the model "
            "imports 17 and fusekit does not raise it\n");
}

}  // namespace
