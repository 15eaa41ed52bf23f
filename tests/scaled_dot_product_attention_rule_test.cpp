// The scaled dot-product attention rules on blocks built here (F5-TTS's DiT block and its
// variants: scales, masks, key layouts, heads in the batch axis, local functions): each fuses,
// with its parameters reported, and every near miss is left untouched with the reason a user
// reads. Decoder blocks are decoder_rule_test.cpp's; ONNX Runtime parity on the DiT variants lives
// in tests/python/test_dit_parity.py.
#include "fusekit/rules/all.hpp"
#include "fusekit/rules/sweeps.hpp"
#include "test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "dit_model.hpp"
#include "fusekit/graph/model_builder.hpp"

namespace {

using fusekit::testing::bytes;
using fusekit::testing::op_types;

using fusekit::dtype;
using fusekit::model;
using fusekit::build::model_builder;
using fusekit::build::value;
using attention_options = fusekit::rules::attention_options;
using target = attention_options::target;

// One attention block: MatMul(q, Transpose(k)) → [Cast] → Mul(scale) → Softmax → [Cast] → MatMul.
struct block {
  int opset = 17;
  dtype type = dtype::float16;
  bool casts = true;
  std::int64_t softmax_axis = -1;
  bool softmax_axis_given = true;
  dtype widen_to = dtype::float32;
  bool scale_is_input = false;
  bool per_head_scale = false;
  bool extra_softmax_reader = false;
  bool scores_are_output = false;
  dtype v_type = dtype::undefined;  // undefined: same as q
  std::vector<std::int64_t> k_perm{0, 1, 3, 2};
  bool k_omitted = false;
  bool k_given_transposed = false;  // k declared [B, N, H, L]
  bool kt_dims_read = false;        // a Shape of kᵀ outside the block
  bool score_dims_read = false;     // a Shape of the scores outside the block
  // No Cast after Softmax: v is cast to widen_to instead, the ·V product and the output in that
  // type (torch 2.15's TorchScript export of a float16 LLaMA).
  bool v_widened = false;
  // The scale cast to the scores' type by CastLike, which reads the scores for their type alone
  // (onnxscript's Phi-2 test model).
  bool scale_cast_like = false;

  model build() const {
    model_builder b(opset);
    const dtype vt = v_type == dtype::undefined ? type : v_type;
    auto q = b.input("q", type, {1, 4, "S", 8});
    auto k = k_given_transposed ? b.input("k", type, {1, 4, 8, "S"})
                                : b.input("k", type, {1, 4, "S", 8});
    auto v = b.input("v", vt, {1, 4, "S", 8});
    auto kt = b.op("Transpose", {k_omitted ? value{} : k}, {{"perm", k_perm}}, {.name = "k_t"});
    value s = b.op("MatMul", {q, kt}, {}, {.name = "scores"});
    if (kt_dims_read) b.output(b.op("Shape", {kt}, {}, {.name = "key_dims"}), dtype::int64);
    if (score_dims_read) b.output(b.op("Shape", {s}, {}, {.name = "score_dims"}), dtype::int64);
    if (casts) s = b.op("Cast", {s}, {{"to", widen_to}}, {.name = "up"});
    const dtype st = casts ? widen_to : type;
    value scale = scale_is_input   ? b.input("scale", st, {})
                  : per_head_scale ? b.initializer("scale", st, {1, 4, 1, 1}, {.5, .5, .5, .5})
                                   : b.initializer("scale", st, {}, {100.0});
    if (scale_cast_like) scale = b.op("CastLike", {scale, s}, {}, {.name = "scale_like_scores"});
    auto scaled = b.op("Mul", {s, scale}, {}, {.name = "scaled"});
    auto p = softmax_axis_given
                 ? b.op("Softmax", {scaled}, {{"axis", softmax_axis}}, {.name = "softmax"})
                 : b.op("Softmax", {scaled}, {}, {.name = "softmax"});
    if (casts && !v_widened) p = b.op("Cast", {p}, {{"to", type}}, {.name = "down"});
    if (v_widened) v = b.op("Cast", {v}, {{"to", widen_to}}, {.name = "v_up"});
    auto out = b.op("MatMul", {p, v}, {}, {.name = "context"});
    b.output(out, v_widened ? widen_to : type, {1, 4, "S", 8});
    if (extra_softmax_reader) b.output(b.op("Neg", {p}, {}, {.name = "probe"}), type);
    if (scores_are_output) b.output(s, st);
    return b.build_model();
  }
};

// The bundled rules but those that clean the graph (the sweeps too), which would turn a Constant
// into an initializer where no block fuses.
fusekit::rewrite::options fusions_only() {
  fusekit::rewrite::options run;
  const fusekit::rules::fusion_options defaults;
  const auto cleaning = fusekit::rules::cleaning_rules(defaults);
  for (std::string_view name : fusekit::rules::names())
    if (name != fusekit::rules::duplicate_elimination &&
        name != fusekit::rules::dead_node_elimination &&
        std::none_of(cleaning.begin(), cleaning.end(),
                     [&](const fusekit::rewrite::any_rule& r) { return r.name() == name; }))
      run.rules.emplace_back(name);
  return run;
}

// Fuses with the bundled fusions; expects nothing to change and returns the one near miss.
std::string near_miss_of(model m, attention_options opts = {}) {
  const std::string before = bytes(m);
  const auto report = fusekit::rules::fuse_all(m, fusions_only(), opts);
  EXPECT_EQ(bytes(m), before);
  EXPECT_TRUE(report.fusions.empty());
  if (report.near_misses.size() != 1)
    return "near misses: " + std::to_string(report.near_misses.size());
  return report.near_misses[0].anchor + ": " + report.near_misses[0].reason;
}
std::string near_miss(const block& spec, attention_options opts = {}) {
  return near_miss_of(spec.build(), opts);
}

// The list fuse_all runs and the names the command line accepts are one list.
TEST(Registry, FuseAllRunsTheRulesItNames) {
  // Both targets end with the clean-ups, then the sweeps.
  const std::vector<std::string> cleaning{"identity-elimination",
                                          "no-op-elimination",
                                          "not-elimination",
                                          "constant-to-initializer",
                                          "constant-folding",
                                          "constant-view-folding",
                                          "constant-evaluation",
                                          "castlike-to-cast",
                                          "transpose-folding",
                                          "reshape-folding",
                                          "reshape-target-folding",
                                          "unsqueeze-folding",
                                          "squeeze-unsqueeze-elimination",
                                          "slice-folding",
                                          "concat-folding",
                                          "factor-folding",
                                          "batch-normalization-into-conv",
                                          "batch-normalization-into-conv-transpose",
                                          "batch-normalization-into-gemm",
                                          "pad-into-conv",
                                          "pad-into-max-pool",
                                          "pad-into-average-pool",
                                          "bias-into-conv",
                                          "bias-into-gemm",
                                          "matmul-add-to-gemm",
                                          "duplicate-elimination",
                                          "dead-node-elimination"};
  auto then_cleaning = [&](std::vector<std::string> fusions) {
    fusions.insert(fusions.end(), cleaning.begin(), cleaning.end());
    return fusions;
  };
  model m = block{}.build();
  const auto report = fusekit::rules::fuse_all(m);
  const auto names = fusekit::rules::names();
  EXPECT_EQ(report.rules, std::vector<std::string>(names.begin(), names.end()));
  EXPECT_EQ(
      report.rules,
      then_cleaning({"differential-attention-values", "scaled-dot-product-attention-head-merge",
                     "scaled-dot-product-attention", "layer-normalization", "rms-normalization",
                     "gelu", "gelu-tanh", "rotary-embedding", "rotary-embedding-interleaved",
                     "partial-rotary-embedding", "skip-layer-normalization",
                     "skip-rms-normalization", "bias-gelu", "quick-gelu"}));
  // Target onnx runs the rules whose ops ONNX has.
  model standard = block{}.build();
  attention_options onnx_target;
  onnx_target.fused_target = attention_options::target::onnx;
  EXPECT_EQ(
      fusekit::rules::fuse_all(standard, {}, onnx_target).rules,
      then_cleaning({"differential-attention-values", "scaled-dot-product-attention-head-merge",
                     "scaled-dot-product-attention", "layer-normalization", "rms-normalization",
                     "gelu", "gelu-tanh", "rotary-embedding", "rotary-embedding-interleaved",
                     "partial-rotary-embedding"}));
}

// One rule of the library by its name, bound to the options given whatever their target; a name
// the library lacks is an error that names it.
TEST(Registry, ARuleIsFoundByItsNameUnderEitherTarget) {
  attention_options onnx_target;
  onnx_target.fused_target = attention_options::target::onnx;
  EXPECT_EQ(fusekit::rules::rule_named("quick-gelu", onnx_target).name(), "quick-gelu");
  for (std::string_view name : fusekit::rules::names()) {
    if (name != fusekit::rules::duplicate_elimination &&
        name != fusekit::rules::dead_node_elimination) {
      EXPECT_EQ(fusekit::rules::rule_named(name, onnx_target).name(), name);
    }
  }
  // The rule reads the options it was bound to: ONNX Runtime's op under target ort, ONNX's
  // Attention under target onnx.
  const attention_options ort_target;
  const attention_options* const targets[] = {&ort_target, &onnx_target};
  for (const attention_options* options : targets) {
    model m = block{.opset = 23}.build();
    const fusekit::rewrite::any_rule sdpa =
        fusekit::rules::rule_named("scaled-dot-product-attention", *options);
    fusekit::rewrite::fuse(m, std::span(&sdpa, 1));
    const std::vector<std::string> ops = op_types(m);
    EXPECT_EQ(std::count(ops.begin(), ops.end(),
                         options == &ort_target ? "MultiHeadAttention" : "Attention"),
              1);
  }
  try {
    fusekit::rules::rule_named("dit-attention", onnx_target);  // a former name: not the library's
    FAIL() << "no error";
  } catch (const fusekit::error& e) {
    EXPECT_STREQ(e.what(), "the rule library has no rule named dit-attention");
  }
}

// A reader of the scores' type alone is no reader of their elements: the CastLike folds to the
// constant it is, and the block fuses in the next pass.
TEST(SdpaRule, AScaleCastLikeTheScoresFusesOnceItFolds) {
  model m = block{.scale_cast_like = true}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].rule, "scaled-dot-product-attention");
  EXPECT_EQ(report.cleaned.at("constant-folding").at("CastLike"), 1);
}

// The rules' names before the rename select the renamed rules for one release; the report prints
// the current names.
TEST(Registry, AFormerNameSelectsTheRenamedRule) {
  EXPECT_EQ(fusekit::rules::current_name("dit-attention"), "scaled-dot-product-attention");
  EXPECT_EQ(fusekit::rules::current_name("dit-attention-merged"),
            "scaled-dot-product-attention-head-merge");
  EXPECT_EQ(fusekit::rules::current_name("scaled-dot-product-attention"),
            "scaled-dot-product-attention");
  EXPECT_EQ(fusekit::rules::current_name("nope"), "nope");
  model m = block{}.build();
  const auto report = fusekit::rules::fuse_all(m, {.rules = {"dit-attention"}});
  EXPECT_EQ(report.rules, std::vector<std::string>{"scaled-dot-product-attention"});
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].rule, "scaled-dot-product-attention");
  model other = block{}.build();
  const auto merged_only = fusekit::rules::fuse_all(other, {.rules = {"dit-attention-merged"}});
  EXPECT_EQ(merged_only.rules, std::vector<std::string>{"scaled-dot-product-attention-head-merge"});
  EXPECT_TRUE(merged_only.fusions.empty());
}

// A program's own list of the library's rules runs as fuse_all does, the survey included.
TEST(Registry, AListOfItsOwnRunsTheLibrarysRules) {
  model m = block{}.build();
  model_builder b(23);
  auto q = b.input("q", dtype::float32, {1, 4, "S", 8});
  b.output(b.op("Attention", {q, q, q}, {}, {.name = "sdpa"}));
  model exported = b.build_model();
  const attention_options attention{.num_heads = 4};
  const auto rules = fusekit::rules::bundled(attention);
  EXPECT_EQ(fusekit::rewrite::fuse(m, rules).fusions.size(), 1u);
  const auto report =
      fusekit::rewrite::fuse(exported, rules, {}, &fusekit::rules::find_fused_attention);
  EXPECT_EQ(report.already_fused, std::vector<std::string>{"Attention 'sdpa'"});
}

TEST(SdpaRule, FusesTheF5Block) {
  model m = block{}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  const auto& f = report.fusions[0];
  EXPECT_EQ(f.rule, "scaled-dot-product-attention");
  EXPECT_EQ(f.params["scale"], 100.0);
  EXPECT_EQ(f.params["num_heads"], 4);
  EXPECT_EQ(f.params["casts_removed"], 2);
  EXPECT_EQ(f.params["k_layout"], "BNSH");
  EXPECT_EQ(f.removed,
            (std::map<std::string, int>{
                {"Cast", 2}, {"MatMul", 2}, {"Mul", 1}, {"Softmax", 1}, {"Transpose", 1}}));
  EXPECT_EQ(op_types(m), (std::vector<std::string>{"Transpose", "Reshape", "MultiHeadAttention",
                                                   "Reshape", "Transpose"}));
  EXPECT_EQ(m.proto.graph().node(4).output(0), "context");
  fusekit::rewrite::check_invariants(m);
  // A second run changes nothing.
  const std::string once = bytes(m);
  EXPECT_TRUE(fusekit::rules::fuse_all(m).fusions.empty());
  EXPECT_EQ(bytes(m), once);
}

// ---- precision: the op computes in the widest type the products read, the steps between in
// float32

TEST(SdpaPrecision, AFloat32SoftmaxIslandLeavesTheOpInFloat16) {
  model m = block{}.build();  // f16 scores → f32 → Softmax → f16: the ops' softmax is float32
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["compute_type"], "float16");
  EXPECT_EQ(report.fusions[0].params["casts_removed"], 2);
  EXPECT_EQ(report.fusions[0].params["casts_added"], 0);
}

TEST(SdpaPrecision, AFloat16BlockWhoseSoftmaxAndProductRunInFloat32ComputesInFloat32) {
  block spec;
  spec.v_widened = true;
  model m = spec.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  const auto& params = report.fusions[0].params;
  EXPECT_EQ(params["compute_type"], "float32");
  // q, k and v widened on the way in (exact), v's Cast the block's own; the output is the float32
  // the block returned.
  EXPECT_EQ(params["casts_added"], 3);
  EXPECT_EQ(params["casts_removed"], 2);
  EXPECT_EQ(params["narrowings_removed"], 0);
  fusekit::rewrite::check_invariants(m);
}

TEST(SdpaPrecision, AFloat32BlockWithAFloat16SoftmaxIslandComputesInFloat32) {
  block spec;
  spec.type = dtype::float32;
  spec.widen_to = dtype::float16;  // f32 scores → f16 → Softmax → f32: a narrowing removed
  model m = spec.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["compute_type"], "float32");
  EXPECT_EQ(report.fusions[0].params["casts_removed"], 2);
  EXPECT_EQ(report.fusions[0].params["narrowings_removed"], 1);
  EXPECT_EQ(report.fusions[0].params["casts_added"], 0);
}

// ---- precision as converters write it: Casts between any two steps, read as one policy

// A block whose products a converter kept in `core` while the model runs in `type` (ONNX
// Runtime's convert_float_to_float16 with the attention's nodes blocked): q, k and v cast to
// `core` where they enter, the Casts it leaves between the kept steps, the output cast back.
struct island {
  dtype type = dtype::float16;
  dtype core = dtype::float32;
  std::vector<dtype> after_scores{dtype::float16, dtype::float32};
  std::vector<dtype> after_softmax{dtype::float16, dtype::float32};
  // Where a mask is added: after that many of after_scores's Casts (none: no mask).
  std::optional<std::size_t> mask_at{};
  dtype mask_type = dtype::float16;
  bool cast_read_outside = false;  // the first Cast after the scores also feeds a graph output

  model build() const {
    model_builder b(17);
    auto q = b.input("q", type, {1, 4, "S", 8});
    auto k = b.input("k", type, {1, 4, "S", 8});
    auto v = b.input("v", type, {1, 4, "S", 8});
    const auto cast = [&](value x, dtype from, dtype to, const std::string& name) {
      return from == to ? x : b.op("Cast", {x}, {{"to", to}}, {.name = name});
    };
    auto kt =
        b.op("Transpose", {k}, {{"perm", std::vector<std::int64_t>{0, 1, 3, 2}}}, {.name = "k_t"});
    value s = b.op("MatMul", {cast(q, type, core, "q_in"), cast(kt, type, core, "k_in")}, {},
                   {.name = "scores"});
    s = b.op("Mul", {s, b.scalar(core, 0.5)}, {}, {.name = "scaled"});
    for (std::size_t i = 0; i <= after_scores.size(); ++i) {
      if (mask_at == i)
        s = b.op("Add", {s, b.input("mask", mask_type, {1, 1, "S", "S"})}, {}, {.name = "masked"});
      if (i == after_scores.size()) break;
      s = b.op("Cast", {s}, {{"to", after_scores[i]}}, {.name = "s_cast" + std::to_string(i)});
      if (i == 0 && cast_read_outside) b.output(b.op("Neg", {s}, {}, {.name = "probe"}));
    }
    value p = b.op("Softmax", {s}, {{"axis", -1}}, {.name = "softmax"});
    for (std::size_t i = 0; i < after_softmax.size(); ++i)
      p = b.op("Cast", {p}, {{"to", after_softmax[i]}}, {.name = "p_cast" + std::to_string(i)});
    const dtype pt = after_softmax.empty() ? core : after_softmax.back();
    auto out = b.op("MatMul", {p, cast(v, type, pt, "v_in")}, {}, {.name = "context"});
    b.output(cast(out, pt, type, "out"), type, {1, 4, "S", 8});
    return b.build_model();
  }
};

TEST(SdpaPrecision, ConvertersRoundTripsBetweenFloat32StepsAreRemoved) {
  model m = island{}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  const auto& params = report.fusions[0].params;
  EXPECT_EQ(params["compute_type"], "float32");
  // Both round trips and the Casts on q, k and v, which are read as they enter and widened.
  EXPECT_EQ(params["casts_removed"], 7);
  EXPECT_EQ(params["narrowings_removed"], 2);
  EXPECT_EQ(params["casts_added"], 3);
  fusekit::rewrite::check_invariants(m);
}

TEST(SdpaPrecision, AMaskAddedBeforeTheSoftmaxIslandKeepsTheOpInFloat16) {
  island opt;  // OPT and GPT-J with Softmax kept in float32: MatMul → Add(mask) → Cast → Softmax
  opt.core = dtype::float16;
  opt.after_scores = {dtype::float32};
  opt.after_softmax = {dtype::float16};
  opt.mask_at = 0;
  model m = opt.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  const auto& params = report.fusions[0].params;
  EXPECT_EQ(params["compute_type"], "float16");
  EXPECT_EQ(params["casts_removed"], 2);
  EXPECT_EQ(params["narrowings_removed"], 0);
  EXPECT_EQ(params["casts_added"], 0);
  fusekit::rewrite::check_invariants(m);
}

TEST(SdpaPrecision, AMaskNarrowerThanTheOpIsWidened) {
  island core;  // the mask added in float16 between the round trip's Casts, the op in float32
  core.mask_at = 1;
  model m = core.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["compute_type"], "float32");
  EXPECT_EQ(report.fusions[0].params["casts_added"], 4);  // q, k, v and the mask
  fusekit::rewrite::check_invariants(m);
}

TEST(SdpaPrecision, NearMisses) {
  island outside;
  outside.cast_read_outside = true;  // a Cast of the block feeds a reader outside it
  EXPECT_EQ(near_miss_of(outside.build()),
            "MatMul 'context': output of Cast 's_cast0' is also read by Neg 'probe', outside the "
            "pattern");

  island wide_mask;
  wide_mask.core = dtype::float16;  // a float32 mask on float16 products: the op adds it in float16
  wide_mask.after_scores = {dtype::float32};
  wide_mask.after_softmax = {dtype::float16};
  wide_mask.mask_at = 1;
  wide_mask.mask_type = dtype::float32;
  EXPECT_EQ(near_miss_of(wide_mask.build()),
            "MatMul 'context': the mask is float32, which the float16 the fused op computes and "
            "adds it in does not hold");

  island int8;
  int8.after_scores = {dtype::int8, dtype::float32};  // quantised scores: no precision cast
  EXPECT_EQ(near_miss_of(int8.build()),
            "MatMul 'context': Cast 's_cast0' casts float32 to int8, which no fused op computes "
            "in: only float16, bfloat16, float32 and float64 are a precision");

  island fp8;
  fp8.after_softmax = {dtype::float8e4m3fn, dtype::float32};  // float8 probabilities
  EXPECT_EQ(near_miss_of(fp8.build()),
            "MatMul 'context': Cast 'p_cast0' casts float32 to float8e4m3fn, which no fused op "
            "computes in: only float16, bfloat16, float32 and float64 are a precision");

  island two_halves;
  two_halves.core = dtype::float16;  // float16 scores, bfloat16 ·V: neither holds the other
  two_halves.after_scores = {};
  two_halves.after_softmax = {dtype::bfloat16};
  EXPECT_EQ(near_miss_of(two_halves.build()),
            "MatMul 'context': QKᵀ reads float16 and ·V bfloat16: neither type holds the other "
            "exactly, to compute both in");
}

TEST(SdpaRule, FusesToStandardAttentionAtOpset23) {
  block spec;
  spec.opset = 23;
  model m = spec.build();
  attention_options opts;
  opts.fused_target = target::onnx;
  const auto report = fusekit::rules::fuse_all(m, {}, opts);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(op_types(m), (std::vector<std::string>{"Attention"}));
  // Attention reads K in BNSH: the graph's own k, once its Transpose is fused away.
  EXPECT_EQ(m.proto.graph().node(0).input(1), "k");
}

TEST(SdpaRule, AKeyGivenAsBnhsIsUsedAsItIs) {
  block spec;
  spec.k_perm = {0, 1, 2, 3};  // kᵀ already [B, N, H, L]: no Transpose to undo
  spec.k_given_transposed = true;
  model m = spec.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["k_layout"], "BNHS");
}

// q, k and v split into heads from [1, S, 32] by Reshape + Transpose(0, 2, 1, 3), as every Linear
// layer's output is; `k_split_on` splits k's hidden axis so far, else k is a graph input BSNH.
model three_d_block(bool k_from_3d) {
  model_builder b(17);
  const auto heads = [&](const char* name) {
    auto x = b.input(name, dtype::float32, {1, "S", 32});
    auto split =
        b.op("Reshape",
             {x, b.initializer(std::string(name) + "_heads", dtype::int64, {4}, {0, 0, 4, 8})});
    return b.op("Transpose", {split}, {{"perm", std::vector<std::int64_t>{0, 2, 1, 3}}});
  };
  auto q = heads("x_q");
  auto k = k_from_3d ? heads("x_k")
                     : b.op("Transpose", {b.input("k_bsnh", dtype::float32, {1, "S", 4, 8})},
                            {{"perm", std::vector<std::int64_t>{0, 2, 1, 3}}});
  auto v = heads("x_v");
  auto kt = b.op("Transpose", {k}, {{"perm", std::vector<std::int64_t>{0, 1, 3, 2}}});
  auto p = b.op("Softmax", {b.op("MatMul", {q, kt})}, {{"axis", -1}});
  b.output(b.op("MatMul", {p, v}), dtype::float32, {1, 4, "S", 8});
  return b.build_model();
}

std::vector<std::string> attention_inputs(const model& m) {
  for (const auto& n : m.proto.graph().node())
    if (n.op_type() == "MultiHeadAttention") return {n.input().begin(), n.input().end()};
  return {};
}

TEST(SdpaRule, QKAndVAreReadAsTheThreeDimensionalValuesTheirHeadsSplit) {
  model m = three_d_block(true);
  fusekit::rules::fuse_all(m);
  // The views before the op go with the block: nothing reads them any more.
  EXPECT_EQ(attention_inputs(m), (std::vector<std::string>{"x_q", "x_k", "x_v"}));
  const std::vector<std::string> ops = op_types(m);
  // The output's, back to BNSH.
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Reshape") +
                std::count(ops.begin(), ops.end(), "Transpose"),
            2);
}

TEST(SdpaRule, KAndVStayFourDimensionalTogether) {
  // k is no split of a 3-D value: MultiHeadAttention takes k and v in one layout, so both are
  // read BNSH; q alone is read as it was made.
  model m = three_d_block(false);
  fusekit::rules::fuse_all(m);
  const auto in = attention_inputs(m);
  ASSERT_EQ(in.size(), 3u);
  EXPECT_EQ(in[0], "x_q");
  EXPECT_NE(in[1], "k_bsnh");
  EXPECT_NE(in[2], "x_v");
}

TEST(SdpaRule, NearMisses) {
  block axis2;
  axis2.softmax_axis = 2;  // softmax over the query axis is not attention
  EXPECT_EQ(near_miss(axis2),
            "MatMul 'context': input 0 of Cast 'down', input 0 of MatMul 'context': Softmax "
            "'softmax': axis = 2, expected the last axis");

  block opset11;
  opset11.opset = 11;
  opset11.softmax_axis_given = false;  // before opset 13 an absent axis is 1
  EXPECT_EQ(near_miss(opset11),
            "MatMul 'context': input 0 of Cast 'down', input 0 of MatMul 'context': Softmax "
            "'softmax': axis = 1 (opset 11 default), expected the last axis");

  block read_elsewhere;
  read_elsewhere.extra_softmax_reader = true;  // fusing would drop a tensor Neg still reads
  EXPECT_EQ(near_miss(read_elsewhere),
            "MatMul 'context': output of Cast 'down' is also read by Neg 'probe', outside the "
            "pattern");

  block scores_out;
  scores_out.scores_are_output = true;  // the model's caller reads the scores
  EXPECT_EQ(near_miss(scores_out),
            "MatMul 'context': output of Cast 'up' is a graph output, so it cannot be fused away");

  block fed_scale;
  fed_scale.scale_is_input = true;  // a scale fed at run time is no constant
  EXPECT_EQ(near_miss(fed_scale),
            "MatMul 'context': input 1 of Mul 'scaled', input 0 of Softmax 'softmax', input 0 of "
            "Cast 'down', input 0 of MatMul 'context': expected constant scalar 'scale', graph "
            "input 'scale' is not a constant");

  block per_head;
  per_head.per_head_scale = true;  // one scale per head is no scalar
  EXPECT_EQ(near_miss(per_head),
            "MatMul 'context': input 1 of Mul 'scaled', input 0 of Softmax 'softmax', input 0 of "
            "Cast 'down', input 0 of MatMul 'context': expected constant scalar 'scale', "
            "initializer 'scale' has 4 elements of float32");

  block to_double;
  to_double.widen_to = dtype::float64;  // the ops' softmax in float32 would be narrower
  EXPECT_EQ(near_miss(to_double),
            "MatMul 'context': Softmax 'softmax' runs in float64, wider than the float32 the "
            "fused op computes the softmax in");

  block mixed;
  mixed.v_type = dtype::float32;  // float16 probabilities by float32 v: no valid model
  EXPECT_EQ(near_miss(mixed),
            "MatMul 'context': MatMul 'context' multiplies float16 by float32, which ONNX does not "
            "define");

  block not_transposed;
  not_transposed.k_perm = {0, 2, 1, 3};  // [B, S, N, H] is no kᵀ: heads would meet the sequence
  EXPECT_EQ(near_miss(not_transposed),
            "MatMul 'context': the heads of q [1, 4, S, 8] and of kᵀ [1, S, 4, 8] and v "
            "[1, 4, S, 8] are not proven equal, nor one key/value head, nor (target onnx) a "
            "proven multiple of the key/value heads");

  attention_options onnx_target;
  onnx_target.fused_target = target::onnx;  // Attention is opset 23; the model imports 17
  EXPECT_EQ(near_miss(block{}, onnx_target),
            "MatMul 'context': target onnx needs ai.onnx opset 23 for Attention; the model "
            "imports 17 and fusekit does not raise it");
}

TEST(SdpaRule, AKeyTransposeWithItsInputOmittedIsANearMiss) {
  // Invalid input (Transpose needs its input), as one flipped bit of a model makes it: the facts
  // step onto the omitted value, learn nothing, and the guard refuses instead of crashing.
  block no_key;
  no_key.k_omitted = true;
  EXPECT_EQ(near_miss(no_key),
            "MatMul 'context': q, kᵀ and v are not proven 4-D [batch, heads, sequence, head "
            "size]: q [1, 4, S, 8], kᵀ unknown rank, v [1, 4, S, 8]; 'k_t' has unknown rank: "
            "Transpose 'k_t' has no input 0");
}

TEST(SdpaRule, TheMergedBlockKeepsWhatItsReplacementReads) {
  // Target onnx re-creates the head merge from the original shape, here a Constant node: the
  // Constant must outlive the Reshape it fed.
  model_builder b(23);
  auto q = b.input("q", dtype::float32, {1, 4, "S", 8});
  auto kt = b.input("kt", dtype::float32, {1, 4, 8, "S"});
  auto v = b.input("v", dtype::float32, {1, 4, "S", 8});
  auto p = b.op("Softmax", {b.op("Mul", {b.op("MatMul", {q, kt}), b.scalar(dtype::float32, 0.5)})},
                {{"axis", -1}});
  auto context = b.op("Transpose", {b.op("MatMul", {p, v})},
                      {{"perm", std::vector<std::int64_t>{0, 2, 1, 3}}});
  auto merged = b.op("Reshape", {context, b.constant(dtype::int64, {3}, {0, 0, 32})});
  b.output(merged, dtype::float32, {1, "S", 32});
  model m = b.build_model();
  attention_options opts;
  opts.fused_target = target::onnx;
  const auto report = fusekit::rules::fuse_all(m, {}, opts);
  ASSERT_EQ(report.fusions.size(), 1u);
  // kᵀ comes in as BNHS: one Transpose gives Attention its BNSH key (the Reshape's shape is an
  // initializer now).
  EXPECT_EQ(op_types(m),
            (std::vector<std::string>{"Transpose", "Attention", "Transpose", "Reshape"}));
  fusekit::rewrite::check_invariants(m);
}

TEST(SdpaRule, NumHeadsMayNotContradictTheModel) {
  attention_options opts;
  opts.num_heads = 8;  // the shapes say 4: splitting into 8 would compute something else
  EXPECT_EQ(near_miss(block{}, opts),
            "MatMul 'context': --num-heads 8 contradicts the 4 heads of the model");
}

TEST(SdpaRule, HeadsComeFromTheHeadSplitWhenShapesAreMissing) {
  // The sample trunk declares no intermediate shapes; heads come from Reshape(…, [0, 0, 4, 16]).
  // The attention rules alone: its float16 rotations are the rotary rules' near misses.
  model m{fusekit::samples::make_dit_model({.layers = 2}), {}};
  const auto report = fusekit::rules::fuse_all(
      m, {.rules = {"scaled-dot-product-attention-head-merge", "scaled-dot-product-attention"}});
  ASSERT_EQ(report.fusions.size(), 2u);
  EXPECT_EQ(report.fusions[0].rule, "scaled-dot-product-attention-head-merge");
  EXPECT_EQ(report.fusions[0].params["num_heads"], 4);
  EXPECT_EQ(report.removed()["Cast"], 4);
  fusekit::rewrite::check_invariants(m);
  // The output projections read the fused ops now: stopping there is no near miss.
  EXPECT_TRUE(report.near_misses.empty()) << report.to_table();
}

// Facts the model implies but does not declare: q, k and v split from one undeclared x.
struct split_block {
  bool computed_shape = false;  // the head split's target from Shape → Gather → Concat
  int q_chain = 0;              // element-wise ops between the split and the MatMul

  model build() const {
    model_builder b(17);
    auto x = b.input("x", dtype::float32, {1, "S", 32});
    auto split = [&](const char* name) {
      value target = b.initializer(dtype::int64, {4}, {0, 0, 4, 8});
      if (computed_shape) {
        auto shape = b.op("Shape", {x});
        auto dim = [&](int i) {
          return b.op("Unsqueeze", {b.op("Gather", {shape, b.scalar(dtype::int64, i)}),
                                    b.initializer(dtype::int64, {1}, {0})});
        };
        target = b.op("Concat", {dim(0), dim(1), b.initializer(dtype::int64, {2}, {4, 8})},
                      {{"axis", 0}});
      }
      auto heads =
          b.op("Reshape", {b.op("MatMul", {x, b.initializer(dtype::float32, {32, 32},
                                                            std::vector<double>(1024, 0.01))}),
                           target});
      return b.op("Transpose", {heads}, {{"perm", std::vector<std::int64_t>{0, 2, 1, 3}}},
                  {.name = name});
    };
    value q = split("q");
    for (int i = 0; i < q_chain; ++i) q = b.op(i % 2 ? "Neg" : "Relu", {q});
    auto kt = b.op("Transpose", {split("k")}, {{"perm", std::vector<std::int64_t>{0, 1, 3, 2}}});
    auto s = b.op("Mul", {b.op("MatMul", {q, kt}), b.scalar(dtype::float32, 0.125)});
    auto p = b.op("Softmax", {s}, {{"axis", -1}});
    b.output(b.op("MatMul", {p, split("v")}, {}, {.name = "context"}));
    return b.build_model();
  }
};

TEST(SdpaFacts, ALongElementWiseChainBeforeQKeepsItsShape) {
  // Twenty ops between the head split and the MatMul, nothing declared: the facts follow all.
  model m = split_block{.q_chain = 20}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["num_heads"], 4);
}

TEST(SdpaFacts, HeadsFromAComputedSplitBindTheHint) {
  // The split's target is computed from x's shape; the heads (4) are still proven, so a hint
  // of 8 contradicts the model.
  attention_options opts;
  opts.num_heads = 8;
  EXPECT_EQ(near_miss_of(split_block{.computed_shape = true}.build(), opts),
            "MatMul 'context': --num-heads 8 contradicts the 4 heads of the model");
}

TEST(SdpaFacts, AnUndeclaredBatchIsNotAssumedEqual) {
  // q and k/v come from inputs whose batch nothing names: the MatMul may broadcast them.
  model_builder b(17);
  const auto unnamed = fusekit::build::dim_spec(std::int64_t(-1));
  auto q = b.input("q", dtype::float32, {unnamed, 4, "S", 8});
  auto k = b.input("k", dtype::float32, {unnamed, 4, "S", 8});
  auto v = b.input("v", dtype::float32, {unnamed, 4, "S", 8});
  auto kt = b.op("Transpose", {k}, {{"perm", std::vector<std::int64_t>{0, 1, 3, 2}}});
  auto s = b.op("Mul", {b.op("MatMul", {q, kt}), b.scalar(dtype::float32, 0.125)});
  auto p = b.op("Softmax", {s}, {{"axis", -1}});
  b.output(b.op("MatMul", {p, v}, {}, {.name = "context"}));
  EXPECT_EQ(near_miss_of(b.build_model()),
            "MatMul 'context': the batch of q and kᵀ is not proven equal ([dim 0 of 'q', 4, S, "
            "8] against [dim 0 of 'k', 4, 8, S]): the MatMul broadcasts, the fused op does not; "
            "dim 0 of 'q' is unknown: graph input 'q' declares it without a number or a name");
}

// torch's SDPA decomposition: MatMul(q·√s, kᵀ·√s) → Softmax → MatMul(·, v), batch 1, 4 heads,
// sequence 6, head size 16.
struct prescaled_block {
  enum class factor { constant, from_shape } form = factor::constant;
  bool detour = false;           // kᵀ as Reshape → Transpose(0,2,1) → Reshape (dynamo)
  bool detour_regroups = false;  // …whose first Reshape regroups S and H instead of keeping them
  double k_factor = 0.5;         // 16^-¼ on both sides is the default scale
  bool scale_q = true, scale_k = true;  // which sides have a factor at all
  bool select_mask = false;             // Where(keep, scores, fill) instead of an additive mask
  double select_fill = -std::numeric_limits<double>::infinity();
  bool additive_mask = false;  // Add(scores, mask [1, 1, 6, 6]) and Where(IsNaN(p), 0, p)
  bool divide = false;         // q and kᵀ divided by the factors' reciprocals (DeBERTa)

  model build() const {
    model_builder b(18);
    auto q = b.input("q", dtype::float32, {1, 4, 6, 16});
    auto k = b.input("k", dtype::float32, {1, 4, 6, 16});
    auto v = b.input("v", dtype::float32, {1, 4, 6, 16});
    auto shape = [&](std::vector<double> dims) {
      return b.initializer(dtype::int64, {std::int64_t(dims.size())}, dims);
    };
    value kt;
    if (detour) {
      auto flat = b.op("Reshape", {k, shape(detour_regroups ? std::vector<double>{4, 16, 6}
                                                            : std::vector<double>{4, 6, 16})});
      auto turned = b.op("Transpose", {flat}, {{"perm", std::vector<std::int64_t>{0, 2, 1}}});
      kt = b.op("Reshape", {turned, shape({1, 4, 16, 6})}, {}, {.name = "k_t"});
    } else {
      kt = b.op("Transpose", {k}, {{"perm", std::vector<std::int64_t>{0, 1, 3, 2}}});
    }
    value qs, ks;
    if (form == factor::constant) {
      qs = b.scalar(dtype::float32, 0.5);
      ks = k_factor == 0.5 ? qs : b.scalar(dtype::float32, k_factor);
    } else {
      auto last = b.op("Slice", {b.op("Shape", {q}), shape({-1}), shape({1e9})});
      auto inverse = b.op("Div", {b.scalar(dtype::float32, 1.0),
                                  b.op("Sqrt", {b.op("Cast", {last}, {{"to", dtype::float32}})})});
      qs = ks = b.op("Sqrt", {inverse});
    }
    const auto scaled = [&](value x, value factor, double by) {
      return divide ? b.op("Div", {x, b.scalar(dtype::float32, 1.0 / by)})
                    : b.op("Mul", {x, factor});
    };
    value scores =
        b.op("MatMul", {scale_q ? scaled(q, qs, 0.5) : q, scale_k ? scaled(kt, ks, k_factor) : kt},
             {}, {.name = "scores"});
    if (select_mask)
      scores = b.op("Where",
                    {b.input("keep", dtype::boolean, {1, 1, 6, 6}), scores,
                     b.scalar(dtype::float32, select_fill)},
                    {}, {.name = "select"});
    if (additive_mask)
      scores = b.op("Add", {scores, b.input("mask", dtype::float32, {1, 1, 6, 6})});
    value p = b.op("Softmax", {scores}, {{"axis", -1}}, {.name = "softmax"});
    if (additive_mask) p = b.op("Where", {b.op("IsNaN", {p}), b.scalar(dtype::float32, 0.0), p});
    b.output(b.op("MatMul", {p, v}, {}, {.name = "context"}), dtype::float32, {1, 4, 6, 16});
    return b.build_model();
  }
};

TEST(SdpaPrescaled, ConstantFactorsOfTheDefaultScaleFuseWithoutAScaleAttribute) {
  model m = prescaled_block{}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["scale"], 0.25);
  EXPECT_EQ(report.fusions[0].params["scale_form"], "on q and kᵀ");
  for (const auto& n : m.proto.graph().node())
    if (n.op_type() == "MultiHeadAttention") {
      EXPECT_EQ(n.attribute_size(), 1);  // num_heads only
    }
  fusekit::rewrite::check_invariants(m);
}

TEST(SdpaPrescaled, AnAdditiveMaskAndTheNanGuardFuseIntoTheAttentionBias) {
  model m = prescaled_block{.additive_mask = true}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["mask"], "attention bias");
  EXPECT_EQ(report.fusions[0].params["nan_guard"], "rows the bias hides entirely give 0");
  for (const auto& n : m.proto.graph().node())
    if (n.op_type() == "MultiHeadAttention") {
      ASSERT_EQ(n.input_size(), 6);
      EXPECT_EQ(n.input(5), "mask");  // input 5: attention_bias
    }
  fusekit::rewrite::check_invariants(m);
}

TEST(SdpaPrescaled, ASelectWithMinusInfinityBecomesTheAttentionBias) {
  model m = prescaled_block{.select_mask = true}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["mask"], "select, as attention bias");
  fusekit::rewrite::check_invariants(m);
}

TEST(SdpaPrescaled, AScaleComputedFromTheShapeOfQFuses) {
  model m = prescaled_block{.form = prescaled_block::factor::from_shape}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_NEAR(double(report.fusions[0].params["scale"]), 0.25, 1e-7);
}

TEST(SdpaPrescaled, TheDynamoKeyDetourIsProvenATranspose) {
  model m = prescaled_block{.detour = true}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["k_layout"], "BNSH via a 3-D transpose");
}

TEST(SdpaPrescaled, UnequalFactorsMultiply) {
  // (q·0.5)(kᵀ·0.25) is QKᵀ·0.125, however the model split it.
  model m = prescaled_block{.k_factor = 0.25}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_NEAR(double(report.fusions[0].params["scale"]), 0.125, 1e-9);
}

TEST(SdpaPrescaled, AScaleOnOneSideOrNoneIsTheScaleTheOpApplies) {
  // OPT and Whisper scale q and call SDPA with scale 1; T5 scales nothing.
  for (const auto& [block, scale, form] :
       {std::tuple{prescaled_block{.scale_k = false}, 0.5, "on q"},
        std::tuple{prescaled_block{.scale_q = false}, 0.5, "on kᵀ"},
        std::tuple{prescaled_block{.scale_q = false, .scale_k = false}, 1.0, "none"},
        // DeBERTa divides by the scale's reciprocal.
        std::tuple{prescaled_block{.scale_k = false, .divide = true}, 0.5, "on q"},
        std::tuple{prescaled_block{.scale_q = false, .divide = true}, 0.5, "on kᵀ"},
        std::tuple{prescaled_block{.k_factor = 0.25, .divide = true}, 0.125, "on q and kᵀ"}}) {
    model m = block.build();
    const auto report = fusekit::rules::fuse_all(m);
    ASSERT_EQ(report.fusions.size(), 1u) << form;
    EXPECT_EQ(double(report.fusions[0].params["scale"]), scale);
    EXPECT_EQ(report.fusions[0].params["scale_form"], form);
  }
}

TEST(SdpaMasks, AMaskWhoseKeyLengthIsNotProvenIsExpandedToVsAsTheAddBroadcastIt) {
  // transformers 5 under dynamo: the mask's key axis is attention_mask.view(batch, -1)'s, a
  // length the facts cannot tie to the keys'. The ·V MatMul runs only where the Add gave v's key
  // length, so the mask is that length or 1 there, and the op reads it expanded.
  model_builder b(18);
  auto q = b.input("q", dtype::float32, {"B", 4, "S", 8});
  auto k = b.input("k", dtype::float32, {"B", 4, "S", 8});
  auto v = b.input("v", dtype::float32, {"B", 4, "S", 8});
  auto mask = b.input("mask", dtype::float32, {"B", 1, "S", "M"});
  auto kt = b.op("Transpose", {k}, {{"perm", std::vector<std::int64_t>{0, 1, 3, 2}}});
  auto scores = b.op("Mul", {b.op("MatMul", {q, kt}), b.scalar(dtype::float32, 0.125)});
  auto p = b.op("Softmax", {b.op("Add", {scores, mask})}, {{"axis", -1}});
  b.output(b.op("MatMul", {p, v}, {}, {.name = "context"}));
  model m = b.build_model();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["bias_keys"],
            "expanded to v's key length, as the model's Add broadcast it");
  const auto ops = op_types(m);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Expand"), 1);
}

// torch.export writes mask.expand(batch, 1, -1, -1) as Expand(mask, Abs(target)), -1 for each dim
// kept (onnxscript's SmolLM and Whisper decoder test models, with a past).
struct expanded_mask_block {
  bool target_from_input = false;  // the Expand's target a graph input, not built from dims

  model build() const {
    model_builder b(18);
    auto q = b.input("q", dtype::float32, {"B", 4, "S", 8});
    auto k = b.input("k", dtype::float32, {"B", 4, "T", 8});
    auto v = b.input("v", dtype::float32, {"B", 4, "T", 8});
    auto mask = b.input("mask", dtype::float32, {1, 1, "S", "T"});
    auto target =
        target_from_input
            ? b.input("target", dtype::int64, {4})
            : b.op("Concat",
                   {b.op("Shape", {q}, {{"start", std::int64_t{0}}, {"end", std::int64_t{1}}}),
                    b.initializer(dtype::int64, {3}, {1, -1, -1})},
                   {{"axis", std::int64_t{0}}});
    auto expanded = b.op("Expand", {mask, b.op("Abs", {target})}, {}, {.name = "expanded"});
    auto kt = b.op("Transpose", {k}, {{"perm", std::vector<std::int64_t>{0, 1, 3, 2}}});
    auto scores = b.op("Mul", {b.op("MatMul", {q, kt}), b.scalar(dtype::float32, 0.125)});
    auto p = b.op("Softmax", {b.op("Add", {scores, expanded})}, {{"axis", -1}});
    b.output(b.op("MatMul", {p, v}, {}, {.name = "context"}));
    return b.build_model();
  }
};

TEST(SdpaMasks, AMaskExpandedToTheMagnitudesOfDimsAndMinusOnesIsProven) {
  model m = expanded_mask_block{}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["mask"], "attention bias");
}

TEST(SdpaMasks, AMaskExpandedToATargetNothingProvesIsANearMiss) {
  // The target is read at run time: no dim of the expanded mask is known.
  EXPECT_EQ(near_miss_of(expanded_mask_block{.target_from_input = true}.build()),
            "MatMul 'context': the mask [dim 0 of 'expanded', dim 1 of 'expanded', dim 2 of "
            "'expanded', T] is not proven to be (batch or 1, heads or 1, sequence, key length) "
            "for q [B, 4, S, 8] and v [B, 4, T, 8]");
}

TEST(SdpaPrescaled, NearMisses) {
  // A select whose fill is no −inf: added as a bias, −10000 would not hide what it hid.
  EXPECT_EQ(near_miss_of(prescaled_block{.select_mask = true, .select_fill = -1e4}.build()),
            "MatMul 'context': the select fills masked scores with -10000, neither −inf nor at "
            "most half the lowest float32; added as a bias it would not give the same softmax");
}

TEST(SdpaPrescaled, ADetourThatIsNoTransposeIsReadAsTheKeyItMakes) {
  // [4, 16, 6] reads k [1, 4, 6, 16] in another grouping: not kᵀ of k, but still a [B, N, H, L]
  // tensor the MatMul reads, so the fused op reads it as given (transposed back on emit).
  model m = prescaled_block{.detour = true, .detour_regroups = true}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["k_layout"], "BNHS");
}

TEST(SdpaRule, AttentionTheExporterWroteIsReportedAsAlreadyFused) {
  // The dynamo exporter writes ai.onnx Attention itself at opset 23: no near miss, no silence.
  model_builder b(23);
  auto q = b.input("q", dtype::float32, {1, 4, "S", 8});
  b.output(b.op("Attention", {q, q, q}, {}, {.name = "sdpa"}));
  model m = b.build_model();
  const auto report = fusekit::rules::fuse_all(m);
  EXPECT_TRUE(report.fusions.empty());
  EXPECT_EQ(report.already_fused, std::vector<std::string>{"Attention 'sdpa'"});
  EXPECT_NE(report.to_table().find("already fused: Attention 'sdpa'"), std::string::npos);
}

// Every Softmax left in the fused model is named in a near miss: a block the rule tried, or what
// makes it no block at all.
TEST(SdpaRule, EverySoftmaxLeftIsExplained) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, 6, 8});
  // A mixture-of-experts router: a product's Softmax read by TopK.
  auto router = b.op(
      "Softmax",
      {b.op("MatMul", {x, b.initializer(dtype::float32, {8, 4}, std::vector<double>(32, 0.1))})},
      {{"axis", -1}}, {.name = "router"});
  auto top = b.ops("TopK", {router, b.initializer(dtype::int64, {1}, {2})}, {}, {.outputs = 2});
  // A Softmax of no product, a graph output.
  auto plain = b.op("Softmax", {x}, {{"axis", -1}}, {.name = "plain"});
  // JetMoE's router: the Softmax of the k largest gate logits, which a Gemm computed.
  auto logits = b.op("Gemm", {b.input("tokens", dtype::float32, {12, 8}),
                              b.initializer(dtype::float32, {8, 4}, std::vector<double>(32, 0.1))});
  auto picked = b.ops("TopK", {logits, b.initializer(dtype::int64, {1}, {2})}, {{"axis", 1}},
                      {.name = "pick", .outputs = 2});
  auto gates = b.op("Softmax", {picked[0]}, {{"axis", 1}}, {.name = "gates"});
  // Probabilities read as the second operand: vᵀ·pᵀ is no block the rule knows.
  auto q = b.input("q", dtype::float32, {2, 4, 6, 8});
  auto p =
      b.op("Softmax",
           {b.op("MatMul",
                 {q, b.op("Transpose", {q}, {{"perm", std::vector<std::int64_t>{0, 1, 3, 2}}})})},
           {{"axis", -1}}, {.name = "right"});
  auto pv = b.op("MatMul",
                 {b.op("Transpose", {q}, {{"perm", std::vector<std::int64_t>{0, 1, 3, 2}}}), p});
  for (const auto& out : {top[0], top[1], plain, gates, picked[1], pv}) b.output(out);
  model m = b.build_model();
  const auto report = fusekit::rules::fuse_all(m);
  std::vector<std::string> got;
  for (const auto& y : report.near_misses) got.push_back(y.anchor + ": " + y.reason);
  EXPECT_EQ(got, (std::vector<std::string>{
                     "Softmax 'router': no MatMul reads its probabilities as its first operand "
                     "(through Reshape, Cast, Where, Identity or Dropout): they are read by TopK "
                     "'TopK_3'",
                     "Softmax 'plain': no MatMul computes its input within 8 nodes: these are no "
                     "attention scores",
                     "Softmax 'gates': its input is the values TopK 'pick' kept, as a "
                     "mixture-of-experts router picks its experts: these are no attention scores",
                     "Softmax 'right': no MatMul reads its probabilities as its first operand "
                     "(through Reshape, Cast, Where, Identity or Dropout): they are read by MatMul "
                     "'MatMul_10' (input 1)"}));
  // A near miss at the ·V MatMul already names its block's Softmax: nothing is added.
  model tried = block{.softmax_axis = 1}.build();
  const auto one = fusekit::rules::fuse_all(tried);
  ASSERT_EQ(one.near_misses.size(), 1u);
  EXPECT_EQ(one.near_misses[0].anchor.rfind("MatMul", 0), 0u);
  // Without the attention rule, nothing is said about Softmaxes.
  model again = block{.softmax_axis = 1}.build();
  EXPECT_TRUE(
      fusekit::rules::fuse_all(again, {.rules = {"scaled-dot-product-attention-head-merge"}})
          .near_misses.empty());
}

}  // namespace

namespace {

// SDPA's run-time scale read from a head size the model leaves symbolic: the Sqrt is one element,
// but its value is not known, and the near miss says so rather than calling it no scalar.
TEST(SdpaFacts, AFactorOfUnknownValueStaysWhereItIsAndTheOpScalesByOne) {
  model_builder b(17);
  auto q = b.input("q", dtype::float32, {1, 4, "S", "D"});
  auto k = b.input("k", dtype::float32, {1, 4, "S", "D"});
  auto v = b.input("v", dtype::float32, {1, 4, "S", "D"});
  auto size = b.op("Slice", {b.op("Shape", {q}), b.initializer(dtype::int64, {1}, {-1}),
                             b.initializer(dtype::int64, {1}, {double(std::int64_t(1) << 62)})});
  auto root =
      b.op("Sqrt", {b.op("Cast", {size}, {{"to", dtype::float32}})}, {}, {.name = "head_root"});
  auto kt = b.op("Transpose", {k}, {{"perm", std::vector<std::int64_t>{0, 1, 3, 2}}});
  auto s = b.op("MatMul", {b.op("Mul", {q, root}), b.op("Mul", {kt, root})});
  auto p = b.op("Softmax", {s}, {{"axis", -1}});
  b.output(b.op("MatMul", {p, v}, {}, {.name = "context"}));
  // √D is no number the facts prove: the op reads q·√D and kᵀ·√D as computed, and scales by 1.
  model m = b.build_model();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(double(report.fusions[0].params["scale"]), 1.0);
  EXPECT_EQ(report.fusions[0].params["scale_form"], "none");
  const auto ops = op_types(m);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Mul"), 2);
}

}  // namespace

namespace {

// The block as torch's export_modules_as_functions writes it: the body a model-local function
// called once from the main graph by node 'attn'.
model called_from_a_function(model m) {
  fusekit::build::move_into_local_function(m.proto, "AttentionBlock", "local", "attn");
  return m;
}

TEST(SdpaFunctions, ABlockInsideALocalFunctionIsInlinedAndFused) {
  model m = called_from_a_function(block{}.build());
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.notes,
            std::vector<std::string>{
                "inlined local.AttentionBlock called by 'attn': its body holds a match"});
  const auto ops = op_types(m);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "AttentionBlock"), 0);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "MultiHeadAttention"), 1);
  // A second run changes nothing.
  const std::string once = bytes(m);
  fusekit::rules::fuse_all(m);
  EXPECT_EQ(bytes(m), once);
}

TEST(SdpaFunctions, ABodyThatReadsAValueNothingDefinesBreaksTheInvariants) {
  model m = called_from_a_function(block{}.build());
  m.proto.mutable_functions(0)->mutable_node(1)->set_input(0, "nowhere");
  const auto& n = m.proto.functions(0).node(1);
  EXPECT_EQ(fusekit::testing::error_of([&] { fusekit::rewrite::check_invariants(m); }),
            "function local.AttentionBlock: node " + n.op_type() + " '" + n.name() +
                "': input 'nowhere' is neither an input of the function nor an output of an "
                "earlier node");
}

TEST(SdpaFunctions, ACallWhoseBodyHoldsNoMatchStaysACallAndItsNearMissIsReported) {
  block wrong_axis;
  wrong_axis.softmax_axis = 1;  // Softmax over the heads: not attention's
  // The model stays as it came (near_miss_of checks its bytes), the call included.
  EXPECT_EQ(near_miss_of(called_from_a_function(wrong_axis.build())),
            "MatMul 'attn/context_0': input 0 of Cast 'attn/down_1', input 0 of MatMul "
            "'attn/context_0': Softmax 'attn/softmax_1': axis = 1, expected the last axis");
}

}  // namespace

namespace {

// A Shape outside the block needs only the dims of what it reads: kᵀ's are k's, reordered, so it
// reads k's and the Transpose goes with the block (ONNX Runtime parity: kt_dims_read in
// tests/dit/make_dit_variants.cpp).
TEST(SdpaRule, AShapeOfAnInteriorValueReadsItsDimsElsewhere) {
  block spec;
  spec.kt_dims_read = true;
  model m = spec.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].removed.at("Shape"), 1);
  EXPECT_EQ(report.fusions[0].removed.at("Transpose"), 1);
  const auto& nodes = m.proto.graph().node();
  const auto shape = std::find_if(nodes.begin(), nodes.end(),
                                  [](const auto& n) { return n.op_type() == "Shape"; });
  ASSERT_NE(shape, nodes.end());
  EXPECT_EQ(shape->input(0), "k");
}

TEST(SdpaRule, AShapeOfDimsNoInputHasPinsTheBlock) {
  block spec;
  spec.score_dims_read = true;  // [1, 4, S, S]: no input of the block has two S
  EXPECT_EQ(near_miss(spec),
            "MatMul 'context': output of MatMul 'scores' is also read by Shape 'score_dims', "
            "outside the pattern, and no value the fusion keeps holds its dims [1, 4, S, S]");
}

}  // namespace

namespace {

// Attention with heads in the batch axis, as Bloom's baddbmm writes it: q, k and v merged to
// [B·N, S, H], the 3-D scores scaled and given ALiBi, split to [B, N, S, S] for the mask, merged
// again for the ·V MatMul, and the output split and merged to [B, S, N·H].
struct batched_heads_block {
  bool v_heads_first = false;       // v declared [N, B, S, H]: its merge pairs other rows
  bool alibi_rows_unknown = false;  // ALiBi's leading dim a name of its own
  bool output_3d = false;           // the [B·N, S, H] product is the block's output
  // DeBERTa's disentangled attention: kᵀ divided by the scale, and the bias (its relative
  // positions' terms) computed from q's merged view, which therefore stays.
  bool disentangled = false;

  model build() const {
    model_builder b(18);
    const auto shape = [&](std::vector<double> dims) {
      return b.constant(dtype::int64, {std::int64_t(dims.size())}, dims);
    };
    auto q = b.input("q", dtype::float32, {2, 4, "S", 8});
    auto k = b.input("k", dtype::float32, {2, 4, "S", 8});
    auto v = v_heads_first ? b.input("v", dtype::float32, {4, 2, "S", 8})
                           : b.input("v", dtype::float32, {2, 4, "S", 8});
    auto mask = b.input("mask", dtype::float32, {2, 1, "S", "S"});
    const auto merge = [&](value x, const char* name) {
      return b.op("Reshape", {x, shape({8, -1, 8})}, {}, {.name = name});
    };
    auto kt =
        b.op("Transpose", {merge(k, "k_merge")}, {{"perm", std::vector<std::int64_t>{0, 2, 1}}});
    const value q_merged = merge(q, "q_merge");
    value s;
    if (disentangled) {
      s = b.op("MatMul", {q_merged, b.op("Div", {kt, b.scalar(dtype::float32, 4.0)})});
      s = b.op("Add",
               {s, b.op("MatMul", {q_merged, b.input("rel_kt", dtype::float32, {8, 8, "S"})})});
    } else {
      s = b.op("Mul", {b.op("MatMul", {q_merged, kt}), b.scalar(dtype::float32, 0.25)});
      s = b.op("Add", {s, alibi_rows_unknown ? b.input("alibi", dtype::float32, {"R", 1, "S"})
                                             : b.input("alibi", dtype::float32, {8, 1, "S"})});
    }
    s = b.op("Reshape", {s, shape({2, 4, 0, -1})}, {}, {.name = "scores_split"});
    auto p = b.op("Softmax", {b.op("Add", {s, mask})}, {{"axis", -1}});
    p = b.op("Reshape", {p, shape({8, -1, 0})}, {}, {.name = "probs_merge"});
    auto y = b.op("MatMul", {p, merge(v, "v_merge")}, {}, {.name = "context"});
    if (!output_3d) {
      y = b.op("Reshape", {y, shape({2, 4, -1, 8})}, {}, {.name = "out_split"});
      y = b.op("Transpose", {y}, {{"perm", std::vector<std::int64_t>{0, 2, 1, 3}}});
      y = b.op("Reshape", {y, shape({2, -1, 32})}, {}, {.name = "merged"});
    }
    b.output(y);
    return b.build_model();
  }
};

TEST(SdpaHeadsInBatch, ThreeDimensionalAttentionWithALiBiFuses) {
  model m = batched_heads_block{}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  const auto& fused = report.fusions[0];
  EXPECT_EQ(fused.rule, "scaled-dot-product-attention-head-merge");
  EXPECT_EQ(fused.params["heads_in_batch"], "3-D MatMuls on [batch·heads, sequence, head size]");
  EXPECT_EQ(fused.params["k_layout"], "BNSH, heads merged into the batch");
  EXPECT_EQ(fused.params["mask"], "bias and mask, summed");
  EXPECT_EQ(fused.params["causal"], "no: the scores have a bias besides the mask");
  EXPECT_EQ(double(fused.params["scale"]), 0.25);
  const auto ops = op_types(m);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "MultiHeadAttention"), 1);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Softmax"), 0);
}

TEST(SdpaHeadsInBatch, DisentangledAttentionDividesKtAndAddsABiasComputedFromQ) {
  model m = batched_heads_block{.disentangled = true}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  const auto& fused = report.fusions[0];
  EXPECT_EQ(double(fused.params["scale"]), 0.25);
  EXPECT_EQ(fused.params["scale_form"], "on kᵀ");
  EXPECT_EQ(fused.params["mask"], "bias and mask, summed");
  const auto ops = op_types(m);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "MultiHeadAttention"), 1);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Div"), 0);
}

TEST(SdpaHeadsInBatch, AThreeDimensionalOutputIsTheOpsRegroupedBack) {
  model m = batched_heads_block{.output_3d = true}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].rule, "scaled-dot-product-attention");
  const auto& graph = m.proto.graph();
  EXPECT_EQ(graph.node(graph.node_size() - 1).op_type(), "Reshape");
}

TEST(SdpaHeadsInBatch, NearMisses) {
  // v merged from [N, B, S, H]: its row b·N + n is another (batch, head) than q's.
  EXPECT_EQ(near_miss_of(batched_heads_block{.v_heads_first = true}.build()),
            "Reshape 'merged': Reshape 'v_merge' regroups [4, 2, S, 8], not proven to be the batch "
            "and heads of q [2, 4, S, 8]");
  // ALiBi with R rows, 1 or batch·heads where the model runs: the scores' rows are then not
  // proven batch·heads, and the proof breaks where the probabilities are merged again.
  EXPECT_EQ(near_miss_of(batched_heads_block{.alibi_rows_unknown = true}.build()),
            "Reshape 'merged': input 0 of MatMul 'context', input 0 of Reshape 'out_split', input "
            "0 of Transpose 'Transpose_13', input 0 of Reshape 'merged': Reshape 'probs_merge': "
            "not batch and heads merged into one axis");
}

// Swin's shifted-window block (torchvision's and transformers' Swin): the windows of every image
// batched, q, k and v [B·W, N, S, H]; the scores, a relative position bias added, are viewed as
// [B, W, N, S, S] for a mask per window and viewed back for Softmax.
struct shifted_window_block {
  std::int64_t images = 1;                    // B
  fusekit::build::dim_spec mask_windows = 4;  // the mask's window axis, where W is 4
  bool viewed_back = true;  // Softmax reads the scores merged back to [B·W, N, S, S]

  model build() const {
    model_builder b(17);
    const auto shape = [&](std::vector<double> dims) {
      return b.constant(dtype::int64, {std::int64_t(dims.size())}, dims);
    };
    const double windows = 4, heads = 2, tokens = 16, size = 8;
    const std::int64_t batch = images * 4;
    auto q = b.input("q", dtype::float32, {batch, 2, 16, 8});
    auto k = b.input("k", dtype::float32, {batch, 2, 16, 8});
    auto v = b.input("v", dtype::float32, {batch, 2, 16, 8});
    auto kt = b.op("Transpose", {k}, {{"perm", std::vector<std::int64_t>{0, 1, 3, 2}}});
    value s = b.op("Mul", {b.op("MatMul", {q, kt}), b.scalar(dtype::float32, 0.25)});
    s = b.op("Add", {s, b.input("position_bias", dtype::float32, {1, 2, 16, 16})});
    s = b.op("Reshape", {s, shape({double(images), windows, heads, tokens, tokens})}, {},
             {.name = "windows_split"});
    s = b.op("Add", {s, b.input("window_mask", dtype::float32, {1, mask_windows, 1, 16, 16})}, {},
             {.name = "window_mask_add"});
    if (viewed_back)
      s = b.op("Reshape", {s, shape({-1, heads, tokens, tokens})}, {}, {.name = "windows_merge"});
    auto y = b.op("MatMul", {b.op("Softmax", {s}, {{"axis", -1}}), v}, {}, {.name = "context"});
    if (viewed_back) {
      y = b.op("Transpose", {y}, {{"perm", std::vector<std::int64_t>{0, 2, 1, 3}}});
      y = b.op("Reshape", {y, shape({double(batch), tokens, heads * size})}, {},
               {.name = "merged"});
    }
    b.output(y);
    return b.build_model();
  }
};

TEST(SdpaWindowsInBatch, AMaskPerWindowIsMergedIntoTheBias) {
  model m = shifted_window_block{}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  const auto& fused = report.fusions[0];
  EXPECT_EQ(fused.rule, "scaled-dot-product-attention-head-merge");
  EXPECT_EQ(fused.params["windows_in_batch"],
            "the scores viewed as [batch, windows, …] for a mask per window: the mask merged "
            "with the batch, as the scores are again");
  EXPECT_EQ(fused.params["mask"], "bias and mask, summed");
  const auto ops = op_types(m);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "MultiHeadAttention"), 1);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Softmax"), 0);
  // One image: [1, W, 1, S, S] is [W, 1, S, S] by a Reshape alone.
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Expand"), 0);
}

TEST(SdpaWindowsInBatch, AMaskForEveryImageIsExpandedOverTheImagesFirst) {
  model m = shifted_window_block{.images = 2}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  const auto ops = op_types(m);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "MultiHeadAttention"), 1);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Expand"), 1);
}

TEST(SdpaWindowsInBatch, NearMisses) {
  // Softmax reads the 5-D view: the probabilities broadcast against v, no product of the op's.
  EXPECT_EQ(near_miss_of(shifted_window_block{.viewed_back = false}.build()),
            "MatMul 'context': MatMul 'context' multiplies [1, 4, 2, 16, 16] by [4, 2, 16, 8], of "
            "another rank");
  // A mask over windows nothing proves 4: the sum's windows, and so what the merge makes of
  // them, are unknown.
  EXPECT_EQ(near_miss_of(shifted_window_block{.mask_windows = "W"}.build()),
            "Reshape 'merged': Reshape 'windows_merge' regroups [dim 1 of 'window_mask_add', 2, "
            "16, 16], not proven to be the batch and heads of q [4, 2, 16, 8]");
}

}  // namespace
