// Writes the DiT attention variants that tests/python/test_dit_parity.py fuses with the fusekit
// CLI and checks in ONNX Runtime: make_dit_variants OUT_DIR
//
// One unfused model per variant, OUT_DIR/<name>.onnx, and OUT_DIR/variants.json saying what the
// rules must make of each: how many blocks fuse per target (ort: com.microsoft.MultiHeadAttention,
// onnx: ai.onnx Attention-23), the scale, head count and casts the report must carry, or, for the
// near misses, a phrase of the reason the report must give while the model comes out untouched.
//
// The single-block variants are q, k, v graph inputs in BNSH [B, H, S, D] (k transposed to kᵀ by
// the graph unless the variant says otherwise):
//
//   q ─────────── MatMul ─ [Cast f32] ─ Mul(scale) ─ Softmax(-1) ─ [Cast f16] ─ MatMul ─ [merge] ─
//   y k ─ Transpose ──┘                                                 v ────────┘
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dit_model.hpp"
#include "fusekit/graph/model_builder.hpp"
#include "fusekit/io/model.hpp"

namespace {

using fusekit::dtype;
using fusekit::build::dim_spec;
using fusekit::build::value;

enum class key_form {
  bnsh,           // k [B, H, L, D], Transpose(0, 1, 3, 2)
  bsnh,           // k [B, L, H, D], Transpose(0, 2, 3, 1)
  bnhs,           // kt [B, H, D, L] a graph input, no Transpose
  bdhl,           // k [B, D, H, L], Transpose(0, 2, 1, 3): not a kᵀ perm, yet kᵀ comes out BNHS
  bnhs_shared,    // kt [H, D, L]: one kᵀ for the whole batch, by MatMul broadcasting
  bnhs_batch1,    // kt [1, H, D, L] while q has batch B > 1, by MatMul broadcasting
  bnhs_one_head,  // kt [B, 1, D, L], v [B, 1, L, D]: multi-query attention by broadcasting
};

enum class casts {
  none,
  f32,        // Cast(f32) after QKᵀ, Cast(back) after Softmax: the F5-TTS form
  f64,        // the same round trip through float64
  down_only,  // float32 scores, Cast(f16) after Softmax, v float16: mixed dtypes
};

enum class scale_op { mul, mul_left, div };
enum class scale_source { initializer, constant_node, graph_input, overridable, per_head };
// Shapes outside the block: of kᵀ (its dims are k's, reordered) or of the scores (numbers when
// the sequence is, else dims no input has).
enum class extra { none, softmax_read_twice, scores_output, kt_dims_read, score_dims_read };

struct spec {
  std::string name;
  std::string about;
  dtype type = dtype::float32;
  std::int64_t opset = 17;
  int batch = 1, heads = 2, seq = 7, kv_seq = 7, head_dim = 8;
  bool symbolic_seq = false;    // S (and L) as the dim_param "S"
  bool symbolic_heads = false;  // H as the dim_param "H"
  key_form key = key_form::bnsh;
  casts cast = casts::none;
  scale_op op = scale_op::mul;
  scale_source source = scale_source::initializer;
  std::optional<double> scale{};  // default 1/sqrt(head_dim)
  std::optional<std::int64_t> axis = -1;
  bool merged = false;  // Transpose(0, 2, 1, 3) → Reshape([0, 0, H·D]) after the second MatMul
  extra more = extra::none;
};

double scale_of(const spec& s) { return s.scale.value_or(1.0 / std::sqrt(double(s.head_dim))); }

// The dtype the scores have where they are scaled and soft-maxed.
dtype softmax_type(const spec& s) {
  switch (s.cast) {
    case casts::f32:
      return dtype::float32;
    case casts::f64:
      return dtype::float64;
    default:
      return s.type;
  }
}

onnx::ModelProto make_block(const spec& s) {
  fusekit::build::model_builder b(s.opset);
  const dim_spec B = s.batch, D = s.head_dim;
  const dim_spec H = s.symbolic_heads ? dim_spec("H") : dim_spec(s.heads);
  const dim_spec S = s.symbolic_seq ? dim_spec("S") : dim_spec(s.seq);
  const dim_spec L = s.symbolic_seq ? dim_spec("S") : dim_spec(s.kv_seq);
  const dim_spec one = 1;
  auto perm = [](std::vector<std::int64_t> p) {
    return fusekit::build::attr("perm", std::move(p));
  };

  const value q = b.input("q", s.type, {B, H, S, D});
  value kt;
  switch (s.key) {
    case key_form::bnsh:
      kt = b.op("Transpose", {b.input("k", s.type, {B, H, L, D})}, {perm({0, 1, 3, 2})});
      break;
    case key_form::bsnh:
      kt = b.op("Transpose", {b.input("k", s.type, {B, L, H, D})}, {perm({0, 2, 3, 1})});
      break;
    case key_form::bnhs:
      kt = b.input("kt", s.type, {B, H, D, L});
      break;
    case key_form::bdhl:
      kt = b.op("Transpose", {b.input("k", s.type, {B, D, H, L})}, {perm({0, 2, 1, 3})});
      break;
    case key_form::bnhs_shared:
      kt = b.input("kt", s.type, {H, D, L});
      break;
    case key_form::bnhs_batch1:
      kt = b.input("kt", s.type, {one, H, D, L});
      break;
    case key_form::bnhs_one_head:
      kt = b.input("kt", s.type, {B, one, D, L});
      break;
  }
  const dtype v_type = s.cast == casts::down_only ? dtype::float16 : s.type;
  const value v = b.input("v", v_type, {B, s.key == key_form::bnhs_one_head ? one : H, L, D});

  value scores = b.op("MatMul", {q, kt});
  if (s.more == extra::scores_output) b.output(scores, s.type, {B, H, S, L});
  if (s.more == extra::kt_dims_read)
    b.output(b.op("Gather", {b.op("Shape", {kt}), b.initializer(dtype::int64, {}, {3})}, {},
                  {.name = "key_length"}),
             dtype::int64, {});
  if (s.more == extra::score_dims_read)
    b.output(b.op("Shape", {scores}, {{"start", std::int64_t(1)}}, {.name = "score_dims"}),
             dtype::int64, {3});
  const dtype t = softmax_type(s);
  if (t != s.type) scores = b.op("Cast", {scores}, {{"to", t}});

  const double factor = s.op == scale_op::div ? 1.0 / scale_of(s) : scale_of(s);
  value scale;
  switch (s.source) {
    case scale_source::initializer:
      scale = b.scalar(t, factor);
      break;
    case scale_source::constant_node:
      scale = b.constant_scalar(t, factor);
      break;
    case scale_source::graph_input:
      scale = b.input("scale", t, {});
      break;
    case scale_source::overridable:  // an initializer also listed as a graph input (IR >= 4)
      scale = b.initializer("scale", t, {}, {factor});
      b.input("scale", t, {});
      break;
    case scale_source::per_head: {
      std::vector<double> per_head;
      for (int h = 0; h < s.heads; ++h) per_head.push_back(factor * (1.0 + 0.25 * h));
      scale = b.initializer(t, {1, s.heads, 1, 1}, per_head);
      break;
    }
  }
  const char* scale_op_type = s.op == scale_op::div ? "Div" : "Mul";
  const value scaled = s.op == scale_op::mul_left ? b.op("Mul", {scale, scores})
                                                  : b.op(scale_op_type, {scores, scale});

  value probs = s.axis ? b.op("Softmax", {scaled}, {{"axis", *s.axis}}) : b.op("Softmax", {scaled});
  if (s.more == extra::softmax_read_twice)
    b.output(b.op("Identity", {probs}, {}, {.name = "probs"}), t, {B, H, S, L});
  if (s.cast == casts::f32 || s.cast == casts::f64) probs = b.op("Cast", {probs}, {{"to", s.type}});
  if (s.cast == casts::down_only) probs = b.op("Cast", {probs}, {{"to", dtype::float16}});

  value y = b.op("MatMul", {probs, v}, {}, {.name = s.merged ? "" : "y"});
  if (s.merged) {
    const value hidden = b.initializer(dtype::int64, {3}, {0, 0, double(s.heads * s.head_dim)});
    y = b.op("Reshape", {b.op("Transpose", {y}, {perm({0, 2, 1, 3})}), hidden}, {}, {.name = "y"});
    b.output(y, v_type, {B, S, s.symbolic_heads ? dim_spec("HD") : dim_spec(s.heads * s.head_dim)});
  } else {
    b.output(y, v_type, {B, H, S, D});
  }
  return b.build();
}

// What the rules must make of one model under one set of CLI arguments.
struct expectation {
  std::vector<std::string> targets = {"ort"};
  int fused = 1;
  std::string rule = "scaled-dot-product-attention";
  int casts_removed = 0;
  int casts_added = 0;  // at the block's boundary, where the op computes wider than an operand
  std::optional<double> scale{};
  std::optional<int> num_heads{};
  std::string near_miss{};  // a phrase of the reason, when nothing may fuse
  std::vector<std::string> args{};
  bool fp16_large_scale = false;
  int seq_len = 7;  // the run-time size of symbolic sequence dims
  // Standard deviations of the random inputs, by input name (default 1).
  std::map<std::string, double> input_std{};
};

struct writer {
  std::filesystem::path dir;
  nlohmann::json list = nlohmann::json::array();

  void save(const std::string& file, const onnx::ModelProto& m) const {
    fusekit::save_model({.proto = m, .path = {}}, dir / file);
  }

  void entry(const std::string& name, const std::string& file, const std::string& about,
             const expectation& e) {
    nlohmann::json j{{"name", name},
                     {"file", file},
                     {"about", about},
                     {"targets", e.targets},
                     {"fused", e.fused},
                     {"rule", e.rule},
                     {"casts_removed", e.casts_removed},
                     {"casts_added", e.casts_added},
                     {"args", e.args},
                     {"fp16_large_scale", e.fp16_large_scale},
                     {"seq_len", e.seq_len},
                     {"input_std", e.input_std}};
    j["near_miss"] = e.near_miss.empty() ? nlohmann::json() : nlohmann::json(e.near_miss);
    j["scale"] = e.scale ? nlohmann::json(*e.scale) : nlohmann::json();
    j["num_heads"] = e.num_heads ? nlohmann::json(*e.num_heads) : nlohmann::json();
    list.push_back(std::move(j));
  }

  // A block that must fuse: one MultiHeadAttention/Attention, with the spec's parameters.
  void fuses(const spec& s, expectation e = {}) {
    save(s.name + ".onnx", make_block(s));
    if (s.opset >= 23) e.targets = {"ort", "onnx"};
    e.rule = s.merged ? "scaled-dot-product-attention-head-merge" : "scaled-dot-product-attention";
    e.casts_removed = s.cast == casts::f32 ? 2 : s.cast == casts::down_only ? 1 : 0;
    // Computed in float32: v widened on the way in, the output back to the float16 it was.
    e.casts_added = s.cast == casts::down_only ? 2 : 0;
    e.scale = scale_of(s);
    e.num_heads = s.heads;
    e.fp16_large_scale = s.type == dtype::float16 && scale_of(s) > 1.0;
    if (e.fp16_large_scale) {
      // q·k is a sum of D products of variance σ⁴: logits of standard deviation
      // scale·σ²·sqrt(D) = 5, peaked like a trained model's, not saturated into one-hot rows
      // that hide every rounding.
      const double sigma = std::sqrt(5.0 / (scale_of(s) * std::sqrt(double(s.head_dim))));
      e.input_std = {{"q", sigma}, {"k", sigma}, {"kt", sigma}};
    }
    entry(s.name, s.name + ".onnx", s.about, e);
  }

  // A block that must come out byte for byte as it went in, the report naming the reason.
  // `targets`: by default every target the model's opset allows.
  void misses(const spec& s, std::string reason, std::vector<std::string> targets = {}) {
    save(s.name + ".onnx", make_block(s));
    expectation e{.fused = 0, .near_miss = std::move(reason)};
    if (!targets.empty())
      e.targets = std::move(targets);
    else if (s.opset >= 23)
      e.targets = {"ort", "onnx"};
    entry(s.name, s.name + ".onnx", s.about, e);
  }
};

void write_variants(const std::filesystem::path& dir) {
  writer w{dir};
  const dtype f16 = dtype::float16;

  // ---- blocks that fuse
  const spec fp32{.name = "fp32_mul", .about = "float32, Mul by 1/sqrt(d), no casts"};
  w.fuses(fp32);
  w.fuses({.name = "fp16_cast_scale100",
           .about = "float16 with the F5-TTS casts around Softmax, scale 100; F5-TTS's head size "
                    "64, 32 positions",
           .type = f16,
           .batch = 2,
           .heads = 4,
           .seq = 32,
           .kv_seq = 32,
           .head_dim = 64,
           .cast = casts::f32,
           .scale = 100.0});
  w.fuses({.name = "fp16_cast_inv_sqrt",
           .about = "float16 with casts around Softmax, scale 1/sqrt(d)",
           .type = f16,
           .cast = casts::f32});
  w.fuses({.name = "fp16_scale_fp16",
           .about = "float16, no casts: Softmax in float16, the scale a float16 scalar",
           .type = f16});
  // The probabilities narrowed to float16 for a float16 v: the op computes ·V in float32.
  w.fuses({.name = "mixed_dtypes",
           .about = "float32 q, k and scores, Cast(f16) after Softmax, float16 v",
           .cast = casts::down_only});
  w.fuses({.name = "div_sqrt", .about = "Div by sqrt(d) instead of Mul", .op = scale_op::div});
  w.fuses({.name = "scale_left", .about = "Mul(scale, scores)", .op = scale_op::mul_left});
  w.fuses({.name = "kt_input_bnhs",
           .about = "kᵀ a graph input in BNHS [B, H, D, L], no Transpose",
           .key = key_form::bnhs});
  w.fuses({.name = "k_bsnh",
           .about = "k in BSNH [B, L, H, D] with Transpose(0, 2, 3, 1)",
           .key = key_form::bsnh});
  w.fuses({.name = "k_perm_0213",
           .about = "k [B, D, H, L] with Transpose(0, 2, 1, 3): not a kᵀ perm, but its output "
                    "is BNHS, so the rule may take it as a kᵀ input",
           .key = key_form::bdhl});
  w.fuses({.name = "batch2", .about = "batch 2, 4 heads", .batch = 2, .heads = 4});
  w.fuses({.name = "cross_attention",
           .about = "S != L: q has 5 positions, k and v 9",
           .seq = 5,
           .kv_seq = 9});
  w.fuses({.name = "symbolic_seq",
           .about = "sequence length the dim_param S, shapes declared",
           .symbolic_seq = true},
          {.seq_len = 11});
  w.fuses({.name = "merged_fp32",
           .about = "with the head merge Transpose(0, 2, 1, 3) → Reshape([0, 0, H·D])",
           .merged = true});
  w.fuses({.name = "merged_fp16_cast_scale100",
           .about = "F5-TTS form with the head merge",
           .type = f16,
           .batch = 2,
           .heads = 4,
           .seq = 32,
           .kv_seq = 32,
           .head_dim = 64,
           .cast = casts::f32,
           .scale = 100.0,
           .merged = true});
  // A Shape that reads an interior value needs only its dims: it reads them elsewhere.
  w.fuses({.name = "kt_dims_read",
           .about = "a Shape of kᵀ outside the block gives the key length: it reads k's dims",
           .symbolic_seq = true,
           .more = extra::kt_dims_read},
          {.seq_len = 11});
  w.fuses({.name = "score_dims_read",
           .about = "a Shape(start=1) of the scores outside the block: its dims are numbers",
           .more = extra::score_dims_read});
  w.fuses({.name = "scale_constant_node",
           .about = "the scale a Constant node, not an initializer",
           .source = scale_source::constant_node});
  w.fuses({.name = "softmax_axis_default_opset17",
           .about = "Softmax without axis at opset 17: the default is -1",
           .axis = std::nullopt});
  w.fuses({.name = "softmax_axis3_opset11",
           .about = "opset 11 Softmax with axis 3 = the last axis of 4",
           .opset = 11,
           .axis = 3});

  // The head count from --num-heads when the model does not say it.
  {
    const spec s{.name = "symbolic_heads",
                 .about = "heads the dim_param H: only --num-heads says how many",
                 .symbolic_heads = true};
    w.misses(s, "give it with --num-heads");
    w.entry("symbolic_heads_num_heads_arg", "symbolic_heads.onnx", s.about + ", given",
            {.scale = scale_of(s), .num_heads = 2, .args = {"--num-heads", "2"}});
  }

  // ai.onnx Attention needs opset 23; fusekit does not raise the opset.
  w.entry("fp32_mul_target_onnx_opset17", "fp32_mul.onnx", "target onnx on an opset-17 model",
          {.targets = {"onnx"}, .fused = 0, .near_miss = "needs ai.onnx opset 23"});

  // ---- opset 23: both targets
  w.fuses({.name = "op23_fp32_mul", .about = fp32.about + ", opset 23", .opset = 23});
  w.fuses({.name = "op23_fp16_cast_scale100",
           .about = "F5-TTS casts, scale 100, opset 23",
           .type = f16,
           .opset = 23,
           .batch = 2,
           .heads = 4,
           .seq = 32,
           .kv_seq = 32,
           .head_dim = 64,
           .cast = casts::f32,
           .scale = 100.0});
  w.fuses({.name = "op23_fp16_scale_fp16",
           .about = "float16 without casts, opset 23",
           .type = f16,
           .opset = 23});
  w.fuses({.name = "op23_merged_fp32",
           .about = "with the head merge, opset 23",
           .opset = 23,
           .batch = 2,
           .merged = true});
  w.fuses({.name = "op23_kt_input_bnhs",
           .about = "kᵀ a BNHS graph input, opset 23",
           .opset = 23,
           .key = key_form::bnhs});
  w.fuses({.name = "op23_k_bsnh", .about = "k BSNH, opset 23", .opset = 23, .key = key_form::bsnh});
  w.fuses({.name = "op23_cross_attention",
           .about = "S != L, opset 23",
           .opset = 23,
           .seq = 5,
           .kv_seq = 9});
  w.fuses({.name = "op23_symbolic_seq",
           .about = "symbolic S, opset 23",
           .opset = 23,
           .symbolic_seq = true},
          {.seq_len = 11});

  // ---- whole DiT trunks: the heads come from the head-split Reshape. With x of standard
  // deviation 0.3 the logits have a standard deviation of 6 (2 layers) to 15 (22 layers):
  // peaked, not one-hot.
  const std::map<std::string, double> dit_input_std = {{"x", 0.3}};
  {
    fusekit::samples::dit_config c{.layers = 2, .heads = 4, .head_dim = 16, .batch = 2};
    const expectation e{.fused = 2,
                        .rule = "scaled-dot-product-attention-head-merge",
                        .casts_removed = 4,
                        .scale = c.scale,
                        .num_heads = c.heads,
                        .fp16_large_scale = true,
                        .input_std = dit_input_std};
    w.save("dit2.onnx", fusekit::samples::make_dit_model(c));
    w.entry("dit2", "dit2.onnx",
            "2-layer DiT; no value_info, so q, kᵀ and v have no shape: rank and heads come from "
            "the head-split Reshape/Transpose chain",
            e);
    c.opset = 23;
    w.save("dit2_op23.onnx", fusekit::samples::make_dit_model(c));
    expectation both = e;
    both.targets = {"ort", "onnx"};
    w.entry("dit2_op23", "dit2_op23.onnx", "2-layer DiT at opset 23", both);
  }
  {
    const fusekit::samples::dit_config c{
        .layers = 22, .heads = 16, .head_dim = 64, .batch = 2, .scale = 100.0, .type = f16};
    w.save("dit22_f5tts.onnx", fusekit::samples::make_dit_model(c));
    w.entry("dit22_f5tts", "dit22_f5tts.onnx",
            "22-layer F5-TTS-like DiT: 16 heads of 64, batch 2, float16, scale 100",
            {.fused = 22,
             .rule = "scaled-dot-product-attention-head-merge",
             .casts_removed = 44,
             .scale = c.scale,
             .num_heads = c.heads,
             .fp16_large_scale = true,
             .seq_len = 8,
             .input_std = dit_input_std});
  }

  // ---- near misses: nothing may change
  w.misses({.name = "softmax_axis2", .about = "Softmax over axis 2 of 4", .axis = 2}, "axis");
  w.misses({.name = "softmax_default_axis_opset11",
            .about = "opset 11 Softmax without axis: the default 1 flattens [H, S, L]",
            .opset = 11,
            .axis = std::nullopt},
           "axis = 1 (opset 11 default)");
  w.misses({.name = "softmax_read_twice",
            .about = "the probabilities are also a graph output, through an Identity",
            .more = extra::softmax_read_twice},
           "also read by");
  w.misses({.name = "score_dims_read_symbolic",
            .about = "a Shape of the scores [B, H, S, S]: no input of the block has those dims",
            .symbolic_seq = true,
            .more = extra::score_dims_read},
           "also read by Shape 'score_dims'");
  w.misses({.name = "scores_graph_output",
            .about = "the raw scores QKᵀ are a graph output",
            .more = extra::scores_output},
           "graph output");
  w.misses({.name = "scale_per_head",
            .about = "a [1, H, 1, 1] per-head scale",
            .source = scale_source::per_head},
           "has 2 elements");
  w.misses({.name = "scale_graph_input",
            .about = "the scale a graph input",
            .source = scale_source::graph_input},
           "is not a constant");
  w.misses({.name = "scale_overridable",
            .about = "the scale an initializer that is also a graph input",
            .source = scale_source::overridable},
           "can be overridden at run time");
  w.misses({.name = "scale_zero", .about = "scale 0", .scale = 0.0},
           "is not a positive finite float32 number");
  w.misses({.name = "cast_f64",
            .about = "float16 with the casts through float64",
            .type = f16,
            .cast = casts::f64},
           "runs in float64, wider than the float32");

  // ---- kᵀ or v broadcast by MatMul: valid models the fused ops cannot express as they are
  w.misses({.name = "kt_shared_rank3",
            .about = "kᵀ [H, D, L] broadcast over the batch",
            .batch = 2,
            .key = key_form::bnhs_shared},
           "4-D");
  w.misses({.name = "kt_batch1_broadcast",
            .about = "kᵀ [1, H, D, L] broadcast to batch 2",
            .batch = 2,
            .key = key_form::bnhs_batch1},
           "batch");
  // ---- one key/value head broadcast by the MatMuls (multi-query attention): MultiHeadAttention
  // reads k and v expanded to q's heads, ai.onnx Attention takes the one head as it is.
  {
    spec s{.name = "multi_query_broadcast",
           .about =
               "kᵀ [B, 1, D, L] and v [B, 1, L, D]: one key/value head broadcast to 4 "
               "query heads",
           .heads = 4,
           .key = key_form::bnhs_one_head};
    w.fuses(s);
    s.name = "op23_multi_query_broadcast";
    s.opset = 23;
    w.fuses(s);
  }

  std::ofstream out(dir / "variants.json");
  out << nlohmann::json{{"variants", w.list}}.dump(2) << "\n";
  if (!out) throw fusekit::error("cannot write", {.file = (dir / "variants.json").string()});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_dit_variants OUT_DIR\n";
    return 2;
  }
  try {
    std::filesystem::create_directories(argv[1]);
    write_variants(argv[1]);
  } catch (const std::exception& e) {
    std::cerr << "make_dit_variants: " << e.what() << "\n";
    return 1;
  }
}
