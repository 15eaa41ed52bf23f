// Twenty patterns of the kind the rule library needs, in one translation unit: this file is where
// the DSL's compile time is measured (see benchmarks/RESULTS.md), and each pattern is run over the sample DiT
// trunk, where the counts of what it finds are known.
#include <gtest/gtest.h>

#include "dit_model.hpp"
#include "fusekit/pattern/pattern.hpp"

namespace {

using namespace fusekit::pattern;
using fusekit::dtype;

// Attention cores.
constexpr auto qk = op<"MatMul">(capture<"q">, capture<"kt">);
constexpr auto dit_mul = op<"MatMul">(
    optional<"Cast">(
        op<"Softmax">(commutative(op<"Mul">(optional<"Cast">(qk), constant_scalar<"s">)))
            .attr<"axis">(last_axis)),
    capture<"v">);
constexpr auto dit_div = op<"MatMul">(
    optional<"Cast">(op<"Softmax">(op<"Div">(optional<"Cast">(qk), constant_scalar<"s">))
                         .attr<"axis">(last_axis)),
    capture<"v">);
constexpr auto prescaled_q = op<"MatMul">(
    op<"Softmax">(
        op<"MatMul">(commutative(op<"Mul">(capture<"q">, constant_scalar<"s">)), capture<"kt">))
        .attr<"axis">(last_axis),
    capture<"v">);
constexpr auto additive_mask = op<"MatMul">(
    op<"Softmax">(
        commutative(op<"Add">(commutative(op<"Mul">(qk, constant_scalar<"s">)), capture<"mask">)))
        .attr<"axis">(last_axis),
    capture<"v">);
constexpr auto where_mask = op<"MatMul">(
    op<"Softmax">(op<"Where">(capture<"keep">, commutative(op<"Mul">(qk, constant_scalar<"s">)),
                              constant_scalar<"fill">))
        .attr<"axis">(last_axis),
    capture<"v">);
// torch SDPA (SD3, Flux): 1/√√d applied to both Q and Kᵀ, computed from Q's shape.
constexpr auto sdpa_scale = op<"Sqrt">(op<"Div">(
    constant_scalar<"one">.value(1.0),
    op<"Sqrt">(
        op<"Cast">(op<"Slice">(op<"Shape">(capture<"q">), any(), any(), any())).multi_use())));
// GPT-2: causal mask sliced from a tril buffer.
constexpr auto gpt2_mask =
    op<"Where">(op<"Cast">(op<"Slice">(constant<"tril">, any(), any(), any(), any()))
                    .attr<"to">(dtype::boolean),
                capture<"scores">, constant_scalar<"fill">);

// Layouts around attention.
constexpr auto k_from_bnsh = op<"Transpose">(capture<"k">).attr<"perm">(ints(0, 1, 3, 2));
constexpr auto k_from_bsnh = op<"Transpose">(capture<"k">).attr<"perm">(ints(0, 2, 3, 1));
constexpr auto head_split =
    op<"Transpose">(op<"Reshape">(capture<"x">, constant<"shape">)).attr<"perm">(ints(0, 2, 1, 3));
constexpr auto head_merge =
    op<"Reshape">(op<"Transpose">(capture<"x">).attr<"perm">(ints(0, 2, 1, 3)), constant<"shape">);
constexpr auto biased_projection =
    commutative(op<"Add">(op<"MatMul">(capture<"x">, constant<"w">), constant<"b">));

// Normalisations and activations.
constexpr auto mean_centered = op<"Sub">(capture<"x">, op<"ReduceMean">(capture<"x">));
constexpr auto layer_norm = op<"Div">(
    capture<"centered">(mean_centered),
    op<"Sqrt">(op<"Add">(
        op<"ReduceMean">(op<"Pow">(capture<"centered">, constant_scalar<"two">.value(2.0))),
        constant_scalar<"eps">)));
constexpr auto rms_norm = commutative(op<"Mul">(
    capture<"x">, op<"Reciprocal">(op<"Sqrt">(commutative(op<"Add">(
                      op<"ReduceMean">(op<"Pow">(capture<"x">, constant_scalar<"two">.value(2.0))),
                      constant_scalar<"eps">))))));
constexpr auto gelu_erf = commutative(
    op<"Mul">(commutative(op<"Mul">(capture<"x">, constant_scalar<"half">.value(0.5))),
              commutative(op<"Add">(op<"Erf">(op<"Div">(capture<"x">, constant_scalar<"sqrt2">)),
                                    constant_scalar<"one">.value(1.0)))));
constexpr auto silu = commutative(op<"Mul">(capture<"x">, op<"Sigmoid">(capture<"x">)));
constexpr auto rotate_half = op<"Concat">(op<"Neg">(op<"Slice">(capture<"x">, any(), any(), any())),
                                          op<"Slice">(capture<"x">, any(), any(), any()));
constexpr auto rope = commutative(op<"Add">(commutative(op<"Mul">(capture<"x">, capture<"cos">)),
                                            commutative(op<"Mul">(rotate_half, capture<"sin">))));
constexpr auto qk_norm_scores = op<"MatMul">(
    op<"SimplifiedLayerNormalization">(capture<"q">, constant<"gq">).multi_use(), capture<"kt">);
constexpr auto any_attention = any_of(dit_mul, dit_div, additive_mask, where_mask).bind<"form">();

template <class P>
std::size_t count(const P& p, const fusekit::graph& g) {
  std::size_t n = 0;
  for (const auto& a : trace(p, g)) n += a.matched;
  return n;
}

TEST(PatternCatalog, FindsWhatTheSampleTrunkContains) {
  const auto model = fusekit::samples::make_dit_model({.layers = 3});
  const fusekit::graph g(model);
  EXPECT_EQ(count(dit_mul, g), 3u);
  EXPECT_EQ(count(any_attention, g), 3u);
  EXPECT_EQ(count(k_from_bnsh, g), 3u);
  EXPECT_EQ(count(head_split, g), 9u);
  EXPECT_EQ(count(head_merge, g), 3u);
  EXPECT_EQ(count(biased_projection, g), 9u);
  EXPECT_EQ(count(rotate_half, g), 6u);
  EXPECT_EQ(count(rope, g), 6u);
  // The trunk has none of these forms.
  EXPECT_EQ(count(dit_div, g), 0u);
  EXPECT_EQ(count(prescaled_q, g), 0u);
  EXPECT_EQ(count(additive_mask, g), 0u);
  EXPECT_EQ(count(where_mask, g), 0u);
  EXPECT_EQ(count(sdpa_scale, g), 0u);
  EXPECT_EQ(count(gpt2_mask, g), 0u);
  EXPECT_EQ(count(k_from_bsnh, g), 0u);
  EXPECT_EQ(count(layer_norm, g), 0u);
  EXPECT_EQ(count(rms_norm, g), 0u);
  EXPECT_EQ(count(gelu_erf, g), 0u);
  EXPECT_EQ(count(silu, g), 0u);
  EXPECT_EQ(count(qk_norm_scores, g), 0u);
}

TEST(PatternCatalog, DecomposedNormsAndActivations) {
  fusekit::build::model_builder b(17);
  auto x = b.input("x", dtype::float32, {2, 8});
  auto mean = b.op("ReduceMean", {x}, {{"axes", std::vector<std::int64_t>{-1}}});
  auto centered = b.op("Sub", {x, mean});
  auto var = b.op("ReduceMean", {b.op("Pow", {centered, b.scalar(dtype::float32, 2)})},
                  {{"axes", std::vector<std::int64_t>{-1}}});
  auto ln =
      b.op("Div", {centered, b.op("Sqrt", {b.op("Add", {var, b.scalar(dtype::float32, 1e-5)})})});
  auto ms = b.op("ReduceMean", {b.op("Pow", {x, b.scalar(dtype::float32, 2)})},
                 {{"axes", std::vector<std::int64_t>{-1}}});
  auto rms = b.op(
      "Mul",
      {b.op("Reciprocal", {b.op("Sqrt", {b.op("Add", {b.scalar(dtype::float32, 1e-6), ms})})}), x});
  auto erf = b.op("Erf", {b.op("Div", {x, b.scalar(dtype::float32, 1.4142135)})});
  auto gelu = b.op("Mul", {b.op("Mul", {x, b.scalar(dtype::float32, 0.5)}),
                           b.op("Add", {erf, b.scalar(dtype::float32, 1.0)})});
  auto silu_out = b.op("Mul", {b.op("Sigmoid", {x}), x});
  for (const auto& v : {ln, rms, gelu, silu_out}) b.output(v);
  const auto model = b.build();
  const fusekit::graph g(model);
  EXPECT_EQ(count(layer_norm, g), 1u);
  EXPECT_EQ(count(rms_norm, g), 1u);
  EXPECT_EQ(count(gelu_erf, g), 1u);
  EXPECT_EQ(count(silu, g), 1u);
}

}  // namespace
