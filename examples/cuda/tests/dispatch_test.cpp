// Fused nodes → kernel problems, on models built in memory and on the test models fused by the
// bundled rules; and the choice between the tiled and the simple kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "flash/choice.hpp"
#include "flash/dispatch.hpp"
#include "fusekit/graph/model_builder.hpp"
#include "fusekit/io/model.hpp"
#include "fusekit/rules/all.hpp"

namespace flash {
namespace {

using fusekit::dtype;
namespace build = fusekit::build;

fused_attention only_node(const onnx::ModelProto& m, const dim_bindings& b = {}) {
  const fusekit::graph g(m);
  const auto nodes = fused_attention_nodes(g, b);
  EXPECT_EQ(nodes.size(), 1u);
  return nodes.empty() ? fused_attention{} : nodes.front();
}

// F5-TTS as the ort target fuses it: q [B, S, N·H], K transposed back from BNHS, V BNSH.
onnx::ModelProto f5tts_mha(std::initializer_list<build::attr> attrs, build::dim_spec seq = 256) {
  build::model_builder b(17);
  b.opset_import("com.microsoft", 1);
  const auto q = b.input("q", dtype::float16, {2, seq, 1024});
  const auto kt = b.input("kt", dtype::float16, {2, 16, 64, seq});
  const auto v = b.input("v", dtype::float16, {2, 16, seq, 64});
  const auto k = b.op("Transpose", {kt}, {{"perm", std::vector<std::int64_t>{0, 1, 3, 2}}});
  b.output(b.op("MultiHeadAttention", {q, k, v}, attrs, {.domain = "com.microsoft"}));
  return b.build();
}

TEST(Dispatch, MultiHeadAttentionReadsPreTransposedK) {
  const fused_attention f = only_node(f5tts_mha({{"num_heads", 16}, {"scale", 100.0}}));
  ASSERT_TRUE(f.runnable()) << f.refusal;
  EXPECT_EQ(f.p.type, element::f16);
  EXPECT_EQ(f.p.batch, 2);
  EXPECT_EQ(f.p.heads, 16);
  EXPECT_EQ(f.p.kv_heads, 16);
  EXPECT_EQ(f.p.seq_q, 256);
  EXPECT_EQ(f.p.seq_kv, 256);
  EXPECT_EQ(f.p.head_dim, 64);
  EXPECT_EQ(f.p.scale, 100.f);
  EXPECT_FALSE(f.p.causal);
  EXPECT_EQ(f.p.q, bsnh(16, 256, 64));
  EXPECT_EQ(f.p.o, bsnh(16, 256, 64));
  EXPECT_EQ(f.p.v, bnsh(16, 256, 64));
  EXPECT_EQ(f.p.k, bnhs(16, 256, 64));
  EXPECT_EQ(f.p.k_order(), k_layout::transposed);
  EXPECT_EQ(f.k.name, "kt");
  EXPECT_EQ(f.k.dims, (std::vector<std::int64_t>{2, 16, 64, 256}));
}

TEST(Dispatch, DefaultScaleAndUnidirectional) {
  const fused_attention f = only_node(f5tts_mha({{"num_heads", 16}, {"unidirectional", 1}}));
  ASSERT_TRUE(f.runnable()) << f.refusal;
  EXPECT_FLOAT_EQ(f.p.scale, 0.125f);
  EXPECT_TRUE(f.p.causal);
}

TEST(Dispatch, SymbolicSequenceNeedsABinding) {
  const auto m = f5tts_mha({{"num_heads", 16}}, "S");
  const fused_attention unbound = only_node(m);
  EXPECT_FALSE(unbound.runnable());
  EXPECT_NE(unbound.refusal.find("--dim S="), std::string::npos) << unbound.refusal;
  const fused_attention bound = only_node(m, {{"S", 731}});
  ASSERT_TRUE(bound.runnable()) << bound.refusal;
  EXPECT_EQ(bound.p.seq_q, 731);
  EXPECT_EQ(bound.p.k, bnhs(16, 731, 64));
}

TEST(Dispatch, OnnxAttentionBnshCausal) {
  build::model_builder b(23);
  const auto q = b.input("q", dtype::bfloat16, {1, 8, 300, 128});
  const auto k = b.input("k", dtype::bfloat16, {1, 8, 300, 128});
  const auto v = b.input("v", dtype::bfloat16, {1, 8, 300, 128});
  b.output(b.op("Attention", {q, k, v}, {{"is_causal", 1}}));
  const fused_attention f = only_node(b.build());
  ASSERT_TRUE(f.runnable()) << f.refusal;
  EXPECT_EQ(f.p.type, element::bf16);
  EXPECT_TRUE(f.p.causal);
  EXPECT_FLOAT_EQ(f.p.scale, 1.f / std::sqrt(128.f));
  EXPECT_EQ(f.p.q, bnsh(8, 300, 128));
  EXPECT_EQ(f.p.k_order(), k_layout::rows);
  EXPECT_EQ(f.k.name, "k");
}

TEST(Dispatch, OnnxAttentionThreeDimensionalGroupedHeads) {
  build::model_builder b(23);
  const auto q = b.input("q", dtype::float16, {2, 100, 8 * 64});
  const auto k = b.input("k", dtype::float16, {2, 100, 2 * 64});
  const auto v = b.input("v", dtype::float16, {2, 100, 2 * 64});
  b.output(b.op("Attention", {q, k, v}, {{"q_num_heads", 8}, {"kv_num_heads", 2}, {"scale", 0.5}}));
  const fused_attention f = only_node(b.build());
  ASSERT_TRUE(f.runnable()) << f.refusal;
  EXPECT_EQ(f.p.heads, 8);
  EXPECT_EQ(f.p.kv_heads, 2);
  EXPECT_EQ(f.p.head_dim, 64);
  EXPECT_EQ(f.p.q, bsnh(8, 100, 64));
  EXPECT_EQ(f.p.k, bsnh(2, 100, 64));
  EXPECT_EQ(f.p.scale, 0.5f);
}

TEST(Dispatch, GroupQueryAttentionIsCausalOnGroupedHeads) {
  build::model_builder b(17);
  b.opset_import("com.microsoft", 1);
  const auto q = b.input("q", dtype::float16, {2, 100, 8 * 64});
  const auto k = b.input("k", dtype::float16, {2, 100, 2 * 64});
  const auto v = b.input("v", dtype::float16, {2, 100, 2 * 64});
  const auto seqlens = b.input("seqlens_k", dtype::int32, {2});
  const auto total = b.input("total_sequence_length", dtype::int32, {});
  const build::value absent{""};
  b.output(b.op("GroupQueryAttention", {q, k, v, absent, absent, seqlens, total},
                {{"num_heads", 8}, {"kv_num_heads", 2}},
                {.domain = "com.microsoft", .outputs = 3}));
  const fused_attention f = only_node(b.build());
  ASSERT_TRUE(f.runnable()) << f.refusal;
  EXPECT_EQ(f.p.heads, 8);
  EXPECT_EQ(f.p.kv_heads, 2);
  EXPECT_TRUE(f.p.causal);
  EXPECT_FLOAT_EQ(f.p.scale, 0.125f);
  EXPECT_EQ(f.p.k, bsnh(2, 100, 64));
}

TEST(Dispatch, RefusesWhatTheKernelsDoNotCompute) {
  build::model_builder b(23);
  const auto q = b.input("q", dtype::float16, {1, 2, 16, 64});
  const auto mask = b.input("mask", dtype::float16, {1, 1, 16, 16});
  b.output(b.op("Attention", {q, q, q, mask}));
  b.output(b.op("Attention", {q, q, q}, {{"softcap", 30.0}}));
  const onnx::ModelProto m = b.build();  // the graph indexes it: keep it alive
  const fusekit::graph g(m);
  const auto nodes = fused_attention_nodes(g);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_NE(nodes[0].refusal.find("attn_mask"), std::string::npos) << nodes[0].refusal;
  EXPECT_NE(nodes[1].refusal.find("softcap"), std::string::npos) << nodes[1].refusal;
}

// The attention rules' own output: every fused node maps, with the parameters the report records.
void check_fused_model(fusekit::model& m, fusekit::rules::attention_options::target target,
                       const std::string& what) {
  const fusekit::rules::attention_options attention{.fused_target = target};
  // The attention rules alone: the library's norm and GELU rules report fusions of their own.
  const fusekit::rewrite::report r = fusekit::rules::fuse_all(
      m, {.rules = {"scaled-dot-product-attention-head-merge", "scaled-dot-product-attention"}},
      attention);
  ASSERT_FALSE(r.fusions.empty()) << what;
  const fusekit::graph g(m);
  const auto nodes = fused_attention_nodes(g);
  ASSERT_EQ(nodes.size(), r.fusions.size()) << what;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const fused_attention& f = nodes[i];
    const auto& params = r.fusions[i].params;
    ASSERT_TRUE(f.runnable()) << what << ": " << f.description << ": " << f.refusal;
    EXPECT_NEAR(f.p.scale, params["scale"].get<double>(), 1e-6) << what;
    EXPECT_EQ(f.p.heads, params["num_heads"].get<int>()) << what;
    EXPECT_EQ(std::string(element_name(f.p.type)), params["dtype"].get<std::string>()) << what;
    EXPECT_EQ(f.p.k_order() == k_layout::transposed, params["k_layout"] == "BNHS") << what;
  }
}

TEST(Dispatch, FusedTestModelsMapWithTheReportedParameters) {
  for (const char* file : {"f5tts_dit.ts17.fp16.onnx", "f5tts_dit.dynamo18.fp16.onnx",
                           "f5tts_dit.ts17.fp32.onnx", "sd3.dynamo18.fp16.onnx"}) {
    fusekit::model m = fusekit::load_model(std::string(FUSEKIT_SOURCE_DIR) +
                                           "/tests/models/transformers-4.57/" + file);
    check_fused_model(m, fusekit::rules::attention_options::target::ort, file);
  }
}

// The onnx target: a DiT block at opset 23 with Kᵀ given as BNHS, as F5-TTS exports it.
TEST(Dispatch, RulesOnnxTargetMaps) {
  build::model_builder b(23);
  const auto q = b.input("q", dtype::float16, {2, 16, 256, 64});
  const auto kt = b.input("kt", dtype::float16, {2, 16, 64, 256});
  const auto v = b.input("v", dtype::float16, {2, 16, 256, 64});
  const auto s = b.op("Mul", {b.op("MatMul", {q, kt}), b.scalar(dtype::float16, 100.0)});
  b.output(b.op("MatMul", {b.op("Softmax", {s}, {{"axis", -1}}), v}));
  fusekit::model m = b.build_model();
  check_fused_model(m, fusekit::rules::attention_options::target::onnx, "DiT block, opset 23");
}

// What the dynamo exporter writes itself at opset 23: ai.onnx Attention, already fused.
TEST(Dispatch, ExportersOwnAttentionMaps) {
  for (const char* file : {"f5tts_dit.dynamo23.fp16.onnx", "sd3.dynamo23.fp16.onnx"}) {
    fusekit::model m = fusekit::load_model(std::string(FUSEKIT_SOURCE_DIR) +
                                           "/tests/models/transformers-4.57/" + file);
    const fusekit::graph g(m);
    const auto nodes = fused_attention_nodes(g);
    ASSERT_FALSE(nodes.empty()) << file;
    for (const fused_attention& f : nodes) {
      EXPECT_TRUE(f.runnable()) << file << ": " << f.description << ": " << f.refusal;
      EXPECT_EQ(f.p.type, element::f16);
    }
  }
}

// ---- the kernel choice
constexpr addresses aligned{0x1000, 0x2000, 0x3000, 0x4000};

TEST(Choice, F5TtsTakesTheTiledKernelWithSmallTilesAndVectorKLoads) {
  const fused_attention f = only_node(f5tts_mha({{"num_heads", 16}, {"scale", 100.0}}));
  const kernel_choice c = choose_kernel(f.p, aligned, 132);
  EXPECT_EQ(c.which, kernel_choice::kernel::tiled);
  EXPECT_EQ(c.slices, 1);
  EXPECT_TRUE(c.k_vectorized) << c.why_not_faster;
}

TEST(Choice, TransposedKOfUnalignedLengthLoadsElementwise) {
  const fused_attention f = only_node(f5tts_mha({{"num_heads", 16}}, "S"), {{"S", 731}});
  const kernel_choice c = choose_kernel(f.p, aligned, 132);
  EXPECT_EQ(c.which, kernel_choice::kernel::tiled);
  EXPECT_FALSE(c.k_vectorized);
}

TEST(Choice, SimpleKernelForFp32OddHeadSizesAndMisalignment) {
  const strides packed = bnsh(2, 64, 64);
  const problem p{.type = element::f16,
                  .batch = 1,
                  .heads = 2,
                  .kv_heads = 2,
                  .seq_q = 64,
                  .seq_kv = 64,
                  .head_dim = 64,
                  .scale = 1.f,
                  .causal = false,
                  .q = packed,
                  .k = packed,
                  .v = packed,
                  .o = packed};
  EXPECT_EQ(choose_kernel(p, aligned, 132).which, kernel_choice::kernel::tiled);
  problem fp32 = p;
  fp32.type = element::f32;
  EXPECT_EQ(choose_kernel(fp32, aligned, 132).which, kernel_choice::kernel::simple);
  problem odd = p;
  odd.head_dim = 16;
  odd.q = odd.k = odd.v = odd.o = bnsh(2, 64, 16);
  EXPECT_EQ(choose_kernel(odd, aligned, 132).which, kernel_choice::kernel::simple);
  EXPECT_EQ(choose_kernel(p, {0x1000, 0x2000, 0x3002, 0x4000}, 132).which,
            kernel_choice::kernel::simple);
  EXPECT_TRUE(unsupported(p) == std::nullopt);
  problem huge = p;
  huge.head_dim = 512;
  EXPECT_TRUE(unsupported(huge).has_value());
}

}  // namespace
}  // namespace flash
