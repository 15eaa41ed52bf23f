// A rule with a guard, an optional part and a second output: a transformer's residual Add and the
// LayerNormalization after it become one com.microsoft.SkipLayerNormalization, ONNX Runtime's
// fused kernel, which also folds in the bias Add a Linear layer leaves before the residual.
//
//   x ── Add(·, bias)? ── Add(·, skip) ──┬── LayerNormalization(·, gamma, beta?) ── y
//                                        └── the next layer's residual Add, if any
//   ==>
//   x, skip, gamma, beta?, bias? ── com.microsoft.SkipLayerNormalization ──┬── output 0: y
//                                                                          └── output 3: the sum
//
// Accepted: the operands of both Adds in either order; a bias only where ONNX Runtime takes one, a
// vector of the hidden size (any other stays an Add before the fused op); a sum that later nodes
// read too, which output 3 (input_skip_bias_sum) then replaces. Refused, with the reason in the
// report: a LayerNormalization of bfloat16 or over another axis than the last; an input of another
// rank than 2 or 3, or a skip not proven of its shape (the kernel broadcasts neither); a gamma or
// beta that is not a vector of the hidden size; a sum read before the LayerNormalization, where
// output 3 does not exist yet; a Mean or InvStdDev that is read (emit replaces Y alone).
#pragma once

#include <string>
#include <string_view>

#include "fusekit/graph/facts.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/rule.hpp"

namespace my_rules {
using namespace fusekit::pattern;
using fusekit::dtype;
using fusekit::truth;
using fusekit::value_id;
using fusekit::rewrite::verdict;

struct skip_layer_norm {
  static constexpr std::string_view name = "skip-layer-norm";

  // A check that has a fallback belongs in the pattern, not the guard: a guard's no is final,
  // while a bias that fails here leaves the second alternative to match without it.
  static constexpr auto biased =
      commutative(op<"Add">(capture<"x">, capture<"bias">.proven_rank<1>().same_dim<0, "x", -1>()));
  // multi_use: the next layer's residual may read the sum too. Emit replaces it, so the Add goes.
  static constexpr auto residual = [](auto in) {
    return commutative(op<"Add">(in, capture<"skip">)).multi_use();
  };
  // The kernel's types, float and float16, checked on the root: a refusal there is reported.
  static constexpr auto pattern =
      op<"LayerNormalization">(any_of(residual(biased), residual(capture<"x">)), capture<"gamma">,
                               maybe(capture<"beta">))
          .dtype<dtype::float32, dtype::float16>()
          .attr<"axis">(last_axis);

  // How to break each reason the guard refuses for, which selfcheck cannot read from its code: the
  // captures these write, put into an instance that fused, must be refused in these words.
  struct rank_four {
    static auto write(auto& w) { return w.input(w.type(), {2, 2, 2, w.leaf_shape().back()}); }
  };
  struct like_x {
    static auto write(auto& w) { return w.input(w.type(), *w.dims("x")); }
  };
  struct a_row {
    static auto write(auto& w) { return w.input(w.type(), {w.dim("x", -1)}); }
  };
  struct one_element {
    static auto write(auto& w) { return w.initializer(w.type(), {1}, {1.0}); }
  };
  static constexpr auto refusals = fusekit::pattern::refusals(
      refusal<"SkipLayerNormalization takes rank 2 or 3">(source<"x">(written<rank_four>),
                                                          source<"skip">(written<like_x>)),
      refusal<": not the same shape">(source<"skip">(written<a_row>)),
      refusal<"SkipLayerNormalization takes a vector of the hidden size">(
          source<"gamma">(written<one_element>)));

  static verdict guard(const fusekit::graph& g, const auto& m) {
    const fusekit::facts& f = fusekit::facts_of(g);
    const value_id x = get<"x">(m);
    if (const auto rank = f.rank(x); rank != 2 && rank != 3)
      return verdict::no(describe_value(g, x) + " is " + f.shape_text(x) +
                         ", SkipLayerNormalization takes rank 2 or 3");
    if (verdict v = same_shape(g, x, get<"skip">(m)); !v) return v;
    if (verdict v = hidden_vector(g, "gamma", get<"gamma">(m), x); !v) return v;
    if (has<"beta">(m))
      if (verdict v = hidden_vector(g, "beta", get<"beta">(m), x); !v) return v;
    return verdict::yes();
  }

  static void emit(const fusekit::graph& g, const auto& m, fusekit::rewrite::emitter& e) {
    const value_id sum = g.input(m.root(), 0);
    // Output 3 only where the sum is read on: otherwise the kernel need not write it.
    const bool read_on = g.consumers(sum).size() > 1 || g.is_graph_output(sum);
    // Copied, never left to the default: LayerNormalization's is 1e-5, the fused op's 1e-12.
    const float epsilon = g.attribute_float(m.root(), "epsilon").value();
    const auto out = e.ops("SkipLayerNormalization",
                           {e.value(get<"x">(m)), e.value(get<"skip">(m)), e.value(get<"gamma">(m)),
                            e.value(get<"beta">(m)), e.value(get<"bias">(m))},
                           {{"epsilon", epsilon}}, "com.microsoft", read_on ? 4 : 1);
    e.replace_root(out[0]);
    if (read_on) e.replace(sum, out[3]);
    e.note("bias", has<"bias">(m));
  }

 private:
  // The kernel adds input and skip element by element, broadcasting neither: each dim must be
  // proven equal, and a dim nothing proves is never equal. Where the proof broke ends the reason,
  // as it ends the pattern's own near misses.
  static verdict same_shape(const fusekit::graph& g, value_id x, value_id skip) {
    const fusekit::facts& f = fusekit::facts_of(g);
    auto refuse = [&](truth t, const std::string& why) {
      return verdict::no(describe_value(g, skip) + " is " + f.shape_text(skip) + " and " +
                         describe_value(g, x) + " is " + f.shape_text(x) +
                         (t == truth::no ? ": not the same shape" : ": not proven the same shape") +
                         (why.empty() ? "" : "; " + why));
    };
    const auto rank = f.rank(skip);
    if (!rank) return refuse(truth::unknown, f.why_unknown(skip));
    if (rank != f.rank(x)) return refuse(truth::no, {});
    for (int i = 0; i < int(*rank); ++i)
      if (const truth same = f.same_dim(x, i, skip, i); same != truth::yes)
        return refuse(
            same, f.why_unknown(skip, i).empty() ? f.why_unknown(x, i) : f.why_unknown(skip, i));
    return verdict::yes();
  }

  // gamma and beta are vectors of the hidden size: the kernel broadcasts nothing.
  static verdict hidden_vector(const fusekit::graph& g, std::string_view what, value_id v,
                               value_id x) {
    const fusekit::facts& f = fusekit::facts_of(g);
    if (f.rank(v) == 1 && f.same_dim(v, 0, x, -1) == truth::yes) return verdict::yes();
    return verdict::no(std::string(what) + " (" + describe_value(g, v) + ") is " + f.shape_text(v) +
                       ", SkipLayerNormalization takes a vector of the hidden size, [" +
                       f.text(*f.dim_of(x, -1)) + "]");
  }
};

}  // namespace my_rules
