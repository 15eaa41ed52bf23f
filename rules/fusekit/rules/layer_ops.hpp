// The fused ops of the rest of a transformer layer (its norms and activations) and what a rule must
// prove before it emits one, written once for every family that emits them.
//
// clang-format off
//                    --target ort                               --target onnx
//   LayerNorm        LayerNormalization (any opset: ONNX        LayerNormalization (opset ≥ 17)
//                    Runtime registers it below 17 too)
//     + residual     com.microsoft SkipLayerNormalization       —
//   RMSNorm          SimplifiedLayerNormalization (ai.onnx      RMSNormalization (opset ≥ 23)
//                    domain, ONNX Runtime's)
//     + residual     com.microsoft SkipSimplifiedLayerNormalization   —
//   GELU (erf)       com.microsoft Gelu                         Gelu (opset ≥ 20)
//   GELU (tanh)      com.microsoft FastGelu                     Gelu approximate="tanh" (opset ≥ 20)
//     + bias         com.microsoft BiasGelu, FastGelu's bias    —
//   x·σ(α·x)         com.microsoft QuickGelu                    —
//   RoPE             com.microsoft RotaryEmbedding              RotaryEmbedding (opset ≥ 23)
//   dtype            float32; with --provider cuda also float16 and bfloat16
// clang-format on
//
// Every op above has kernels for float32 on ONNX Runtime's CPU and CUDA providers, and for float16
// and bfloat16 on CUDA (its kernel table, docs/OperatorKernels.md). The CPU provider has float16
// kernels for the norms and RotaryEmbedding only (a float16 GELU runs there cast to float32 and
// back) and none for bfloat16.
//
// Which types fuse is the provider's accuracy, not only its kernels. The fused ops compute in
// float32 and round their output once. ONNX Runtime's CUDA provider has float16 and bfloat16
// kernels for the elementary ops and runs the unfused chain in the model's type, rounding after
// every op, so there the fused op is the more accurate form (judged so, both models run with every
// op rounding to its type, the converted fixtures' mean error against their float32 originals is
// 0.71 to 1.00 times the unfused one's: tests/models/CONFORMANCE.md). The CPU provider has no
// float16 kernels for most elementary ops and runs a float16 model's runs of them in float32,
// casting once at each end, so the unfused chain rounds once too, and a fused float16 kernel can
// round more: measured on the converted fixtures, a float16 LLaMA whose RMSNorms were fused came
// out 30% less accurate against its float32 original than unfused. So float16 and bfloat16 fuse for
// --provider cuda, and stay unfused for the CPU provider and for target onnx, whose runtime is not
// named. The residual forms exist in ONNX Runtime only: target onnx leaves the residual Add beside
// the norm.
#pragma once

#include <string>
#include <string_view>

#include "fusekit/graph/facts.hpp"
#include "fusekit/graph/graph.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/rule.hpp"
#include "options.hpp"

namespace fusekit::rules::layer {

using rewrite::verdict;

// The one element type fused for every provider and target (above: why not float16 or
// bfloat16 on the CPU provider).
inline constexpr dtype fused_type = dtype::float32;

inline verdict admits_dtype(const graph& g, value_id x, std::string_view op,
                            const fusion_options& o) {
  const dtype t = g.type(x);
  const bool half = t == dtype::float16 || t == dtype::bfloat16;
  if (t == fused_type || (half && o.fused_target == target::ort && o.runs_on == provider::cuda))
    return verdict::yes();
  if (o.fused_target == target::ort && o.runs_on == provider::cuda)
    return verdict::no(pattern::describe_value(g, x) + " is " + std::string(dtype_name(t)) + ", " +
                       std::string(op) + " is fused for float32, float16 and bfloat16");
  const std::string cuda_fuses = o.fused_target == target::ort ? " (--provider cuda fuses it)" : "";
  if (t == dtype::float16)
    return verdict::no(pattern::describe_value(g, x) +
                       " is float16: ONNX Runtime's CPU provider "
                       "runs these ops of a float16 model in float32, and " +
                       std::string(op) + " would round its output where the model does not" +
                       cuda_fuses);
  return verdict::no(pattern::describe_value(g, x) + " is " + std::string(dtype_name(t)) + ", " +
                     std::string(op) + " has no " + std::string(dtype_name(t)) +
                     " kernel on ONNX Runtime's CPU provider" +
                     (t == dtype::bfloat16 ? cuda_fuses : std::string()));
}

// Target onnx writes the standard op, which exists from `since` on; fusekit never raises a
// model's opset, since every other node would then be read under newer semantics.
inline verdict admits_opset(const graph& g, target to, std::string_view op, int since) {
  if (to != target::onnx || g.opset("") >= since) return verdict::yes();
  return verdict::no("target onnx needs ai.onnx opset " + std::to_string(since) + " for " +
                     std::string(op) + "; the model imports " + std::to_string(g.opset("")) +
                     " and fusekit does not raise it");
}

// A scale, bias or shift the op reads as a vector of the normalised (last) axis: the ops
// broadcast nothing else, so a [1, 1, H] or a scalar one is refused rather than reshaped.
inline verdict admits_hidden_vector(const graph& g, std::string_view what, value_id v, value_id x,
                                    std::string_view op) {
  const facts& f = facts_of(g);
  if (f.rank(v) == 1 && f.same_dim(v, 0, x, -1) == truth::yes) return verdict::yes();
  const sym* hidden = f.dim_of(x, -1);
  return verdict::no(std::string(what) + " (" + pattern::describe_value(g, v) + ") is " +
                     f.shape_text(v) + ", " + std::string(op) +
                     " takes a vector of the last axis, [" + (hidden ? f.text(*hidden) : "?") +
                     "]" + (f.why_unknown(v).empty() ? "" : "; " + f.why_unknown(v)));
}

// The residual forms add input and skip element by element and broadcast neither: each dim must
// be proven equal, and a dim nothing proves is never equal.
inline verdict admits_same_shape(const graph& g, value_id x, value_id skip, std::string_view op) {
  const facts& f = facts_of(g);
  auto refuse = [&](truth t, const std::string& why) {
    return verdict::no(pattern::describe_value(g, skip) + " is " + f.shape_text(skip) + " and " +
                       pattern::describe_value(g, x) + " is " + f.shape_text(x) +
                       (t == truth::no ? ": not the same shape" : ": not proven the same shape") +
                       ", and " + std::string(op) + " broadcasts neither" +
                       (why.empty() ? "" : "; " + why));
  };
  const auto rank = f.rank(skip);
  if (!rank) return refuse(truth::unknown, f.why_unknown(skip));
  if (rank != f.rank(x)) return refuse(truth::no, {});
  for (int i = 0; i < int(*rank); ++i)
    if (const truth same = f.same_dim(x, i, skip, i); same != truth::yes)
      return refuse(same,
                    f.why_unknown(skip, i).empty() ? f.why_unknown(x, i) : f.why_unknown(skip, i));
  return verdict::yes();
}

// Both operand orders of the commutative ops the decompositions multiply and add with.
inline constexpr auto mul = [](auto a, auto b) {
  return pattern::commutative(pattern::op<"Mul">(a, b));
};
inline constexpr auto add = [](auto a, auto b) {
  return pattern::commutative(pattern::op<"Add">(a, b));
};

// Whether a node of `op_type` computes part of n's inputs within `depth` producers: what makes an
// anchor of a rule rooted at a common op (Mul, Add) look like the rule's block, so that a failed
// match there is a near miss worth reporting and one at any other Mul is not.
inline bool reads_op_within(const graph& g, node_id n, std::string_view op_type, int depth) {
  if (depth == 0) return false;
  for (value_id in : g.inputs(n)) {
    if (in == no_id) continue;
    const node_id p = g.producer(in);
    if (p == no_id) continue;
    if (g.op_type(p) == op_type && g.domain(p).empty()) return true;
    if (reads_op_within(g, p, op_type, depth - 1)) return true;
  }
  return false;
}

}  // namespace fusekit::rules::layer
