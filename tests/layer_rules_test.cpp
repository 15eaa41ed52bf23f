// The rest of a transformer layer: its norms (LayerNorm, RMSNorm, each with the residual before it)
// and its GELU, in the spellings exporters write, fused by the bundled library; then near misses,
// each with the reason the report gives. ONNX Runtime parity on the real exports is
// tests/python/test_conformance.py.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "fusekit/graph/model_builder.hpp"
#include "fusekit/rules/all.hpp"
#include "test_support.hpp"

namespace {

using fusekit::dtype;
using fusekit::model;
using fusekit::build::dim_spec;
using fusekit::build::model_builder;
using fusekit::build::value;
using fusekit::testing::bytes;
using fusekit::testing::op_types;
using target = fusekit::rules::target;

fusekit::rules::fusion_options on(target t) {
  fusekit::rules::fusion_options o;
  o.fused_target = t;
  return o;
}

fusekit::rules::fusion_options on_cuda() {
  fusekit::rules::fusion_options o;
  o.runs_on = fusekit::rules::provider::cuda;
  return o;
}

// "domain.Op(inputs) -> outputs" of every node: what a reader checks a rewrite by.
std::string nodes_of(const model& m) {
  std::string out;
  for (const auto& n : m.proto.graph().node()) {
    out += (n.domain().empty() ? "" : n.domain() + ".") + n.op_type() + "(";
    for (int i = 0; i < n.input_size(); ++i) out += (i ? ", " : "") + n.input(i);
    out += ") -> ";
    for (int i = 0; i < n.output_size(); ++i) out += (i ? ", " : "") + n.output(i);
    out += "\n";
  }
  return out;
}

// Runs the named rules (all the library's where none are named); expects nothing to change and
// returns every near miss, one a line.
// The elements of constant `name`, as a rule reads them.
std::vector<double> constant_values(const model& m, std::string_view name) {
  const fusekit::graph g(m);
  const fusekit::tensor_values values(*g.constant_tensor(*g.find_value(name)), m.directory());
  std::vector<double> out;
  for (std::int64_t i = 0; i < values.size(); ++i) out.push_back(values.as_double(i));
  return out;
}

std::string near_misses(model m, std::vector<std::string> rules = {}, target t = target::ort,
                        fusekit::rules::provider p = fusekit::rules::provider::cpu) {
  const std::string before = bytes(m);
  fusekit::rules::fusion_options o = on(t);
  o.runs_on = p;
  const auto report = fusekit::rules::fuse_all(m, {.rules = std::move(rules)}, o);
  EXPECT_EQ(bytes(m), before);
  EXPECT_TRUE(report.fusions.empty());
  std::string out;
  for (const auto& n : report.near_misses) out += n.anchor + ": " + n.reason + "\n";
  return out;
}

// ---- GELU ---------------------------------------------------------------------------------------

// The exact GELU as TorchScript writes nn.GELU(): (x·(1 + erf(x/√2)))·0.5, after a Linear's bias.
struct gelu_spec {
  dtype type = dtype::float32;
  int opset = 17;
  bool tanh = false;  // transformers' NewGELU: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
  double kappa = 0.044715;
  std::vector<std::int64_t> bias_dims{16};  // empty: no bias
  bool scalar = false;                      // x a 0-d tensor

  model build() const {
    model_builder b(opset);
    value x =
        scalar ? b.input("x", type, std::vector<dim_spec>{}) : b.input("x", type, {2, "S", 16});
    if (!bias_dims.empty())
      x = b.op(
          "Add",
          {x, b.initializer("bias", type, bias_dims, std::vector<double>(bias_dims.back(), 0.25))},
          {}, {.name = "biased"});
    value y;
    if (tanh) {
      auto cube = b.op("Pow", {x, b.scalar(type, 3.0)});
      auto inner = b.op("Mul", {b.scalar(type, 0.7978845608),
                                b.op("Add", {x, b.op("Mul", {b.scalar(type, kappa), cube})})});
      auto cdf = b.op("Add", {b.scalar(type, 1.0), b.op("Tanh", {inner})});
      y = b.op("Mul", {b.op("Mul", {b.scalar(type, 0.5), x}), cdf}, {}, {.name = "gelu"});
    } else {
      auto erf = b.op("Erf", {b.op("Div", {x, b.scalar(type, 1.4142135)})});
      auto cdf = b.op("Add", {erf, b.scalar(type, 1.0)});
      y = b.op("Mul", {b.op("Mul", {x, cdf}), b.scalar(type, 0.5)}, {}, {.name = "gelu"});
    }
    if (scalar)
      b.output(y, type, std::vector<dim_spec>{});
    else
      b.output(y, type, {2, "S", 16});
    return b.build_model();
  }
};

TEST(GeluRules, TheExactGeluAndItsBiasBecomeBiasGelu) {
  model m = gelu_spec{}.build();
  const auto report = fusekit::rules::fuse_all(m);
  EXPECT_EQ(nodes_of(m), "com.microsoft.BiasGelu(x, bias) -> gelu\n");
  ASSERT_EQ(report.fusions.size(), 2u);  // Gelu in the first pass, its bias in the second
  EXPECT_EQ(report.fusions[0].rule, "gelu");
  EXPECT_EQ(report.fusions[0].params.dump(), R"({"form":1})");
  EXPECT_EQ(report.fusions[1].rule, "bias-gelu");
  EXPECT_TRUE(report.near_misses.empty());
}

TEST(GeluRules, TheTanhApproximationBecomesFastGeluWithItsBias) {
  model m = gelu_spec{.tanh = true}.build();
  fusekit::rules::fuse_all(m);
  EXPECT_EQ(nodes_of(m), "com.microsoft.FastGelu(x, bias) -> gelu\n");
}

TEST(GeluRules, TargetOnnxWritesGeluTwentyAndLeavesTheBias) {
  model exact = gelu_spec{.opset = 20}.build();
  fusekit::rules::fuse_all(exact, {}, on(target::onnx));
  EXPECT_EQ(nodes_of(exact), "Add(x, bias) -> biased\nGelu(biased) -> gelu\n");

  model approximated = gelu_spec{.opset = 20, .tanh = true, .bias_dims = {}}.build();
  fusekit::rules::fuse_all(approximated, {}, on(target::onnx));
  ASSERT_EQ(op_types(approximated), std::vector<std::string>{"Gelu"});
  EXPECT_EQ(approximated.proto.graph().node(0).attribute(0).s(), "tanh");
}

TEST(GeluRulesNearMiss, TargetOnnxBeforeOpsetTwenty) {
  // Gelu came in opset 20; fusekit never raises a model's opset.
  EXPECT_EQ(near_misses(gelu_spec{.bias_dims = {}}.build(), {"gelu"}, target::onnx),
            "Mul 'gelu': target onnx needs ai.onnx opset 20 for Gelu; the model imports 17 and "
            "fusekit does not raise it\n");
}

TEST(GeluRulesNearMiss, BFloat16HasNoKernelOnTheCpuProvider) {
  // The fused model must still load where the user runs it.
  EXPECT_EQ(near_misses(gelu_spec{.type = dtype::bfloat16, .bias_dims = {}}.build(), {"gelu"}),
            "Mul 'gelu': graph input 'x' is bfloat16, Gelu has no bfloat16 kernel on ONNX "
            "Runtime's CPU provider (--provider cuda fuses it)\n");
}

TEST(GeluRulesNearMiss, Float16IsLeftToTheCpuProvidersFloat32) {
  // Unfused, ONNX Runtime's CPU provider computes these float16 ops in float32; fused, it rounds.
  EXPECT_EQ(near_misses(gelu_spec{.type = dtype::float16, .bias_dims = {}}.build(), {"gelu"}),
            "Mul 'gelu': graph input 'x' is float16: ONNX Runtime's CPU provider runs these ops "
            "of a float16 model in float32, and Gelu would round its output where the model does "
            "not (--provider cuda fuses it)\n");
}

// ONNX Runtime's CUDA provider runs the unfused ops in the model's type, each rounding its output;
// the fused kernels compute in float32 and round once.
TEST(GeluRules, HalfPrecisionFusesForTheCudaProvider) {
  for (const dtype type : {dtype::float16, dtype::bfloat16}) {
    model exact = gelu_spec{.type = type}.build();
    fusekit::rules::fuse_all(exact, {}, on_cuda());
    EXPECT_EQ(nodes_of(exact), "com.microsoft.BiasGelu(x, bias) -> gelu\n");
    model approximated = gelu_spec{.type = type, .tanh = true}.build();
    fusekit::rules::fuse_all(approximated, {}, on_cuda());
    EXPECT_EQ(nodes_of(approximated), "com.microsoft.FastGelu(x, bias) -> gelu\n");
  }
}

TEST(GeluRulesNearMiss, Float64IsNoTypeTheCudaProviderFuses) {
  // ONNX Runtime's float64 kernels cover some of the ops and not others: none is written.
  EXPECT_EQ(near_misses(gelu_spec{.type = dtype::float64, .bias_dims = {}}.build(), {"gelu"},
                        target::ort, fusekit::rules::provider::cuda),
            "Mul 'gelu': graph input 'x' is float64, Gelu is fused for float32, float16 and "
            "bfloat16\n");
}

TEST(GeluRulesNearMiss, AnotherCubicCoefficientIsNoGelu) {
  // 0.5·x·(1 + tanh(√(2/π)·(x + 0.05·x³))) approximates nothing FastGelu computes.
  EXPECT_EQ(
      near_misses(gelu_spec{.tanh = true, .kappa = 0.05, .bias_dims = {}}.build(), {"gelu-tanh"}),
      "Mul 'gelu': input 0 of Mul 'Mul_4', input 1 of Add 'Add_5', input 1 of Mul 'Mul_6', "
      "input 0 of Tanh 'Tanh_8', input 1 of Add 'Add_9', input 1 of Mul 'gelu': constant "
      "scalar '0.044715' is 0.05, expected 0.044715\n");
}

TEST(GeluRulesNearMiss, AScalarIsNoInputOfFastGelu) {
  // ONNX Runtime's FastGelu fails a 0-d input at run time; com.microsoft Gelu takes one.
  EXPECT_EQ(
      near_misses(gelu_spec{.tanh = true, .bias_dims = {}, .scalar = true}.build(), {"gelu-tanh"}),
      "Mul 'gelu': graph input 'x' is a scalar, and ONNX Runtime's FastGelu takes 1 or more "
      "dims\n");
  model exact = gelu_spec{.bias_dims = {}, .scalar = true}.build();
  fusekit::rules::fuse_all(exact);
  EXPECT_EQ(nodes_of(exact), "com.microsoft.Gelu(x) -> gelu\n");
}

TEST(GeluRulesNearMiss, ABiasOfAnotherShapeStaysAnAdd) {
  // A [1, 16] bias broadcasts as the Add does, not as BiasGelu's vector: Gelu fuses alone.
  model m = gelu_spec{.bias_dims = {1, 16}}.build();
  const auto report = fusekit::rules::fuse_all(m);
  EXPECT_EQ(nodes_of(m), "Add(x, bias) -> biased\ncom.microsoft.Gelu(biased) -> gelu\n");
  ASSERT_EQ(report.near_misses.size(), 1u);
  EXPECT_EQ(report.near_misses[0].reason,
            "input 0 of Add 'biased', input 0 of Gelu 'gelu/Gelu_0': graph input 'x' is not proven "
            "rank 1: it is [2, S, 16]");
}

TEST(GeluRules, BloomsFactoredTanhBecomesFastGelu) {
  // 0.5·x·(1 + tanh(√(2/π)·x·(1 + 0.044715·x·x))), the same polynomial factored.
  model_builder b;
  auto x = b.input("x", dtype::float32, {2, 16});
  auto c = [&](double v) { return b.scalar(dtype::float32, v); };
  auto poly = b.op("Add", {b.op("Mul", {b.op("Mul", {x, c(0.044715)}), x}), c(1.0)});
  auto inner = b.op("Mul", {b.op("Mul", {x, c(0.7978846)}), poly});
  auto cdf = b.op("Add", {b.op("Tanh", {inner}), c(1.0)});
  b.output(b.op("Mul", {b.op("Mul", {x, c(0.5)}), cdf}, {}, {.name = "y"}), dtype::float32);
  model m = b.build_model();
  fusekit::rules::fuse_all(m);
  EXPECT_EQ(nodes_of(m), "com.microsoft.FastGelu(x) -> y\n");
}

TEST(GeluRules, ClipsSigmoidGateBecomesQuickGelu) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {2, 16});
  auto gate = b.op("Sigmoid", {b.op("Mul", {x, b.scalar(dtype::float32, 1.702)})});
  b.output(b.op("Mul", {x, gate}, {}, {.name = "y"}), dtype::float32);
  model m = b.build_model();
  fusekit::rules::fuse_all(m);
  EXPECT_EQ(nodes_of(m), "com.microsoft.QuickGelu(x) -> y\n");
  EXPECT_FLOAT_EQ(m.proto.graph().node(0).attribute(0).f(), 1.702F);
}

TEST(GeluRules, ASiluBecomesQuickGeluOfAlphaOne) {
  // x·σ(x) is x·σ(α·x) for α 1.
  model_builder b;
  auto x = b.input("x", dtype::float32, {2, 16});
  b.output(b.op("Mul", {x, b.op("Sigmoid", {x})}, {}, {.name = "y"}), dtype::float32, {2, 16});
  model m = b.build_model();
  fusekit::rules::fuse_all(m);
  EXPECT_EQ(nodes_of(m), "com.microsoft.QuickGelu(x) -> y\n");
  EXPECT_FLOAT_EQ(m.proto.graph().node(0).attribute(0).f(), 1.0F);
}

TEST(GeluRulesNearMiss, AGateOfAnotherValueIsNoNearMiss) {
  // x·σ(g), GLU's gate of another projection, is no activation of x: nothing to report.
  model_builder b;
  auto x = b.input("x", dtype::float32, {2, 16});
  auto g = b.input("g", dtype::float32, {2, 16});
  b.output(b.op("Mul", {x, b.op("Sigmoid", {g})}), dtype::float32, {2, 16});
  EXPECT_EQ(near_misses(b.build_model()), "");
}

// ---- LayerNorm and RMSNorm ----------------------------------------------------------------------

// LayerNorm as opset < 17 exports and hand-written models write it:
//   d = x − mean(x); y = d ÷ √(mean(d²) + ε) · γ + β
struct layer_norm_spec {
  int opset = 13;
  std::int64_t keepdims = 1;
  std::int64_t axis = -1;
  dtype type = dtype::float32;

  model build() const {
    model_builder b(opset);
    auto x = b.input("x", type, {2, "S", 16});
    auto mean = [&](value v) {
      if (opset >= 18)
        return b.op("ReduceMean", {v, b.initializer(dtype::int64, {1}, {double(axis)})},
                    {{"keepdims", keepdims}});
      return b.op("ReduceMean", {v},
                  {{"axes", std::vector<std::int64_t>{axis}}, {"keepdims", keepdims}});
    };
    auto d = b.op("Sub", {x, mean(x)});
    auto variance = mean(b.op("Pow", {d, b.scalar(type, 2.0)}));
    auto sd = b.op("Sqrt", {b.op("Add", {variance, b.scalar(type, 1e-5)})});
    auto scaled = b.op("Mul", {b.op("Div", {d, sd}),
                               b.initializer("gamma", type, {16}, std::vector<double>(16, 1.5))});
    b.output(b.op("Add", {scaled, b.initializer("beta", type, {16}, std::vector<double>(16, 0.5))},
                  {}, {.name = "y"}),
             type, {2, "S", 16});
    return b.build_model();
  }
};

TEST(NormRules, ADecomposedLayerNormBecomesLayerNormalization) {
  model m = layer_norm_spec{}.build();
  const auto report = fusekit::rules::fuse_all(m);
  EXPECT_EQ(nodes_of(m), "LayerNormalization(x, gamma, beta) -> y\n");
  const auto& ln = m.proto.graph().node(0);
  ASSERT_EQ(ln.attribute_size(), 2);
  EXPECT_EQ(ln.attribute(1).name(), "epsilon");
  EXPECT_FLOAT_EQ(ln.attribute(1).f(), 1e-5F);
  EXPECT_TRUE(report.near_misses.empty());

  model eighteen = layer_norm_spec{.opset = 18}.build();  // ReduceMean's axes an input
  fusekit::rules::fuse_all(eighteen, {}, on(target::onnx));
  EXPECT_EQ(nodes_of(eighteen), "LayerNormalization(x, gamma, beta) -> y\n");
}

TEST(NormRulesNearMiss, ALayerNormOverAnotherAxis) {
  // Normalising each column is no LayerNorm of the last axis.
  EXPECT_EQ(near_misses(layer_norm_spec{.axis = 1}.build(), {"layer-normalization"}),
            "Add 'y': input 1 of Sub 'Sub_1', input 0 of Div 'Div_8', input 0 of Mul 'Mul_9', "
            "input 0 of Add 'y': ReduceMean 'ReduceMean_0': axes = [1], expected the last axis\n");
}

TEST(NormRulesNearMiss, AMeanNotKept) {
  // keepdims 0: x − mean broadcasts the means along the wrong axis.
  EXPECT_EQ(near_misses(layer_norm_spec{.keepdims = 0}.build(), {"layer-normalization"}),
            "Add 'y': input 1 of Sub 'Sub_1', input 0 of Div 'Div_8', input 0 of Mul 'Mul_9', "
            "input 0 of Add 'y': ReduceMean 'ReduceMean_0': keepdims = 0, expected 1\n");
}

TEST(NormRulesNearMiss, TargetOnnxBeforeOpsetSeventeen) {
  EXPECT_EQ(near_misses(layer_norm_spec{}.build(), {"layer-normalization"}, target::onnx),
            "Add 'y': target onnx needs ai.onnx opset 17 for LayerNormalization; the model "
            "imports 13 and fusekit does not raise it\n");
}

// RMSNorm as transformers' LlamaRMSNorm exports: x.to(float32), x·(1/√(mean(x²) + ε)), back to
// x's type, times the weight (Gemma's 1 + weight, here `gemma`).
struct rms_norm_spec {
  dtype type = dtype::float32;
  int opset = 17;
  dtype computed = dtype::float32;  // the statistics' type: the Casts' target
  bool gemma = false;
  double epsilon = 1e-6;
  // Scaled by no weight: by a scalar (DiffLlama's head norm times 1 − λ), or by nothing (torch's
  // RMSNorm without elementwise_affine).
  enum class scaling { weight, scalar, none } scaled = scaling::weight;
  bool hidden_named = false;  // the last axis a name, not a number

  model build() const {
    model_builder b(opset);
    const std::vector<dim_spec> dims{2, "S", hidden_named ? dim_spec("H") : dim_spec(16)};
    auto x = b.input("x", type, dims);
    auto wide = b.op("Cast", {x}, {{"to", computed}});
    auto square = b.op("Pow", {wide, b.scalar(computed, 2.0)});
    auto mean =
        b.op("ReduceMean", {square}, {{"axes", std::vector<std::int64_t>{-1}}, {"keepdims", 1}});
    auto rms = b.op("Sqrt", {b.op("Add", {mean, b.scalar(computed, epsilon)})});
    auto normed = b.op("Mul", {wide, b.op("Reciprocal", {rms})});
    if (scaled == scaling::none) {
      b.output(b.op("Cast", {normed}, {{"to", type}}, {.name = "y"}), type, dims);
      return b.build_model();
    }
    value weight = scaled == scaling::scalar
                       ? b.scalar(type, 0.8)
                       : b.initializer("weight", type, {16}, std::vector<double>(16, 0.5));
    if (gemma) weight = b.op("Add", {b.scalar(type, 1.0), weight}, {}, {.name = "one_plus_w"});
    b.output(b.op("Mul", {weight, b.op("Cast", {normed}, {{"to", type}})}, {}, {.name = "y"}), type,
             dims);
    return b.build_model();
  }
};

TEST(NormRules, AnRmsNormBecomesSimplifiedLayerNormalization) {
  model m = rms_norm_spec{}.build();
  fusekit::rules::fuse_all(m);
  EXPECT_EQ(nodes_of(m), "SimplifiedLayerNormalization(x, weight) -> y\n");

  // The scale is 1 + weight, computed: constant-folding makes it an initializer of its name.
  model gemma = rms_norm_spec{.gemma = true}.build();
  fusekit::rules::fuse_all(gemma);
  EXPECT_EQ(nodes_of(gemma), "SimplifiedLayerNormalization(x, one_plus_w) -> y\n");

  model standard = rms_norm_spec{.opset = 23}.build();
  fusekit::rules::fuse_all(standard, {}, on(target::onnx));
  EXPECT_EQ(nodes_of(standard), "RMSNormalization(x, weight) -> y\n");
}

// The op's scale is that number in every element of the last axis; 1 where nothing scales.
TEST(NormRules, AnRmsNormScaledByAScalarOrByNothingTakesThatNumberAsItsScale) {
  using scaling = rms_norm_spec::scaling;
  for (const auto& [scaled, value] :
       {std::pair{scaling::scalar, double(0.8f)}, {scaling::none, 1.0}}) {
    model m = rms_norm_spec{.scaled = scaled}.build();
    EXPECT_EQ(fusekit::rules::fuse_all(m).fusions.size(), 1u);
    // Unscaled, the model's Cast back to x's type (here float32 to float32) follows the norm.
    const std::vector<std::string> expected =
        scaled == scaling::none ? std::vector<std::string>{"SimplifiedLayerNormalization", "Cast"}
                                : std::vector<std::string>{"SimplifiedLayerNormalization"};
    EXPECT_EQ(op_types(m), expected);
    const auto& norm = m.proto.graph().node(0);
    EXPECT_EQ(norm.op_type(), "SimplifiedLayerNormalization");
    EXPECT_EQ(constant_values(m, norm.input(1)), std::vector<double>(16, value));
  }
  // A last axis of no known length: the scalar expanded to it at run time.
  model named = rms_norm_spec{.scaled = scaling::scalar, .hidden_named = true}.build();
  fusekit::rules::fuse_all(named);
  EXPECT_EQ(nodes_of(named),
            "Shape(x) -> rms-normalization/Shape_0/out_0\n"
            "Gather(rms-normalization/Shape_0/out_0, rms-normalization/const_0) -> "
            "rms-normalization/Gather_0/out_0\n"
            "Expand(init_9, rms-normalization/Gather_0/out_0) -> rms-normalization/Expand_0/out_0\n"
            "SimplifiedLayerNormalization(x, rms-normalization/Expand_0/out_0) -> y\n");
}

TEST(NormRulesNearMiss, AFloat16IslandStaysTheCpuProvidersFloat32) {
  // float32 statistics of float16 x, crossed by the pattern, refused by the dtype policy.
  EXPECT_EQ(near_misses(rms_norm_spec{.type = dtype::float16}.build(), {"rms-normalization"}),
            "Mul 'y': graph input 'x' is float16: ONNX Runtime's CPU provider runs these ops of a "
            "float16 model in float32, and SimplifiedLayerNormalization would round its output "
            "where the model does not (--provider cuda fuses it)\n");
}

TEST(NormRules, HalfPrecisionFusesForTheCudaProvider) {
  // LlamaRMSNorm's float32 island of a float16 or bfloat16 x: the fused op's own precision.
  for (const dtype type : {dtype::float16, dtype::bfloat16}) {
    model rms = rms_norm_spec{.type = type}.build();
    fusekit::rules::fuse_all(rms, {}, on_cuda());
    EXPECT_EQ(nodes_of(rms), "SimplifiedLayerNormalization(x, weight) -> y\n");
    model layer = layer_norm_spec{.type = type}.build();
    fusekit::rules::fuse_all(layer, {}, on_cuda());
    EXPECT_EQ(nodes_of(layer), "LayerNormalization(x, gamma, beta) -> y\n");
  }
}

TEST(NormRulesNearMiss, StatisticsNarrowerThanX) {
  // float16 statistics of a float32 x: the fused op's float32 would not compute what the model
  // does.
  EXPECT_EQ(near_misses(rms_norm_spec{.computed = dtype::float16}.build(), {"rms-normalization"}),
            "Mul 'y': ReduceMean 'ReduceMean_3' runs in float16 on float32 graph input 'x'; "
            "SimplifiedLayerNormalization computes in float32\n");
}

TEST(NormRulesNearMiss, AnEpsilonNoFloatHolds) {
  // The fused ops take ε as a float attribute.
  EXPECT_EQ(near_misses(rms_norm_spec{.computed = dtype::float64, .epsilon = 1e39}.build(),
                        {"rms-normalization"}),
            "Mul 'y': input 1 of Add 'Add_5', input 0 of Sqrt 'Sqrt_6', input 0 of Reciprocal "
            "'Reciprocal_7', input 1 of Mul 'Mul_8', input 0 of Cast 'Cast_9', input 1 of Mul 'y': "
            "constant scalar 'epsilon' is 1e+39, expected at most 3.4028234663852886e+38\n");
}

TEST(NormRulesNearMiss, TargetOnnxBeforeOpsetTwentyThree) {
  EXPECT_EQ(near_misses(rms_norm_spec{}.build(), {"rms-normalization"}, target::onnx),
            "Mul 'y': target onnx needs ai.onnx opset 23 for RMSNormalization; the model imports "
            "17 and fusekit does not raise it\n");
}

// A post-norm residual (BERT): LayerNormalization(Add(Add(MatMul, bias), skip)), the sum read by
// the next layer when `read_on`.
struct residual_spec {
  std::vector<fusekit::build::dim_spec> skip_dims{2, "S", 16};
  bool read_on = true;
  bool rms = false;  // SimplifiedLayerNormalization, through LlamaRMSNorm's own-type Cast
  bool biased = true;
  dtype type = dtype::float32;

  model build() const {
    model_builder b(17);
    auto h = b.input("h", type, {2, "S", 16});
    value x = b.op("MatMul", {h, b.initializer("w", type, {16, 16}, std::vector<double>(256, 0.1))},
                   {}, {.name = "projected"});
    if (biased)
      x = b.op("Add", {x, b.initializer("bias", type, {16}, std::vector<double>(16, 0.25))}, {},
               {.name = "biased"});
    auto sum = b.op("Add", {x, b.input("skip", type, skip_dims)}, {}, {.name = "sum"});
    auto gamma = b.initializer("gamma", type, {16}, std::vector<double>(16, 1.5));
    value read = sum;
    value y;
    if (rms) {
      read = b.op("Cast", {sum}, {{"to", type}}, {.name = "as_float"});
      y = b.op("SimplifiedLayerNormalization", {read, gamma}, {{"axis", -1}}, {.name = "y"});
    } else {
      y = b.op("LayerNormalization",
               {sum, gamma, b.initializer("beta", type, {16}, std::vector<double>(16, 0.5))},
               {{"axis", -1}}, {.name = "y"});
    }
    b.output(y, type, {2, "S", 16});
    if (read_on) b.output(b.op("Neg", {read}, {}, {.name = "next"}), type);
    return b.build_model();
  }
};

TEST(NormRules, AResidualAndItsBiasFoldIntoSkipLayerNormalization) {
  model m = residual_spec{}.build();
  const auto report = fusekit::rules::fuse_all(m, {}, on_cuda());
  EXPECT_EQ(nodes_of(m),
            "MatMul(h, w) -> projected\n"
            "com.microsoft.SkipLayerNormalization(projected, skip, gamma, beta, bias) -> y, , , "
            "sum\n"
            "Neg(sum) -> next\n");
  ASSERT_EQ(report.fusions.size(), 1u);
  EXPECT_EQ(report.fusions[0].params.dump(), R"({"bias":true})");

  // The sum read by the norm alone: what ONNX Runtime fuses itself, on either provider.
  model last = residual_spec{.read_on = false}.build();
  fusekit::rules::fuse_all(last);
  EXPECT_EQ(nodes_of(last),
            "MatMul(h, w) -> projected\n"
            "com.microsoft.SkipLayerNormalization(projected, skip, gamma, beta, bias) -> y\n");
}

TEST(NormRules, AHalfPrecisionResidualFoldsForTheCudaProvider) {
  for (const dtype type : {dtype::float16, dtype::bfloat16}) {
    model m = residual_spec{.type = type}.build();
    fusekit::rules::fuse_all(m, {}, on_cuda());
    EXPECT_EQ(nodes_of(m),
              "MatMul(h, w) -> projected\n"
              "com.microsoft.SkipLayerNormalization(projected, skip, gamma, beta, bias) -> y, , , "
              "sum\n"
              "Neg(sum) -> next\n");
  }
}

TEST(NormRules, AnRmsNormThroughItsCastFoldsTheResidual) {
  // The next layer reads the Cast's output, the sum by another name: output 3 replaces both.
  model m = residual_spec{.rms = true, .biased = false}.build();
  fusekit::rules::fuse_all(m, {}, on_cuda());
  EXPECT_EQ(nodes_of(m),
            "MatMul(h, w) -> projected\n"
            "com.microsoft.SkipSimplifiedLayerNormalization(projected, skip, gamma, ) -> y, , , "
            "as_float\n"
            "Neg(as_float) -> next\n");
}

TEST(NormRulesNearMiss, ASkipThatBroadcasts) {
  // A [1, S, 16] skip (a position embedding) broadcasts over the batch; the fused op adds
  // element by element.
  EXPECT_EQ(near_misses(residual_spec{.skip_dims = {1, "S", 16}, .biased = false}.build(),
                        {"skip-layer-normalization"}),
            "LayerNormalization 'y': graph input 'skip' is [1, S, 16] and MatMul 'projected' is "
            "[2, S, 16]: not the same shape, and SkipLayerNormalization broadcasts neither\n");
}

TEST(NormRulesNearMiss, ASumReadOnForTheCpuProvider) {
  // On ONNX Runtime's CPU provider the fused ops are slower than the Add and the norm they
  // replace; the default provider keeps them apart where the sum is read on.
  EXPECT_EQ(near_misses(residual_spec{}.build(), {"skip-layer-normalization"}),
            "LayerNormalization 'y': Add 'sum' is read on: on ONNX Runtime's CPU provider (1.30 "
            "on) SkipLayerNormalization runs slower than the Add and the norm it replaces "
            "(--provider cuda fuses it)\n");
  // The next layer reads the sum through the Cast: read on all the same.
  EXPECT_EQ(
      near_misses(residual_spec{.rms = true, .biased = false}.build(), {"skip-rms-normalization"}),
      "SimplifiedLayerNormalization 'y': Cast 'as_float' is read on: on ONNX Runtime's CPU "
      "provider (1.30 on) SkipSimplifiedLayerNormalization runs slower than the Add and the "
      "norm it replaces (--provider cuda fuses it)\n");
}

}  // namespace
