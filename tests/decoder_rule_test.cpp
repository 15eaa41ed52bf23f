// Decoder attention as eager exporters write it (GPT-2: a select on the scaled scores, then the
// padding mask added), and the fused ops' contracts every block must meet. ONNX Runtime parity on
// the real exports, padded and fully masked rows included, is tests/python/test_conformance.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <string>

#include "fusekit/graph/model_builder.hpp"
#include "fusekit/rules/all.hpp"
#include "test_support.hpp"

namespace {

using fusekit::testing::bytes;
using fusekit::testing::op_types;

using fusekit::dtype;
using fusekit::model;
using fusekit::build::model_builder;
using fusekit::build::value;
using target = fusekit::rules::attention_options::target;

constexpr double lowest_float = std::numeric_limits<float>::lowest();  // torch's finfo.min
constexpr double minus_inf = -std::numeric_limits<double>::infinity();

fusekit::build::shape_spec dims(const std::vector<std::int64_t>& sizes) {
  return std::vector<fusekit::build::dim_spec>(sizes.begin(), sizes.end());
}

// GPT-2's eager block, batch 2, 4 heads, 5 tokens, head size 8:
//   MatMul(q, Transpose(k)) → Div(√8) → Where(causal, ·, fill) → Add(padding) → Softmax → MatMul(v)
struct decoder_block {
  dtype type = dtype::float32;
  int opset = 17;
  double fill = lowest_float;
  bool select = true;
  bool hide_form = false;  // Where(hidden, fill, scores): the condition says what is masked
  std::vector<std::int64_t> padding{2, 1, 5, 5};  // empty: no padding mask
  std::int64_t tokens = 5;                        // the queries, and the keys besides a past's
  std::int64_t head_size = 8;                     // q's and k's
  std::int64_t kv_heads = 4;
  bool repeat_kv = false;  // kv_heads repeated to 4 as transformers' repeat_kv does
  // k's repeat_kv merged into the dynamo exporter's 3-D transpose: Reshape(2·4, L, H) →
  // Transpose(0,2,1) → Reshape(2, 4, H, L) is kᵀ; `regrouped` reshapes to (2·4, H, L) instead,
  // the same elements in other rows.
  bool dynamo_detour = false;
  bool regrouped = false;
  std::int64_t v_head_size = 8;
  std::vector<std::int64_t> divisor_dims{};  // a one-element divisor of this shape
  double divisor = std::sqrt(8.0);
  // A decode step: k and v are Concat(past, new) along the sequence, graph outputs (present).
  std::int64_t past = 0;
  bool value_cached = true;       // v's cache too, not only k's
  bool cache_shape_read = false;  // a Shape of present k, computed before the attention
  // A Shape of the repeated k outside the block, as the dynamo exporter sizes its views from it.
  bool repeated_shape_read = false;
  // repeat_kv's Reshape sized from a Shape of present k, as TorchScript exports write it.
  bool repeat_sized_by_cache = false;
  bool one_cache = false;        // v is k's cache too
  bool present_returned = true;  // false: the Concats only join tokens, as SD3's do
  // The select's condition a constant lower triangle (GPT-2's sliced buffer), not an input;
  // `band` > 0 also hides the keys `band` or more behind each query.
  bool constant_triangle = false;
  std::int64_t band = 0;
  // SDPA's causal mask as TorchScript writes it, added to the scores:
  // Where(Equal(Trilu(Expand(1, [S, L]), upper=0, k), 0), fill, 0).
  bool trilu_mask = false;
  std::int64_t trilu_k = 0;
  // The Trilu's ones from ConstantOfShape, its value a float32 [1] of these raw bytes (else
  // Expand).
  std::optional<std::string> trilu_ones_bytes{};
  // transformers 5's grouped decode step: q [2, 4, 1, H] folded to `fold` (default
  // [2, kv_heads, 4 / kv_heads, H]) for the MatMul, the product unfolded back to [2, 4, 1, Hv].
  bool fold_queries = false;
  std::vector<double> fold{};
  // Gemma 2's soft-capping after the scale: tanh(s / softcap) · softcap_out (0: softcap), or
  // with `cap_multiplies` tanh(s · cap_factor) · softcap (0: 1 / softcap in the block's type).
  double softcap = 0;
  double softcap_out = 0;
  bool cap_multiplies = false;
  double cap_factor = 0;

  model build() const {
    model_builder b(opset);
    const std::int64_t keys = tokens + past;
    auto q = b.input("q", type, {2, 4, tokens, head_size});
    value k = b.input("k", type, {2, kv_heads, tokens, head_size});
    value v = b.input("v", type, {2, kv_heads, tokens, v_head_size});
    if (past > 0) {
      auto cache = [&](value x, const char* name, std::int64_t size) {
        auto past_x = b.input(std::string("past_") + name, type, {2, kv_heads, past, size});
        auto present =
            b.op("Concat", {past_x, x}, {{"axis", -2}}, {.name = std::string("present_") + name});
        if (present_returned) b.output(present, type, {2, kv_heads, keys, size});
        return present;
      };
      k = cache(k, "k", head_size);
      if (cache_shape_read)
        b.output(b.op("Shape", {k}, {}, {.name = "cache_shape"}), dtype::int64, {4});
      if (one_cache)
        v = k;
      else if (value_cached)
        v = cache(v, "v", v_head_size);
    }
    auto shape = [&](std::vector<double> d) {
      return b.initializer(dtype::int64, {std::int64_t(d.size())}, d);
    };
    std::optional<value> kt;
    if (repeat_kv) {  // Unsqueeze(2) → Expand(2, kv, 4/kv, L, H) → Reshape(2, 4, L, H)
      const double n = double(keys);
      auto expand = [&](value x, std::int64_t size) {
        auto u = b.op("Unsqueeze", {x, shape({2})});
        return b.op("Expand", {u, shape({2, double(kv_heads), 4.0 / kv_heads, n, double(size)})});
      };
      auto repeat = [&](value x, std::int64_t size) {
        const value target =
            repeat_sized_by_cache
                ? b.op("Mul", {b.op("Shape", {x}), shape({1, 4.0 / double(kv_heads), 1, 1})})
                : shape({2, 4, n, double(size)});
        return b.op("Reshape", {expand(x, size), target});
      };
      if (dynamo_detour) {
        const double h = double(head_size);
        auto flat = b.op("Reshape",
                         {expand(k, head_size), shape({8, regrouped ? h : n, regrouped ? n : h})});
        auto turned = b.op("Transpose", {flat}, {{"perm", std::vector<std::int64_t>{0, 2, 1}}});
        kt = b.op("Reshape", {turned, shape({2, 4, h, n})});
      } else {
        k = repeat(k, head_size);
        if (repeated_shape_read)
          b.output(b.op("Shape", {k}, {}, {.name = "repeated_shape"}), dtype::int64, {4});
      }
      v = repeat(v, v_head_size);
    }
    if (!kt) kt = b.op("Transpose", {k}, {{"perm", std::vector<std::int64_t>{0, 1, 3, 2}}});
    const std::vector<double> folded =
        !fold.empty() ? fold
                      : std::vector<double>{2, double(kv_heads), 4.0 / kv_heads, double(head_size)};
    if (fold_queries) q = b.op("Reshape", {q, shape(folded)}, {}, {.name = "fold"});
    auto scores = b.op("MatMul", {q, *kt}, {}, {.name = "scores"});
    value x = b.op("Div", {scores, b.initializer("divisor", type, divisor_dims, {divisor})}, {},
                   {.name = "scaled"});
    if (softcap > 0) {
      const value inner =
          cap_multiplies
              ? b.op("Mul", {x, b.scalar(type, cap_factor > 0 ? cap_factor : 1 / softcap)})
              : b.op("Div", {x, b.scalar(type, softcap)});
      x = b.op("Mul",
               {b.op("Tanh", {inner}), b.scalar(type, softcap_out > 0 ? softcap_out : softcap)}, {},
               {.name = "capped"});
    }
    if (select) {
      value condition;
      if (constant_triangle) {
        std::vector<double> lower;
        for (std::int64_t i = 0; i < tokens; ++i)
          for (std::int64_t j = 0; j < keys; ++j)
            lower.push_back((j <= i && (band == 0 || j > i - band)) != hide_form ? 1.0 : 0.0);
        condition = b.initializer(hide_form ? "hidden" : "causal", dtype::boolean,
                                  {1, 1, tokens, keys}, lower);
      } else {
        condition = b.input(hide_form ? "hidden" : "causal", dtype::boolean, {1, 1, 5, 5});
      }
      auto filler = b.scalar(type, fill);
      x = hide_form ? b.op("Where", {condition, filler, x}, {}, {.name = "select"})
                    : b.op("Where", {condition, x, filler}, {}, {.name = "select"});
    }
    if (trilu_mask) {
      auto shape = b.initializer(dtype::int64, {2}, {double(tokens), double(keys)});
      auto ones = b.op("Expand", {b.scalar(dtype::float32, 1.0), shape});
      if (trilu_ones_bytes) {
        onnx::TensorProto one = fusekit::build::make_tensor("one", dtype::float32, {1}, {1.0});
        one.set_raw_data(*trilu_ones_bytes);
        ones = b.op("ConstantOfShape", {shape}, {{"value", std::move(one)}});
      }
      auto lower = b.op("Trilu", {ones, b.scalar(dtype::int64, double(trilu_k))}, {{"upper", 0}},
                        {.name = "tril"});
      auto hidden = b.op("Equal", {lower, b.scalar(dtype::float32, 0.0)});
      x = b.op("Add", {x, b.op("Where", {hidden, b.scalar(type, fill), b.scalar(type, 0.0)})});
    }
    if (!padding.empty()) x = b.op("Add", {x, b.input("padding", type, dims(padding))});
    auto p = b.op("Softmax", {x}, {{"axis", -1}}, {.name = "softmax"});
    auto out = b.op("MatMul", {p, v}, {}, {.name = "context"});
    if (fold_queries)
      out = b.op("Reshape", {out, shape({2, 4, double(tokens), double(v_head_size)})}, {},
                 {.name = "unfold"});
    b.output(out, type, {2, 4, tokens, v_head_size});
    return b.build_model();
  }
};

fusekit::rules::attention_options on(target t) {
  fusekit::rules::attention_options opts;
  opts.fused_target = t;
  return opts;
}

const onnx::NodeProto* only(const model& m, const std::string& op_type) {
  const onnx::NodeProto* found = nullptr;
  for (const auto& n : m.proto.graph().node())
    if (n.op_type() == op_type) {
      if (found != nullptr) return nullptr;
      found = &n;
    }
  return found;
}

std::string ops_of(const model& m) {
  std::string out;
  for (const auto& n : m.proto.graph().node()) out += n.op_type() + " ";
  return out;
}

// Fuses with the bundled rules; expects no node to change (the clean-ups may still merge copies
// of a constant) and returns the one near miss.
std::string near_miss(const decoder_block& spec, target t = target::ort) {
  model m = spec.build();
  const std::string before = ops_of(m);
  const auto report = fusekit::rules::fuse_all(m, {}, on(t));
  EXPECT_EQ(ops_of(m), before);
  EXPECT_TRUE(report.fusions.empty());
  if (report.near_misses.size() != 1)
    return "near misses: " + std::to_string(report.near_misses.size());
  return report.near_misses[0].anchor + ": " + report.near_misses[0].reason;
}

TEST(DecoderSelect, GptTwoEagerSelectAndPaddingBecomeOneAttentionBias) {
  model m = decoder_block{}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["mask"], "select and attention bias, summed");
  // The select turned additive, Where(causal, 0, fill), plus the padding: MHA's input 5.
  EXPECT_EQ(op_types(m), (std::vector<std::string>{"Where", "Add", "Transpose", "Reshape",
                                                   "MultiHeadAttention", "Reshape", "Transpose"}));
  const auto& where = m.proto.graph().node(0);
  EXPECT_EQ(where.input(0), "causal");
  const auto& mha = m.proto.graph().node(4);
  ASSERT_EQ(mha.input_size(), 6);
  EXPECT_EQ(mha.input(5), m.proto.graph().node(1).output(0));
  fusekit::rewrite::check_invariants(m);
  const std::string once = bytes(m);
  EXPECT_TRUE(fusekit::rules::fuse_all(m).fusions.empty());
  EXPECT_EQ(bytes(m), once);
}

// OPT's TorchScript export once a converter keeps attention in float32: an [S, L] mask, which
// the Add broadcast from the right, read by MultiHeadAttention as [1, 1, S, L].
TEST(DecoderSelect, AMaskOfRankTwoOrThreeGetsOnesInFront) {
  for (const auto& padding : {std::vector<std::int64_t>{5, 5}, {4, 5, 5}, {1, 5, 5}}) {
    model m = decoder_block{.select = false, .padding = padding}.build();
    const auto report = fusekit::rules::fuse_all(m);
    ASSERT_EQ(report.fusions.size(), 1u);
    EXPECT_EQ(op_types(m),
              (std::vector<std::string>{"Unsqueeze", "Transpose", "Reshape", "MultiHeadAttention",
                                        "Reshape", "Transpose"}));
    EXPECT_EQ(only(m, "Unsqueeze")->input(0), "padding");
    EXPECT_EQ(only(m, "MultiHeadAttention")->input(5), only(m, "Unsqueeze")->output(0));
    fusekit::rewrite::check_invariants(m);
  }
  // Near miss: one bias per key, [L], has no query axis to be the op's rows.
  EXPECT_EQ(near_miss({.select = false, .padding = {5}}),
            "MatMul 'context': the mask [5] is not proven to be (batch or 1, heads or 1, sequence, "
            "key length) for q [2, 4, 5, 8] and v [2, 4, 5, 8]");
}

TEST(DecoderSelect, ASelectOnWhatIsHiddenFusesToo) {
  model m = decoder_block{.hide_form = true, .padding = {}}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["mask"], "select, as attention bias");
  const auto& where = m.proto.graph().node(0);
  ASSERT_EQ(where.op_type(), "Where");
  EXPECT_EQ(where.input(0), "hidden");
  // the zero goes where the scores were
  EXPECT_EQ(where.input(2), "scaled-dot-product-attention/const_0");
}

TEST(DecoderSelect, MinusInfinityIsAFillInEveryFloatType) {
  model m = decoder_block{.type = dtype::float16, .fill = minus_inf}.build();
  EXPECT_EQ(fusekit::rules::fuse_all(m).fusions.size(), 1u);
}

TEST(DecoderSelect, NearMisses) {
  // −10000 added to a score of 20000 is no longer hidden: a select is not a bias with this fill.
  EXPECT_EQ(near_miss({.fill = -1e4}),
            "MatMul 'context': the select fills masked scores with -10000, neither −inf nor at "
            "most half the lowest float32; added as a bias it would not give the same softmax");
  // float16's finfo.min absorbs only scores below 16: a fully masked row would stop being uniform.
  EXPECT_EQ(near_miss({.type = dtype::float16, .fill = -65504}),
            "MatMul 'context': the select fills masked scores with -65504, neither −inf nor "
            "(float16) anything else; added as a bias it would not give the same softmax");
}

// ---- causality alone: the op's own causal form

// Fuses and returns the one fusion's causal note ("yes" when the mask became the op's).
std::string causal_note(const decoder_block& spec, target t = target::ort) {
  model m = spec.build();
  // As the tool does: a complaint the input had already (a constant's bytes short of its type) is
  // no reason to refuse, only one the rewrite introduced.
  const std::string input_error = fusekit::rewrite::checker_error(m);
  const auto report = fusekit::rules::fuse_all(m, {}, on(t));
  if (report.fusions.size() != 1) return "fusions: " + std::to_string(report.fusions.size());
  fusekit::rewrite::check_rewrite(m, input_error);
  if (report.fusions[0].params["mask"] == "causal, the op's own") return "yes";
  return report.fusions[0].params.value("causal", "no causal note");
}

const onnx::AttributeProto* attribute(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

TEST(DecoderCausal, TorchScriptsTriluMaskBecomesUnidirectionalMultiHeadAttention) {
  model m =
      decoder_block{.fill = minus_inf, .select = false, .padding = {}, .trilu_mask = true}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["mask"], "causal, the op's own");
  // The mask's computation goes with the last block that read it.
  EXPECT_EQ(op_types(m), (std::vector<std::string>{"Transpose", "Reshape", "MultiHeadAttention",
                                                   "Reshape", "Transpose"}));
  EXPECT_EQ(m.proto.graph().initializer_size(), 2);  // the two shapes of the head reshapes
  const auto& mha = m.proto.graph().node(2);
  EXPECT_EQ(mha.input_size(), 3);  // no attention bias
  ASSERT_NE(attribute(mha, "unidirectional"), nullptr);
  EXPECT_EQ(attribute(mha, "unidirectional")->i(), 1);
  ASSERT_NE(attribute(mha, "mask_filter_value"), nullptr);
  EXPECT_EQ(attribute(mha, "mask_filter_value")->f(), std::numeric_limits<float>::lowest());
  const std::string once = bytes(m);
  EXPECT_TRUE(fusekit::rules::fuse_all(m).fusions.empty());
  EXPECT_EQ(bytes(m), once);
}

TEST(DecoderCausal, GptTwosConstantTriangleSelectBecomesIsCausalAttention) {
  model m = decoder_block{.opset = 23, .padding = {}, .constant_triangle = true}.build();
  const auto report = fusekit::rules::fuse_all(m, {}, on(target::onnx));
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["mask"], "causal, the op's own");
  EXPECT_EQ(op_types(m), (std::vector<std::string>{"Attention"}));
  EXPECT_EQ(m.proto.graph().initializer_size(), 0);  // the triangle goes too
  const auto& attention = m.proto.graph().node(0);
  EXPECT_EQ(attention.input_size(), 3);
  ASSERT_NE(attribute(attention, "is_causal"), nullptr);
  EXPECT_EQ(attribute(attention, "is_causal")->i(), 1);
}

TEST(DecoderCausal, NearMissesKeepTheMaskAsTheBias) {
  EXPECT_EQ(causal_note({.padding = {}, .constant_triangle = true}), "yes");
  EXPECT_EQ(causal_note({.hide_form = true, .padding = {}, .constant_triangle = true}), "yes");
  // A band also hides the keys three or more behind: sliding-window attention, not causality.
  EXPECT_EQ(causal_note({.padding = {}, .constant_triangle = true, .band = 3}),
            "no: the constant 'causal' hides key 0 to query 3, which causality shows");
  EXPECT_EQ(causal_note({.hide_form = true, .padding = {}, .constant_triangle = true, .band = 3}),
            "no: the constant 'hidden' hides key 0 to query 3, which causality shows");
  // A condition the model is given may hide anything.
  EXPECT_EQ(causal_note({.padding = {}}),
            "no: 'causal' is an input of the model, which fusekit does not prove causal");
  // Causality and padding summed: a row padding hides entirely is uniform in the model.
  EXPECT_EQ(causal_note({.constant_triangle = true}), "no: a select and an added mask, summed");

  // The 2-D Trilu mask is an attention bias only Attention takes.
  const decoder_block trilu{
      .opset = 23, .fill = minus_inf, .select = false, .padding = {}, .trilu_mask = true};
  EXPECT_EQ(causal_note(trilu, target::onnx), "yes");
  // k = −1 hides the diagonal too: query 0 would see no key at all.
  auto below_diagonal = trilu;
  below_diagonal.trilu_k = -1;
  EXPECT_EQ(causal_note(below_diagonal, target::onnx),
            "no: Trilu 'tril' (upper 0, k -1) keeps a triangle other than the causal one");
  // float16's finfo.min added to a score of 20 no longer hides it as the op's −inf would.
  auto half = trilu;
  half.type = dtype::float16, half.fill = -65504;
  EXPECT_EQ(causal_note(half, target::onnx),
            "no: the mask fills with -65504, which hides less than −inf");
  // Ones from ConstantOfShape, as TorchScript writes torch.ones.
  auto of_shape = trilu;
  const float one = 1.0f;
  of_shape.trilu_ones_bytes = std::string(reinterpret_cast<const char*>(&one), sizeof one);
  EXPECT_EQ(causal_note(of_shape, target::onnx), "yes");
  // Its value holds 3 bytes for a float32: nothing is proven of it, and the mask stays the bias.
  auto broken = of_shape;
  broken.trilu_ones_bytes = "abc";
  EXPECT_EQ(causal_note(broken, target::onnx),
            "no: Trilu 'tril' reads 'ConstantOfShape_4', not proven nonzero everywhere");
  // 5 queries on 8 keys (3 joined before them): a decoder's diagonal would be bottom-right, the
  // mask's is top-left; the ops put it where the mask does only for as many queries as keys.
  auto longer = trilu;
  longer.past = 3, longer.present_returned = false;
  EXPECT_EQ(causal_note(longer, target::onnx),
            "no: the query length 5 and key length 8 are not proven equal, where causality's "
            "diagonal is the same top-left and bottom-right");
}

// ---- a decode step's cache

// Fuses and returns the one fusion's kv_cache note.
std::string cache_note(const decoder_block& spec, target t = target::ort) {
  model m = spec.build();
  const auto report = fusekit::rules::fuse_all(m, {}, on(t));
  if (report.fusions.size() != 1) return "fusions: " + std::to_string(report.fusions.size());
  fusekit::rewrite::check_invariants(m);
  return report.fusions[0].params.value("kv_cache", "no kv_cache note");
}

// The node that writes graph output `name`.
const onnx::NodeProto* writer_of(const model& m, const std::string& name) {
  for (const auto& n : m.proto.graph().node())
    for (const auto& out : n.output())
      if (out == name) return &n;
  return nullptr;
}

TEST(DecoderCache, PastAndPresentMoveIntoMultiHeadAttention) {
  model m = decoder_block{.select = false, .padding = {}, .past = 3}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["kv_cache"], "past and present in the fused op");
  EXPECT_EQ(op_types(m), (std::vector<std::string>{"Transpose", "Reshape", "MultiHeadAttention",
                                                   "Reshape", "Transpose"}));
  const auto& mha = m.proto.graph().node(2);
  // q, k, v, bias, key padding mask, attention bias, past key, past value.
  ASSERT_EQ(mha.input_size(), 8);
  EXPECT_EQ(mha.input(1), "k");
  EXPECT_EQ(mha.input(6), "past_k");
  EXPECT_EQ(mha.input(7), "past_v");
  // The graph's present outputs keep their names and are the op's present key and value.
  ASSERT_EQ(mha.output_size(), 3);
  EXPECT_EQ(mha.output(1), "present_k");
  EXPECT_EQ(mha.output(2), "present_v");
  fusekit::rewrite::check_invariants(m);
  const std::string once = bytes(m);
  EXPECT_TRUE(fusekit::rules::fuse_all(m).fusions.empty());
  EXPECT_EQ(bytes(m), once);
}

TEST(DecoderCache, AGroupedCacheMovesIntoAttentionBeforeRepeatKv) {
  model m =
      decoder_block{
          .opset = 23, .select = false, .padding = {}, .kv_heads = 2, .repeat_kv = true, .past = 3}
          .build();
  const auto report = fusekit::rules::fuse_all(m, {}, on(target::onnx));
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["kv_cache"], "past and present in the fused op");
  EXPECT_EQ(op_types(m), (std::vector<std::string>{"Attention"}));
  const auto& attention = m.proto.graph().node(0);
  // q, k, v, no mask, past key, past value; the two-head cache as the graph has it.
  EXPECT_EQ(std::vector<std::string>(attention.input().begin(), attention.input().end()),
            (std::vector<std::string>{"q", "k", "v", "", "past_k", "past_v"}));
  EXPECT_EQ(writer_of(m, "present_k"), &attention);
  EXPECT_EQ(writer_of(m, "present_v"), &attention);
  fusekit::rewrite::check_invariants(m);
}

TEST(DecoderCache, TheConcatStaysWhereTheOpCannotWritePresent) {
  // MultiHeadAttention reads the repeated heads; the two-head cache is not its k.
  EXPECT_EQ(
      cache_note({.select = false, .padding = {}, .kv_heads = 2, .repeat_kv = true, .past = 3}),
      "Concat kept: the op reads the repeated heads, not the cache");
  // The op writes present key and value together, or neither.
  EXPECT_EQ(cache_note({.select = false, .padding = {}, .past = 3, .value_cached = false}),
            "Concat kept: only one of key and value is a cache (concatenated and returned)");
  // Joined along the sequence but not returned (SD3's text and image tokens): no cache at all.
  EXPECT_EQ(cache_note({.select = false, .padding = {}, .past = 3, .present_returned = false}),
            "no kv_cache note");
  // k and v read one Concat (a fuzzed model): the op cannot write one present twice.
  EXPECT_EQ(cache_note({.select = false, .padding = {}, .past = 3, .one_cache = true}),
            "Concat kept: key and value are one Concat's output");
  // MultiHeadAttention's present value has the key's head size.
  EXPECT_EQ(cache_note({.select = false, .padding = {}, .v_head_size = 16, .past = 3}),
            "Concat kept: MultiHeadAttention writes the present value in the key's head size, "
            "not v's [2, 4, 8, 16]");
  // The op reads one key/value head expanded to q's four: its present would have four.
  EXPECT_EQ(cache_note({.select = false, .padding = {}, .kv_heads = 1, .past = 3}),
            "Concat kept: the op reads the one key/value head expanded to q's heads, not the "
            "cache");
  // present k is read before the fused node, which would compute it only later.
  EXPECT_EQ(cache_note({.select = false, .padding = {}, .past = 3, .cache_shape_read = true}),
            "Concat kept: Shape 'cache_shape' reads 'present_k' before the attention");
}

// ---- grouped heads and causality: GroupQueryAttention (target ort)

TEST(GroupQuery, ACausalBlockReadsTheGroupedHeads) {
  model m =
      decoder_block{.padding = {}, .kv_heads = 2, .repeat_kv = true, .constant_triangle = true}
          .build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["target"], "com.microsoft GroupQueryAttention");
  EXPECT_EQ(report.fusions[0].params["kv_heads"], 2);
  const onnx::NodeProto* gqa = only(m, "GroupQueryAttention");
  ASSERT_NE(gqa, nullptr);
  // q, k, v (B, S, heads·8), no past, seqlens_k and total_sequence_length from the shapes.
  ASSERT_EQ(gqa->input_size(), 7);
  EXPECT_EQ(gqa->input(3), "");
  EXPECT_EQ(gqa->input(4), "");
  EXPECT_EQ(attribute(*gqa, "num_heads")->i(), 4);
  EXPECT_EQ(attribute(*gqa, "kv_num_heads")->i(), 2);
  // k is the graph's own two heads, not the repeated four: Reshape(Transpose(k)).
  const onnx::NodeProto* reshape = writer_of(m, gqa->input(1));
  ASSERT_NE(reshape, nullptr);
  const onnx::NodeProto* transpose = writer_of(m, reshape->input(0));
  ASSERT_NE(transpose, nullptr);
  EXPECT_EQ(transpose->input(0), "k");
  fusekit::rewrite::check_invariants(m);
  const std::string once = bytes(m);
  EXPECT_TRUE(fusekit::rules::fuse_all(m).fusions.empty());
  EXPECT_EQ(bytes(m), once);
}

// A decode step of one query on a grouped cache of 3 keys, no mask: one new query sees every
// key, so it is causal as it stands.
decoder_block one_query_step() {
  return {.select = false, .padding = {}, .tokens = 1, .kv_heads = 2, .repeat_kv = true, .past = 3};
}

TEST(GroupQuery, ADecodeStepOfOneQueryTakesTheCache) {
  model m = one_query_step().build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["target"], "com.microsoft GroupQueryAttention");
  EXPECT_EQ(report.fusions[0].params["kv_cache"], "past and present in the fused op");
  const onnx::NodeProto* gqa = only(m, "GroupQueryAttention");
  ASSERT_NE(gqa, nullptr);
  EXPECT_EQ(gqa->input(3), "past_k");
  EXPECT_EQ(gqa->input(4), "past_v");
  EXPECT_EQ(writer_of(m, "present_k"), gqa);
  EXPECT_EQ(writer_of(m, "present_v"), gqa);
  fusekit::rewrite::check_invariants(m);
}

// The Shape reads dims the op's inputs prove, so it is rewired and repeat_kv dies with the block:
// nothing then reads present k before the op that writes it.
TEST(GroupQuery, AShapeOfTheRepeatedKeysLeavesTheCacheToTheOp) {
  decoder_block spec = one_query_step();
  spec.repeated_shape_read = true;
  model m = spec.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["kv_cache"], "past and present in the fused op");
  EXPECT_EQ(writer_of(m, "present_k"), only(m, "GroupQueryAttention"));
  const auto& nodes = m.proto.graph().node();
  EXPECT_EQ(std::count_if(nodes.begin(), nodes.end(),
                          [](const onnx::NodeProto& n) { return n.op_type() == "Unsqueeze"; }),
            0);
  fusekit::rewrite::check_invariants(m);
}

// The Shapes of present that size repeat_kv's views die with the block: they read present before
// the op, and yet the op writes it (a TorchScript decode step of LLaMA, Qwen2, Gemma 2).
TEST(GroupQuery, AShapeOfTheCacheThatSizesRepeatKvLeavesTheCacheToTheOp) {
  decoder_block spec = one_query_step();
  spec.repeat_sized_by_cache = true;
  model m = spec.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["kv_cache"], "past and present in the fused op");
  EXPECT_EQ(writer_of(m, "present_k"), only(m, "GroupQueryAttention"));
  EXPECT_EQ(writer_of(m, "present_v"), only(m, "GroupQueryAttention"));
  // The cache's Concats go, and so do the Shapes that sized repeat_kv: nothing is left unread.
  std::set<std::string> read;
  for (const auto& n : m.proto.graph().node()) read.insert(n.input().begin(), n.input().end());
  for (const auto& o : m.proto.graph().output()) read.insert(o.name());
  for (const auto& n : m.proto.graph().node()) {
    EXPECT_NE(n.op_type(), "Concat");
    EXPECT_TRUE(read.contains(n.output(0))) << n.name() << " is read by nothing";
  }
  fusekit::rewrite::check_invariants(m);
}

// ONNX Runtime's CPU GroupQueryAttention rounds more in float16 with a past than the model does;
// MultiHeadAttention on the repeated heads keeps the model's accuracy.
TEST(GroupQuery, AFloat16DecodeStepStaysMultiHeadAttentionOnTheCpuProvider) {
  decoder_block spec = one_query_step();
  spec.type = dtype::float16;
  model m = spec.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["target"], "com.microsoft MultiHeadAttention");
  EXPECT_EQ(report.fusions[0].params["group_query"],
            "no: in float16 with a past it is less accurate on ONNX Runtime's CPU provider "
            "(--provider cuda takes it)");
  model on_cuda = spec.build();
  const auto cuda = fusekit::rules::fuse_all(
      on_cuda, {}, {.fused_target = target::ort, .runs_on = fusekit::rules::provider::cuda});
  ASSERT_EQ(cuda.fusions.size(), 1u);
  EXPECT_EQ(cuda.fusions[0].params["target"], "com.microsoft GroupQueryAttention");
}

TEST(GroupQuery, ADecodeStepsPaddingMaskIsTheBias) {
  decoder_block spec = one_query_step();
  spec.padding = {2, 1, 1, 4};
  model m = spec.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["target"], "com.microsoft GroupQueryAttention");
  const onnx::NodeProto* gqa = only(m, "GroupQueryAttention");
  ASSERT_NE(gqa, nullptr);
  // Inputs 7 to 9 (rotary caches, position ids) empty, 10 the attention bias.
  ASSERT_EQ(gqa->input_size(), 11);
  EXPECT_EQ(gqa->input(7), "");
  EXPECT_EQ(gqa->input(10), "padding");
  fusekit::rewrite::check_invariants(m);
}

// ONNX Runtime's CUDA GroupQueryAttention refuses an attention bias at run time: there a decode
// step's padding mask goes to MultiHeadAttention.
TEST(GroupQuery, TheCudaProviderGivesADecodeStepsMaskToMultiHeadAttention) {
  decoder_block spec = one_query_step();
  spec.type = dtype::float16;
  spec.padding = {2, 1, 1, 4};
  model m = spec.build();
  const auto report = fusekit::rules::fuse_all(
      m, {}, {.fused_target = target::ort, .runs_on = fusekit::rules::provider::cuda});
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["target"], "com.microsoft MultiHeadAttention");
  EXPECT_EQ(report.fusions[0].params["group_query"],
            "no: ONNX Runtime's CUDA GroupQueryAttention takes no attention bias");
  fusekit::rewrite::check_invariants(m);
}

// ONNX Runtime's CUDA provider registers GroupQueryAttention for float16 and bfloat16 alone: a
// float32 block would run on the CPU, its tensors copied there and back.
TEST(GroupQuery, TheCudaProviderGivesAFloat32DecodeStepToMultiHeadAttention) {
  model m = one_query_step().build();
  const auto report = fusekit::rules::fuse_all(
      m, {}, {.fused_target = target::ort, .runs_on = fusekit::rules::provider::cuda});
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["target"], "com.microsoft MultiHeadAttention");
  EXPECT_EQ(report.fusions[0].params["group_query"],
            "no: ONNX Runtime's CUDA GroupQueryAttention has no float32 kernel");
}

// A Shape of present k computed before the attention keeps the Concat; GroupQueryAttention reads
// the past and the new keys apart all the same, and its own present goes unread.
TEST(GroupQuery, ACacheReadBeforeTheAttentionStaysAndTheOpReadsPastAndNewApart) {
  decoder_block spec = one_query_step();
  spec.cache_shape_read = true;
  model m = spec.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["kv_cache"],
            "the op reads past and new keys apart; Concat kept: Shape 'cache_shape' reads "
            "'present_k' before the attention");
  const onnx::NodeProto* gqa = only(m, "GroupQueryAttention");
  ASSERT_NE(gqa, nullptr);
  EXPECT_EQ(gqa->input(3), "past_k");
  EXPECT_EQ(gqa->input(4), "past_v");
  EXPECT_EQ(writer_of(m, "present_k")->op_type(), "Concat");
  EXPECT_EQ(writer_of(m, "present_v")->op_type(), "Concat");
  fusekit::rewrite::check_invariants(m);
  const std::string once = bytes(m);
  EXPECT_TRUE(fusekit::rules::fuse_all(m).fusions.empty());
  EXPECT_EQ(bytes(m), once);
}

// ---- soft-capped scores (Gemma 2): only GroupQueryAttention caps them, after the scale and
// before the mask, as the model does

// A decode step with tanh(s / 50) · 50 between its scale and its padding mask.
decoder_block soft_capped_step() {
  decoder_block spec = one_query_step();
  spec.padding = {2, 1, 1, 4};
  spec.softcap = 50;
  return spec;
}

TEST(SoftCapping, ADecodeStepTakesGroupQueryAttentionWithTheCap) {
  for (const bool multiplies : {false, true}) {
    decoder_block spec = soft_capped_step();
    // Gemma 2's x / c, or x times the reciprocal as the block's type rounds it.
    spec.cap_multiplies = multiplies;
    model m = spec.build();
    const auto report = fusekit::rules::fuse_all(m);
    ASSERT_EQ(report.fusions.size(), 1u);
    EXPECT_EQ(report.fusions[0].params["target"], "com.microsoft GroupQueryAttention");
    EXPECT_EQ(report.fusions[0].params["softcap"], 50.0);
    const onnx::NodeProto* gqa = only(m, "GroupQueryAttention");
    ASSERT_NE(gqa, nullptr);
    EXPECT_EQ(attribute(*gqa, "softcap")->f(), 50.0f);
    EXPECT_EQ(gqa->input(10), "padding");
    EXPECT_EQ(only(m, "Tanh"), nullptr);
    fusekit::rewrite::check_invariants(m);
    const std::string once = bytes(m);
    EXPECT_TRUE(fusekit::rules::fuse_all(m).fusions.empty());
    EXPECT_EQ(bytes(m), once);
  }
}

TEST(SoftCapping, NearMisses) {
  const std::string capped =
      "MatMul 'context': the scores are soft-capped before Softmax (tanh(s / 50) · 50, Gemma 2's "
      "attention logit soft-capping): ";
  // tanh(s / 30) · 50 is no cap the op computes.
  decoder_block two_caps = soft_capped_step();
  two_caps.softcap = 30;
  two_caps.softcap_out = 50;
  EXPECT_EQ(near_miss(two_caps),
            "MatMul 'context': the scores are soft-capped as tanh(s / 30) · 50, not tanh(s / c) · "
            "c with one c, which is the only cap the ops compute");
  // A factor that is not 1/50 as float32 rounds it.
  decoder_block off = soft_capped_step();
  off.cap_multiplies = true;
  off.cap_factor = 0.021;
  EXPECT_EQ(near_miss(off),
            "MatMul 'context': the scores are soft-capped as tanh(s · 0.021) · 50, not tanh(s / c) "
            "· c with one c, which is the only cap the ops compute");
  // A prefill with a padding mask: the op is causal, and a row the mask hides entirely would
  // see other keys than the model's.
  decoder_block prefill{.select = false, .kv_heads = 2, .repeat_kv = true, .softcap = 50};
  EXPECT_EQ(near_miss(prefill),
            capped +
                "of the ops only GroupQueryAttention caps, and it does not take this block: "
                "the mask is not causality alone, and q [2, 4, 5, 8] is not one query");
  // ONNX Runtime's CUDA kernel takes no attention bias, nor float32.
  for (const auto& [type, why] : {std::pair{dtype::float16, "takes no attention bias"},
                                  std::pair{dtype::float32, "has no float32 kernel"}}) {
    decoder_block step = soft_capped_step();
    step.type = type;
    model m = step.build();
    const auto report = fusekit::rules::fuse_all(
        m, {}, {.fused_target = target::ort, .runs_on = fusekit::rules::provider::cuda});
    EXPECT_TRUE(report.fusions.empty());
    ASSERT_EQ(report.near_misses.size(), 1u);
    EXPECT_EQ(report.near_misses[0].reason,
              capped.substr(std::string("MatMul 'context': ").size()) +
                  "of the ops only GroupQueryAttention caps, and it does not take this block: "
                  "ONNX Runtime's CUDA GroupQueryAttention " +
                  why);
  }
  // In float16 with a past the CPU provider's kernel is less accurate than the model.
  decoder_block half = soft_capped_step();
  half.type = dtype::float16;
  EXPECT_EQ(near_miss(half),
            capped +
                "of the ops only GroupQueryAttention caps, and it does not take this block: "
                "in float16 with a past it is less accurate on ONNX Runtime's CPU provider "
                "(--provider cuda takes it)");
  // Attention-23 caps after the mask in ONNX Runtime 1.23, before it later.
  decoder_block onnx = soft_capped_step();
  onnx.opset = 23;
  EXPECT_EQ(near_miss(onnx, target::onnx),
            capped +
                "Attention-23's softcap is applied after the mask by ONNX Runtime 1.23 and "
                "before it by later versions, so the fused model's outputs would depend on "
                "the runtime");
}

TEST(GroupQuery, TheDynamoExportersMergedRepeatIsReadAsTheGroupedHeads) {
  decoder_block spec = one_query_step();
  spec.dynamo_detour = true;
  model m = spec.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["k_layout"], "BNSH via repeat_kv and a 3-D transpose");
  EXPECT_EQ(report.fusions[0].params["kv_cache"], "past and present in the fused op");
  EXPECT_EQ(only(m, "GroupQueryAttention")->input(3), "past_k");
  fusekit::rewrite::check_invariants(m);
  // Regrouped to (2·4, H, L), the Transpose gives no kᵀ of the repeated heads: the op reads
  // the tensor the MatMul reads, transposed back, with its repeated heads.
  spec.regrouped = true;
  model regrouped = spec.build();
  const auto other = fusekit::rules::fuse_all(regrouped);
  ASSERT_EQ(other.fusions.size(), 1u);
  EXPECT_EQ(other.fusions[0].params["target"], "com.microsoft MultiHeadAttention");
  EXPECT_EQ(other.fusions[0].params["k_layout"], "BNHS");
  EXPECT_EQ(other.fusions[0].params["kv_cache"],
            "Concat kept: the op reads the repeated heads, not the cache");
}

// Padding alone of shape [2, 1, 1, 5] is broadcast over the queries by the Add; the ops broadcast
// only a mask's batch and heads, so the emit expands its one row to the queries, as the Add did.
TEST(DecoderSelect, AMaskOfOneRowForEveryQueryIsExpandedToTheQueries) {
  model m = decoder_block{.select = false, .padding = {2, 1, 1, 5}}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["bias_queries"],
            "expanded to q's length, as the model's Add broadcast it");
  const onnx::NodeProto* mha = only(m, "MultiHeadAttention");
  ASSERT_NE(mha, nullptr);
  const onnx::NodeProto* expand = writer_of(m, mha->input(5));
  ASSERT_NE(expand, nullptr);
  EXPECT_EQ(expand->op_type(), "Expand");
  EXPECT_EQ(expand->input(0), "padding");
  fusekit::rewrite::check_invariants(m);
}

// transformers 5 outside dynamo: one query's heads folded into the query axis, a row of them per
// key/value head, against the grouped cache as it is.
decoder_block folded_step() {
  decoder_block spec = one_query_step();
  spec.repeat_kv = false;
  spec.fold_queries = true;
  spec.padding = {2, 1, 1, 4};
  return spec;
}

TEST(GroupQuery, QueryHeadsFoldedIntoTheQueryAxisAreReadUnfolded) {
  model m = folded_step().build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  const auto& params = report.fusions[0].params;
  EXPECT_EQ(params["target"], "com.microsoft GroupQueryAttention");
  EXPECT_EQ(params["kv_heads"], 2);
  EXPECT_EQ(params["query_heads"],
            "folded into the query axis, a row per key/value head: read unfolded");
  EXPECT_EQ(params["kv_cache"], "past and present in the fused op");
  const onnx::NodeProto* gqa = only(m, "GroupQueryAttention");
  ASSERT_NE(gqa, nullptr);
  EXPECT_EQ(gqa->input(3), "past_k");
  EXPECT_EQ(gqa->input(10), "padding");
  // The fold is gone; its unfolding reads the op's output folded again, and stays.
  for (const auto& n : m.proto.graph().node()) EXPECT_NE(n.name(), "fold");
  EXPECT_NE(writer_of(m, "present_k"), nullptr);
  fusekit::rewrite::check_invariants(m);
  const std::string once = bytes(m);
  EXPECT_TRUE(fusekit::rules::fuse_all(m).fusions.empty());
  EXPECT_EQ(bytes(m), once);
}

TEST(GroupQuery, FoldedQueryHeadsOfOneKeyValueHeadAreMultiQueryAttention) {
  decoder_block spec = folded_step();
  spec.kv_heads = 1;  // GPTBigCode: all four query heads in one row, [2, 1, 4, H]
  model m = spec.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["kv_heads"], 1);
  ASSERT_NE(only(m, "GroupQueryAttention"), nullptr);
  EXPECT_EQ(attribute(*only(m, "GroupQueryAttention"), "kv_num_heads")->i(), 1);
}

TEST(GroupQuery, FoldedQueryHeadsGoToMultiHeadAttentionRepeatedWhereGroupQueryCannotTakeThem) {
  decoder_block spec = folded_step();
  spec.head_size = spec.v_head_size = 4;  // GroupQueryAttention's head sizes are multiples of 8
  spec.divisor = 2;
  model m = spec.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  const auto& params = report.fusions[0].params;
  EXPECT_EQ(params["target"], "com.microsoft MultiHeadAttention");
  EXPECT_EQ(params["kv_heads"], "repeated for MultiHeadAttention's one head count");
  EXPECT_EQ(params["kv_cache"],
            "Concat kept: the op reads the key/value heads repeated for each query head, not the "
            "cache");
  fusekit::rewrite::check_invariants(m);
}

TEST(GroupQuery, FoldedQueryHeadsNearMisses) {
  // Rows of two query heads against one key/value head: the MatMul broadcasts, every row reads
  // the same head, and nothing proves the grouping the fused ops apply.
  decoder_block rows = folded_step();
  rows.kv_heads = 1;
  rows.fold = {2, 2, 2, 8};
  EXPECT_EQ(near_miss(rows),
            "MatMul 'context': q's heads are folded into its query axis as [2, 2, 2, 8], whose "
            "rows are not proven to be the key/value heads of kᵀ [2, 1, 8, 4] and v [2, 1, 4, 8]");
  // A mask of its own per key/value head hides keys per row of the fold, which is no query.
  decoder_block per_head = folded_step();
  per_head.padding = {2, 2, 1, 4};
  EXPECT_EQ(near_miss(per_head),
            "MatMul 'context': q's heads are folded into its query axis, and Add 'Add_2' adds [2, "
            "2, 1, 4], not one row for all heads");
}

// Fuses and returns the one fusion's target, and why not GroupQueryAttention where it says.
std::string group_query_note(const decoder_block& spec) {
  model m = spec.build();
  const auto report = fusekit::rules::fuse_all(m);
  if (report.fusions.size() != 1) return "fusions: " + std::to_string(report.fusions.size());
  fusekit::rewrite::check_invariants(m);
  const auto& params = report.fusions[0].params;
  const std::string why = params.value("group_query", "");
  return params.value("target", "") + (why.empty() ? "" : " (" + why + ")");
}

TEST(GroupQuery, NearMissesStayMultiHeadAttention) {
  // ONNX Runtime's GroupQueryAttention takes head sizes that are multiples of 8.
  EXPECT_EQ(group_query_note({.padding = {},
                              .head_size = 4,
                              .kv_heads = 2,
                              .repeat_kv = true,
                              .v_head_size = 4,
                              .constant_triangle = true}),
            "com.microsoft MultiHeadAttention (no: the head size 4 is not a proven multiple of 8)");
  // One query on keys joined before it, not a cache: without a past the op takes as many keys as
  // queries.
  decoder_block joined = one_query_step();
  joined.present_returned = false;
  EXPECT_EQ(group_query_note(joined),
            "com.microsoft MultiHeadAttention (no: the new keys [2, 2, 4, 8] are not proven as "
            "many as the queries [2, 4, 1, 8])");
  // Causality and padding summed: GroupQueryAttention has no bias to carry the padding.
  EXPECT_EQ(group_query_note({.kv_heads = 2, .repeat_kv = true, .constant_triangle = true}),
            "com.microsoft MultiHeadAttention");
}

// ---- differential attention (DiffLlama): one softmax's probabilities times each half of v

// p = Softmax(q·kᵀ / √8), then Concat(Transpose(p·v₁), Transpose(p·v₂)) on `axis`, as the dynamo
// exporter writes DiffLlama's two attention calls with one q and k; `identity_view` puts a
// Reshape to the product's own shape before each Transpose (its decode step), `v2_heads` gives
// v₂ another head count (broadcast by its MatMul), `one_turned` transposes the first product only
// (as many tokens as heads, so that both join).
struct differential_block {
  std::int64_t axis = -1;
  bool identity_view = false;
  std::int64_t v2_heads = 4;
  bool one_turned = false;
  // The first product in float16 between Casts, as a converter that keeps ops in float32 by name
  // leaves DiffLlama's: v₁ float16, p cast to it, the product cast back.
  bool first_in_float16 = false;
  // Each product turned by a Transpose without perm, which reverses its dims: the head size
  // first, joined on axis 0.
  bool reversed = false;

  model build() const {
    model_builder b(17);
    const std::int64_t n = one_turned ? 4 : 5;
    auto q = b.input("q", dtype::float32, {2, 4, n, 8});
    auto k = b.input("k", dtype::float32, {2, 4, n, 8});
    auto v1 = b.input("v1", first_in_float16 ? dtype::float16 : dtype::float32, {2, 4, n, 8});
    auto v2 = b.input("v2", dtype::float32, {2, v2_heads, n, 8});
    auto kt = b.op("Transpose", {k}, {{"perm", std::vector<std::int64_t>{0, 1, 3, 2}}});
    auto scores =
        b.op("Mul", {b.op("MatMul", {q, kt}), b.scalar(dtype::float32, 1 / std::sqrt(8.0))});
    auto p = b.op("Softmax", {scores}, {{"axis", -1}}, {.name = "softmax"});
    auto half = [&](value v, bool turned) {
      const bool cast = first_in_float16 && v.name == "v1";
      value y = cast ? b.op("Cast",
                            {b.op("MatMul", {b.op("Cast", {p}, {{"to", 10}}, {.name = "p16"}), v})},
                            {{"to", 1}})
                     : b.op("MatMul", {p, v});
      if (identity_view)
        y = b.op("Reshape", {y, b.initializer(dtype::int64, {4}, {2, 4, double(n), 8})});
      if (reversed) return b.op("Transpose", {y});
      return turned ? b.op("Transpose", {y}, {{"perm", std::vector<std::int64_t>{0, 2, 1, 3}}}) : y;
    };
    b.output(b.op("Concat", {half(v1, true), half(v2, !one_turned)}, {{"axis", axis}},
                  {.name = "joined"}),
             dtype::float32,
             dims(reversed     ? std::vector<std::int64_t>{16, n, 4, 2}
                  : axis == -1 ? std::vector<std::int64_t>{2, n, 4, 16}
                               : std::vector<std::int64_t>{2, n, 8, 8}));
    return b.build_model();
  }
};

TEST(DifferentialAttention, TwoProductsOfOneSoftmaxAreOneBlockOnVWhole) {
  for (const bool identity_view : {false, true}) {
    model m = differential_block{.identity_view = identity_view}.build();
    const auto report = fusekit::rules::fuse_all(m);
    // The products join first, then the block on v whole fuses, v of head size 16.
    ASSERT_EQ(report.fusions.size(), 2u);
    EXPECT_EQ(report.fusions[0].rule, "differential-attention-values");
    EXPECT_EQ(report.fusions[1].params["value_head_size"], "v's own: k and v read 3-D");
    const auto types = op_types(m);
    EXPECT_EQ(std::count(types.begin(), types.end(), "MultiHeadAttention"), 1);
    EXPECT_EQ(std::count(types.begin(), types.end(), "Softmax"), 0);
    EXPECT_EQ(std::count(types.begin(), types.end(), "MatMul"), 0);
    const onnx::NodeProto* concat = only(m, "Concat");
    ASSERT_NE(concat, nullptr);
    EXPECT_EQ(std::vector<std::string>(concat->input().begin(), concat->input().end()),
              (std::vector<std::string>{"v1", "v2"}));
    fusekit::rewrite::check_invariants(m);
    const std::string once = bytes(m);
    EXPECT_TRUE(fusekit::rules::fuse_all(m).fusions.empty());
    EXPECT_EQ(bytes(m), once);
  }
}

// A Transpose without perm reverses the dims: the products' last axis is the first, where they
// join.
TEST(DifferentialAttention, AProductTurnedByATransposeWithoutPermJoinsOnItsFirstAxis) {
  model m = differential_block{.axis = 0, .reversed = true}.build();
  const auto report = fusekit::rules::fuse_all(m, {.rules = {"differential-attention-values"}});
  ASSERT_EQ(report.fusions.size(), 1u)
      << (report.near_misses.empty() ? std::string() : report.near_misses[0].reason);
  fusekit::rewrite::check_invariants(m);
}

// The near misses of the join, each leaving the model as it is (the attention rule's own near
// miss, the second product outside its block, is not the one asked for here).
std::string join_near_miss(const differential_block& spec) {
  model m = spec.build();
  const std::string before = bytes(m);
  const auto report = fusekit::rules::fuse_all(m, {.rules = {"differential-attention-values"}});
  EXPECT_EQ(bytes(m), before);
  if (report.near_misses.size() != 1)
    return "near misses: " + std::to_string(report.near_misses.size());
  return report.near_misses[0].anchor + ": " + report.near_misses[0].reason;
}

TEST(DifferentialAttention, NearMisses) {
  // Joined on the heads: not the products' last axis, so not v's.
  EXPECT_EQ(join_near_miss({.axis = 2}),
            "Concat 'joined': Concat 'joined' joins the products on another axis than their last "
            "(v's head size)");
  // v₂ of one head, broadcast by its MatMul: v₁ and v₂ do not join.
  EXPECT_EQ(join_near_miss({.v2_heads = 1}),
            "Concat 'joined': v₁ [2, 4, 5, 8] and v₂ [2, 1, 5, 8] are not proven to agree in every "
            "dim but the last");
  // One product transposed, the other not: no one view of the product on v whole.
  EXPECT_EQ(join_near_miss({.one_turned = true}),
            "Concat 'joined': the two products are not viewed alike before the Concat");
  // The first product computed in float16: one product on v whole has one type.
  EXPECT_EQ(join_near_miss({.first_in_float16 = true}),
            "Concat 'joined': the two products read the probabilities as float16 'p16' and "
            "float32 'softmax': one product on v whole would compute one of them in another type "
            "than the model");
}

TEST(DifferentialAttention, OtherJoinsOfProductsAreNoNearMiss) {
  model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, 5, 8});
  auto w1 = b.input("w1", dtype::float32, {8, 8});
  auto w2 = b.input("w2", dtype::float32, {8, 8});
  auto theta = b.op("MatMul", {x, w1});
  // A rotary embedding's cat(θ, θ): one product, read twice.
  b.output(b.op("Concat", {theta, theta}, {{"axis", -1}}, {.name = "angles"}));
  // Two projections of one input, on another axis than theirs: no softmax weighs them.
  b.output(b.op("Concat", {b.op("MatMul", {x, w1}), b.op("MatMul", {x, w2})}, {{"axis", 1}},
                {.name = "projections"}));
  model m = b.build_model();
  const auto report = fusekit::rules::fuse_all(m, {.rules = {"differential-attention-values"}});
  EXPECT_TRUE(report.fusions.empty());
  EXPECT_TRUE(report.near_misses.empty());
}

// ---- the contracts of the fused ops, one class of refusal each

TEST(FusedOpContracts, GroupedKeyValueHeadsGoToAttentionWhenQsHeadsAreAMultiple) {
  model m = decoder_block{.opset = 23, .kv_heads = 2, .repeat_kv = true}.build();
  const auto report = fusekit::rules::fuse_all(m, {}, on(target::onnx));
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["kv_heads"], 2);
  // repeat_kv goes: Attention reads the graph's own two-head k and v.
  EXPECT_EQ(op_types(m), (std::vector<std::string>{"Where", "Add", "Attention"}));
  EXPECT_EQ(m.proto.graph().node(2).input(1), "k");
  EXPECT_EQ(m.proto.graph().node(2).input(2), "v");
  fusekit::rewrite::check_invariants(m);
}

TEST(FusedOpContracts, AttentionReadsTheRepeatedHeadsForAMaskPerQueryHead) {
  // ONNX Runtime's Attention refuses at run time a mask of 4 heads for 2 key/value heads.
  model m =
      decoder_block{.opset = 23, .padding = {2, 4, 5, 5}, .kv_heads = 2, .repeat_kv = true}.build();
  const auto report = fusekit::rules::fuse_all(m, {}, on(target::onnx));
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["kv_heads"],
            "repeated: ONNX Runtime's Attention takes a mask per query head only for as many "
            "key/value heads");
  EXPECT_NE(only(m, "Attention")->input(1), "k");
  fusekit::rewrite::check_invariants(m);
}

TEST(FusedOpContracts, MultiHeadAttentionReadsTheRepeatedKeyValueHeads) {
  model m = decoder_block{.kv_heads = 2, .repeat_kv = true}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_FALSE(report.fusions[0].params.contains("kv_heads"));
  for (const auto& n : m.proto.graph().node())
    if (n.op_type() == "MultiHeadAttention") {
      EXPECT_NE(n.input(1), "k");
    }
}

// Multi-query attention by broadcasting: one key/value head that the MatMuls broadcast against
// q's four.
TEST(FusedOpContracts, OneKeyValueHeadIsExpandedWhereTheOpNeedsQsHeads) {
  model m = decoder_block{.kv_heads = 1}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["kv_heads"],
            "1, expanded for MultiHeadAttention's one head count");
  EXPECT_EQ(only(m, "MultiHeadAttention")->input(1), "scaled-dot-product-attention/Expand_0/out_0");
  fusekit::rewrite::check_invariants(m);
  // Attention takes one head for q's four as it is …
  model onnx = decoder_block{.opset = 23, .padding = {2, 1, 5, 5}, .kv_heads = 1}.build();
  ASSERT_EQ(fusekit::rules::fuse_all(onnx, {}, on(target::onnx)).fusions.size(), 1u);
  EXPECT_EQ(only(onnx, "Attention")->input(1), "k");
  // … but ONNX Runtime checks a mask per query head against the key/value heads.
  model per_head = decoder_block{.opset = 23, .padding = {2, 4, 5, 5}, .kv_heads = 1}.build();
  const auto expanded = fusekit::rules::fuse_all(per_head, {}, on(target::onnx));
  ASSERT_EQ(expanded.fusions.size(), 1u);
  EXPECT_EQ(expanded.fusions[0].params["kv_heads"],
            "1, expanded: ONNX Runtime's Attention takes a mask per query head only for as many "
            "key/value heads");
  EXPECT_NE(only(per_head, "Attention")->input(1), "k");
  fusekit::rewrite::check_invariants(per_head);
}

// Multi-head latent attention and image transformers: v's head size is its own.
TEST(FusedOpContracts, MultiHeadAttentionReadsKeyAndValue3DForAValueHeadSizeOfItsOwn) {
  model m = decoder_block{.v_head_size = 16}.build();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["value_head_size"], "v's own: k and v read 3-D");
  const onnx::NodeProto* mha = only(m, "MultiHeadAttention");
  ASSERT_NE(mha, nullptr);
  EXPECT_NE(mha->input(1), "k");
  EXPECT_NE(mha->input(2), "v");
  fusekit::rewrite::check_invariants(m);
  // Attention takes v 4-D of any head size.
  model onnx = decoder_block{.opset = 23, .v_head_size = 16}.build();
  const auto fused = fusekit::rules::fuse_all(onnx, {}, on(target::onnx));
  ASSERT_EQ(fused.fusions.size(), 1u);
  EXPECT_EQ(only(onnx, "Attention")->input(2), "v");
}

TEST(FusedOpContracts, NearMisses) {
  // A MatMul cannot pair four query heads with three key/value heads, nor can a fused op.
  EXPECT_EQ(near_miss({.opset = 23, .kv_heads = 3}, target::onnx),
            "MatMul 'context': the heads of q [2, 4, 5, 8] and of kᵀ [2, 3, 8, 5] and v [2, 3, 5, "
            "8] are not proven equal, nor one key/value head, nor (target onnx) a proven multiple "
            "of the key/value heads");
  // Nor two, without repeat_kv: MultiHeadAttention takes one head count for all three.
  EXPECT_EQ(near_miss({.kv_heads = 2}),
            "MatMul 'context': the heads of q [2, 4, 5, 8] and of kᵀ [2, 2, 8, 5] and v [2, 2, 5, "
            "8] are not proven equal, nor one key/value head, nor (target onnx) a proven multiple "
            "of the key/value heads");
  // MultiHeadAttention has no float64 kernel.
  EXPECT_EQ(near_miss({.type = dtype::float64}),
            "MatMul 'context': MultiHeadAttention takes float32 or float16, not float64");
  // Attention's softmax would run in float32, narrower than the model's float64.
  EXPECT_EQ(near_miss({.type = dtype::float64, .opset = 23}, target::onnx),
            "MatMul 'context': Attention is emitted for float32, float16 or bfloat16, not "
            "float64: its softmax would run in a narrower type than the model's");
  // MultiHeadAttention's schema has no bfloat16.
  EXPECT_EQ(near_miss({.type = dtype::bfloat16, .fill = minus_inf}),
            "MatMul 'context': MultiHeadAttention takes float32 or float16, not bfloat16");
  // 1/1e-40 (as float32) is 1e40, beyond float32: the scale attribute would be inf.
  EXPECT_EQ(near_miss({.divisor = 1e-40}),
            "MatMul 'context': the scale 1.0000053899175752e+40 is not a positive finite float32 "
            "number");
  // A one-element divisor of rank 5 makes the scores 5-D: the fused op would change the rank.
  EXPECT_EQ(near_miss({.divisor_dims = {1, 1, 1, 1, 1}}),
            "MatMul 'context': the scores Softmax reads [1, 2, 4, 5, 5] are not proven to have "
            "QKᵀ's shape [batch, heads, sequence, key length] for q [2, 4, 5, 8] and kᵀ [2, 4, 8, "
            "5]");
}

TEST(FusedOpContracts, TheNanGuardZeroesTheRowsTheBiasHidesEntirely) {
  // torch's SDPA: Add(scores, mask) → Softmax → Where(IsNaN(p), 0, p). The fused op gives NaN
  // for a row of −inf, so its output is zeroed where the bias's largest entry is −inf.
  model_builder b(18);
  auto q = b.input("q", dtype::float32, {2, 4, 5, 8});
  auto k = b.input("k", dtype::float32, {2, 4, 5, 8});
  auto v = b.input("v", dtype::float32, {2, 4, 5, 8});
  auto kt = b.op("Transpose", {k}, {{"perm", std::vector<std::int64_t>{0, 1, 3, 2}}});
  auto s = b.op("Mul", {b.op("MatMul", {q, kt}), b.scalar(dtype::float32, 0.5)});
  auto p = b.op("Softmax", {b.op("Add", {s, b.input("mask", dtype::float32, {2, 1, 5, 5})})},
                {{"axis", -1}});
  p = b.op("Where", {b.op("IsNaN", {p}), b.scalar(dtype::float32, 0.0), p});
  b.output(b.op("MatMul", {p, v}, {}, {.name = "context"}), dtype::float32, {2, 4, 5, 8});
  model m = b.build_model();
  const auto report = fusekit::rules::fuse_all(m);
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params["nan_guard"], "rows the bias hides entirely give 0");
  EXPECT_EQ(op_types(m),
            (std::vector<std::string>{"Transpose", "Reshape", "MultiHeadAttention", "Reshape",
                                      "ReduceMax", "Equal", "Transpose", "Where", "Transpose"}));
  fusekit::rewrite::check_invariants(m);
}

}  // namespace
