// Rotary position embeddings in the halves form (rotate_half) and the interleaved one (pairs
// (2i, 2i + 1), diffusion transformers), fused by the bundled library into
// ONNX Runtime's RotaryEmbedding or ONNX's RotaryEmbedding-23; then near misses, each with the
// reason the report gives. ONNX Runtime parity on the real exports is
// tests/python/test_conformance.py.
#include <gtest/gtest.h>

#include <algorithm>
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

std::string near_misses_of(model m, std::string rule, target t = target::ort) {
  const std::string before = bytes(m);
  const auto report = fusekit::rules::fuse_all(m, {.rules = {std::move(rule)}}, on(t));
  EXPECT_EQ(bytes(m), before);
  EXPECT_TRUE(report.fusions.empty());
  std::string out;
  for (const auto& n : report.near_misses) out += n.anchor + ": " + n.reason + "\n";
  return out;
}
std::string near_misses(model m, target t = target::ort) {
  return near_misses_of(std::move(m), "rotary-embedding", t);
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
  EXPECT_EQ(report.fusions[0].params.dump(), R"({"form":"halves","layout":"BNSH"})");
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
            "Add 'q_embed': Slice 'lower' keeps [0, 3) of the last axis, not x's lower half [0, "
            "4)\n");
}

TEST(RotaryEmbeddingRuleNearMiss, AnAnglePerHead) {
  // The op's angles depend on batch row and position alone.
  EXPECT_EQ(near_misses(rotary_spec{.source = rotary_spec::angles::per_head}.build()),
            "Add 'q_embed': graph input 'cos' is float32 [1, 4, S, 8] against x float32 [2, 4, "
            "S, 8]: RotaryEmbedding takes the angles in x's type, one per (batch row or every "
            "row, position, pair), the same for every head\n");
}

TEST(RotaryEmbeddingRuleNearMiss, FloatSixteen) {
  // For the CPU provider the layer ops fuse float32 alone (rules/fusekit/rules/layer_ops.hpp).
  EXPECT_EQ(near_misses(rotary_spec{.type = dtype::float16}.build()),
            "Add 'q_embed': graph input 'q' is float16: ONNX Runtime's CPU provider runs these "
            "ops of a float16 model in float32, and RotaryEmbedding would round its output where "
            "the model does not (--provider cuda fuses it)\n");
}

TEST(RotaryEmbeddingRule, HalfPrecisionFusesForTheCudaProvider) {
  // The cache the op reads is the model's own angles, in x's type.
  for (const dtype type : {dtype::float16, dtype::bfloat16}) {
    model m = rotary_spec{.type = type}.build();
    fusekit::rules::fusion_options o;
    o.runs_on = fusekit::rules::provider::cuda;
    const auto report = fusekit::rules::fuse_all(m, {}, o);
    ASSERT_EQ(report.fusions.size(), 1u);
    EXPECT_EQ(rotary_ops(m), std::vector<std::string>{"com.microsoft.RotaryEmbedding(q)"});
  }
}

TEST(RotaryEmbeddingRuleNearMiss, TargetOnnxBeforeOpsetTwentyThree) {
  // RotaryEmbedding came in opset 23; fusekit never raises a model's opset.
  EXPECT_EQ(near_misses(rotary_spec{}.build(), target::onnx),
            "Add 'q_embed': target onnx needs ai.onnx opset 23 for RotaryEmbedding; the model "
            "imports 17 and fusekit does not raise it\n");
}

// ---- A partial rotation ------------------------------------------------------------------------

// GPT-NeoX rotates the first 8 of 16 numbers of each head and passes the rest on:
// cat(rotate(q[…, :8]), q[…, 8:]).
struct partial_spec {
  std::int64_t angle_batch = 1;  // one row of angles: the positions are expanded over q's batch

  model build() const {
    model_builder b(17);
    value q = b.input("q", dtype::float32, {2, 4, "S", 16});
    auto ints = [&](std::vector<double> v) {
      return b.initializer(dtype::int64, {std::int64_t(v.size())}, v);
    };
    value theta = b.input("theta", dtype::float32, {angle_batch, "S", 4});
    value both = b.op("Concat", {theta, theta}, {{"axis", -1}});
    value cos = b.op("Unsqueeze", {b.op("Cos", {both}), ints({1})});
    value sin = b.op("Unsqueeze", {b.op("Sin", {both}), ints({1})});
    value part = b.op("Slice", {q, ints({0}), ints({8}), ints({-1})}, {}, {.name = "rotated"});
    value passed = b.op("Slice", {q, ints({8}), ints({16}), ints({-1})}, {}, {.name = "passed"});
    value lower = b.op("Slice", {part, ints({0}), ints({4}), ints({-1})});
    value upper = b.op("Slice", {part, ints({4}), ints({8}), ints({-1})});
    value turned = b.op("Concat", {b.op("Neg", {upper}), lower}, {{"axis", -1}});
    value y = b.op("Add", {b.op("Mul", {part, cos}), b.op("Mul", {turned, sin})});
    b.output(b.op("Concat", {y, passed}, {{"axis", -1}}, {.name = "q_embed"}), dtype::float32,
             {2, 4, "S", 16});
    return b.build_model();
  }
};

TEST(RotaryEmbeddingRule, APartialRotationBecomesOneOpOnTheWholeHead) {
  for (const std::int64_t angle_batch : {1, 2}) {
    model m = partial_spec{.angle_batch = angle_batch}.build();
    const auto report = fusekit::rules::fuse_all(m);
    ASSERT_EQ(report.fusions.size(), 2u) << angle_batch;  // the part, then the whole head
    EXPECT_EQ(report.fusions[1].rule, "partial-rotary-embedding");
    EXPECT_TRUE(report.near_misses.empty());
    const auto ops = op_types(m);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "Neg"), 0);
    for (const auto& n : m.proto.graph().node()) {
      // No view of q stays: the positions' Shape reads q itself, its last dim a number.
      for (const auto& in : n.input()) EXPECT_NE(in, "rotated") << n.op_type();
      if (n.op_type() != "RotaryEmbedding") continue;
      EXPECT_EQ(n.input(0), "q");
      std::string attrs;
      for (const auto& a : n.attribute()) attrs += a.name() + "=" + std::to_string(a.i()) + " ";
      EXPECT_EQ(attrs, "interleaved=0 rotary_embedding_dim=8 num_heads=4 ");
    }
  }
}

// ---- The interleaved form ---------------------------------------------------------------------

// q rotated as diffusers' apply_rotary_emb writes it: pairs (2i, 2i + 1) become (−b, a), with the
// angles repeated element by element (θ unsqueezed, tiled twice, flattened).
struct interleaved_spec {
  bool by_split = false;        // the pair's elements by Split, else by Slice
  bool sequence_first = false;  // q (batch, S, heads, head size), angles [S, 1, 8]
  bool repeat_halves = false;   // the angles cat(θ, θ): the halves form's, not this one's
  std::int64_t imag_from = 1;   // where the second element's Slice starts

  model build() const {
    model_builder b(18);
    const fusekit::build::shape_spec q_dims = sequence_first
                                                  ? fusekit::build::shape_spec{2, "S", 4, 8}
                                                  : fusekit::build::shape_spec{2, 4, "S", 8};
    value q = b.input("q", dtype::float32, q_dims);
    auto ints = [&](std::vector<double> v) {
      return b.initializer(dtype::int64, {std::int64_t(v.size())}, v);
    };
    value theta = b.input("theta", dtype::float32, {"S", 4});
    value repeated =
        repeat_halves
            ? b.op("Concat", {theta, theta}, {{"axis", -1}})
            : b.op("Flatten",
                   {b.op("Tile", {b.op("Unsqueeze", {theta, ints({-1})}), ints({1, 1, 2})})},
                   {{"axis", 1}});
    value cos = b.op("Cos", {repeated}, {}, {.name = "cos"});
    value sin = b.op("Sin", {repeated}, {}, {.name = "sin"});
    if (sequence_first) {
      cos = b.op("Unsqueeze", {cos, ints({1})}, {}, {.name = "cos_heads"});
      sin = b.op("Unsqueeze", {sin, ints({1})}, {}, {.name = "sin_heads"});
    }
    value pairs = b.op("Reshape", {q, ints({0, 0, 0, -1, 2})}, {}, {.name = "pairs"});
    value real, imag;
    if (by_split) {
      const auto parts = b.ops("Split", {pairs, ints({1, 1})}, {{"axis", -1}}, {.outputs = 2});
      real = parts[0];
      imag = parts[1];
    } else {
      real = b.op("Slice", {pairs, ints({0}), ints({1}), ints({-1})}, {}, {.name = "real"});
      imag = b.op("Slice", {pairs, ints({double(imag_from)}), ints({2}), ints({-1})}, {},
                  {.name = "imag"});
    }
    real = b.op("Squeeze", {real, ints({-1})});
    imag = b.op("Squeeze", {imag, ints({-1})});
    value stacked = b.op("Concat",
                         {b.op("Unsqueeze", {b.op("Neg", {imag}), ints({-1})}),
                          b.op("Unsqueeze", {real, ints({-1})})},
                         {{"axis", -1}});
    value rotated = b.op("Reshape", {stacked, ints({0, 0, 0, -1})});
    value y =
        b.op("Add", {b.op("Mul", {q, cos}), b.op("Mul", {rotated, sin})}, {}, {.name = "q_embed"});
    b.output(y, dtype::float32, q_dims);
    return b.build_model();
  }
};

// The interleaved op's attribute, and how x reaches it.
std::string interleaved_op(const model& m) {
  for (const auto& n : m.proto.graph().node())
    if (n.op_type() == "RotaryEmbedding") {
      std::string out = n.input(0) == "q" ? "q" : "a view of q";
      for (const auto& a : n.attribute()) out += " " + a.name() + "=" + std::to_string(a.i());
      return out;
    }
  return "none";
}

TEST(RotaryEmbeddingRule, InterleavedPairsBySliceBecomeTheInterleavedOp) {
  model m = interleaved_spec{}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].rule, "rotary-embedding-interleaved");
  EXPECT_EQ(report.fusions[0].params.dump(), R"({"form":"interleaved","layout":"BNSH"})");
  EXPECT_EQ(interleaved_op(m), "q interleaved=1");
}

TEST(RotaryEmbeddingRule, InterleavedPairsBySplit) {
  model m = interleaved_spec{.by_split = true}.build();
  EXPECT_EQ(fusekit::rules::fuse_all(m).fusions.size(), 1u);
  EXPECT_EQ(interleaved_op(m), "q interleaved=1");
}

TEST(RotaryEmbeddingRule, SequenceBeforeHeadsIsReadAsOneRowOfHeads) {
  // Flux rotates q (batch, S, heads, head size): the op takes it as (batch, S, heads·head size).
  model m = interleaved_spec{.sequence_first = true}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params.dump(), R"({"form":"interleaved","layout":"BSNH"})");
  EXPECT_EQ(interleaved_op(m), "a view of q interleaved=1 num_heads=4");
}

TEST(RotaryEmbeddingRuleNearMiss, InterleavedPairsRotatedByHalvesAngles) {
  // cat(θ, θ) pairs element i with i + 4; the pairs (2i, 2i + 1) of θ itself are unknown.
  EXPECT_EQ(near_misses_of(interleaved_spec{.repeat_halves = true}.build(),
                           "rotary-embedding-interleaved"),
            "Add 'q_embed': the pairs of graph input 'theta' are not proven equal: it is an input "
            "of the model: RotaryEmbedding reads one angle for each rotated pair (2i, 2i + 1)\n");
}

TEST(RotaryEmbeddingRuleNearMiss, ASliceThatIsNotAPairsSecondElement) {
  // x[…, 0:2] of a pair is both elements, no element the rotation swaps.
  EXPECT_EQ(
      near_misses_of(interleaved_spec{.imag_from = 0}.build(), "rotary-embedding-interleaved"),
      "Add 'q_embed': Slice 'imag' keeps [0, 2) of the last axis, not a pair's second "
      "element [1, 2)\n");
}

}  // namespace
