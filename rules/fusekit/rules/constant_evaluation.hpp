// Constant evaluation: a value computed from constants alone, larger than the facts hold (their 64
// elements, constant_folding.hpp), becomes an initializer where a node that the model's inputs
// decide reads it. What exporters write as a computation on constants: Swin's shifted-window
// attention mask, built from a ConstantOfShape by nine ScatterNDs, views, a difference of window
// ids, an Equal and a Where, thousands of elements at every stage.
//
//   ConstantOfShape ── ScatterND ×9 ── Reshape ── Transpose ── … ── Sub ── Equal ── Where ── mask
//   ─┐
//                                                                              scores ── Add ── …
//   ==>
//   initializer mask ── Add
//
// The root is the last node of such a chain: its output fixed (facts::fixed, the same on every
// run) and read by a node that is not, or by one that writes a graph output and stays a node. Its
// emit evaluates the whole chain upstream in one step, so a chain of any depth folds in one pass
// and the nodes only it read die with it.
//
// Evaluated (graph/array.hpp, in doubles rounded to each value's type as every op runs): views
// (Identity, Reshape, Squeeze, Unsqueeze, Flatten, Transpose, Expand), Cast and CastLike,
// Concat, Slice, Gather, ScatterND without reduction, Where, ConstantOfShape, Range, Neg, Abs,
// Not, the comparisons and logical ops, Add, Sub, Mul and Div. The chain is refused, and stays,
// where it holds any other op, where a value it computes holds an integer beyond 2^53 (a double
// is no longer exact there), and where it reads a constant larger than the facts hold that a
// node on the inputs reads too: the model would hold those elements twice. (One that other
// computations on constants read is theirs to fold as well.) A value larger than the
// options' fold_limit_bytes (none by default: onnxslim and onnxsim fold any size) is a near
// miss, since the caller asked for the limit.
//
// No near misses: a value is either the same on every run or decided by the inputs.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "fusekit/graph/array.hpp"
#include "fusekit/graph/facts.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"
#include "options.hpp"
#include "selfcheck_inputs.hpp"

namespace fusekit::rules {
using namespace pattern;

namespace evaluation {

// Whether the evaluator computes op (of ai.onnx) from its inputs' elements.
bool evaluates(std::string_view op);

// The elements of v, a fixed value, computed from the constants and facts upstream of it; none
// where the chain holds an op the evaluator lacks, an integer it cannot hold exactly, or a
// constant larger than the facts hold that it would copy while a node on the inputs reads it.
std::optional<array> evaluated(const graph& g, value_id v);

// Whether n is the last node of a chain to evaluate: its output fixed, of elements the facts do
// not hold, read by a node that is not evaluated with it, and the chain one the evaluator
// computes (of any size: the options' limit is the guard's).
bool ends_a_fixed_chain(const graph& g, node_id n);

// The bytes of v, a value of static shape.
std::int64_t bytes_of(const graph& g, value_id v);

}  // namespace evaluation

struct constant_evaluation {
  static constexpr std::string_view name = "constant-evaluation";
  // Below every fusion, as the other folds are.
  static constexpr int priority = -1;
  using options = fusion_options;
  static constexpr auto root = [](auto node) {
    return node.forwardable().where(
        "the last node of a computation on constants, read by one on the inputs",
        evaluation::ends_a_fixed_chain);
  };
  // Each input is a capture (a Concat's, a list) that the sources below write as a constant, the
  // data of the instance's type and larger than the facts hold, so that only the evaluator can
  // fold it. A view reads a computed value: of a constant itself, it is constant-view-folding's.
  static constexpr auto a = capture<"a">;
  static constexpr auto b = capture<"b">;
  static constexpr auto c = capture<"c">;
  static constexpr auto d = capture<"d">;
  static constexpr auto computed = capture<"computed">;
  static constexpr auto pattern = any_of(
      root(op<"ScatterND">(a, capture<"rows">, capture<"updates">)), root(op<"Where">(c, a, b)),
      root(op<"Equal">(a, b)), root(op<"Less">(a, b)), root(op<"Greater">(a, b)),
      root(op<"Not">(c)), root(op<"And">(c, d)), root(op<"Or">(c, d)), root(op<"Add">(a, b)),
      root(op<"Sub">(a, b)), root(op<"Mul">(a, b)), root(op<"Div">(a, b)), root(op<"Neg">(a)),
      root(op<"Abs">(a)), root(op<"Cast">(a)), root(op<"CastLike">(a, b)), root(op<"Identity">(a)),
      root(op<"Reshape">(computed, capture<"shape">)),
      root(op<"Unsqueeze">(computed, capture<"axes">)), root(op<"Squeeze">(a)),
      root(op<"Flatten">(computed)), root(op<"Transpose">(computed)),
      root(op<"Expand">(a, capture<"dims">)), root(op<"Concat">(all<"xs">(any()))),
      root(op<"Slice">(a, capture<"starts">, capture<"ends">, maybe(capture<"axes">),
                       maybe(capture<"steps">))),
      root(op<"Gather">(a, capture<"indices">)), root(op<"ConstantOfShape">(capture<"dims">)),
      root(op<"Range">(capture<"start">, capture<"limit">, capture<"delta">)));

  // The constants selfcheck writes.
  // 81 elements, more than the facts hold; bools 0 and 1, the only ones ONNX has.
  template <dtype Type>
  struct nine_by_nine {
    static auto write(auto& w) {
      std::vector<double> values(81);
      for (std::size_t i = 0; i < values.size(); ++i)
        values[i] = Type == dtype::boolean ? double(i % 3 == 0) : double(i % 7) - 3;
      const dtype t = Type == dtype::undefined ? w.type() : Type;
      return w.initializer(t, {9, 9}, std::move(values));
    }
  };
  struct two_rows {
    static auto write(auto& w) { return w.initializer(dtype::int64, {2, 1}, {1, 4}); }
  };
  struct two_updates {
    static auto write(auto& w) {
      return w.initializer(w.type(), {2, 9}, std::vector<double>(18, 2));
    }
  };
  struct expanded {
    static auto write(auto& w) { return w.initializer(dtype::int64, {3}, {2, 9, 9}); }
  };
  static constexpr auto sources = pattern::sources(
      source<"a">(written<nine_by_nine<dtype::undefined>>),
      source<"b">(written<nine_by_nine<dtype::undefined>>),
      source<"c">(written<nine_by_nine<dtype::boolean>>),
      source<"d">(written<nine_by_nine<dtype::boolean>>),
      source<"xs">(written<nine_by_nine<dtype::undefined>>),
      source<"computed">(op<"Neg">(capture<"a">)), source<"rows">(written<two_rows>),
      source<"updates">(written<two_updates>),
      source<"shape">(written<selfcheck_inputs::int64_vector<-1>>),
      source<"axes">(written<selfcheck_inputs::int64_vector<0>>), source<"dims">(written<expanded>),
      source<"starts">(written<selfcheck_inputs::int64_vector<1>>),
      source<"ends">(written<selfcheck_inputs::int64_vector<(std::int64_t(1) << 62)>>),
      source<"steps">(written<selfcheck_inputs::int64_vector<2>>),
      source<"indices">(written<selfcheck_inputs::int64_vector<8, -1, 0>>),
      source<"start">(written<selfcheck_inputs::int64_scalar<0>>),
      source<"limit">(written<selfcheck_inputs::int64_scalar<100>>),
      source<"delta">(written<selfcheck_inputs::int64_scalar<1>>));

  static bool resembles(const graph&, node_id) { return false; }
  // Where the caller set a limit, a larger result is a near miss: the user asked for it.
  static rewrite::verdict guard(const graph& g, const auto& m, const options& o) {
    const value_id out = g.output(m.root(), 0);
    const std::int64_t bytes = evaluation::bytes_of(g, out);
    if (o.fold_limit_bytes <= 0 || bytes <= o.fold_limit_bytes) return rewrite::verdict::yes();
    return rewrite::verdict::no_with_these_options(
        g.describe(m.root()) + " computes " + std::to_string(bytes) + " bytes (" +
        std::string(dtype_name(g.type(out))) + " " + facts_of(g).shape_text(out) +
        "), over the fold limit of " + std::to_string(o.fold_limit_bytes));
  }
  static void emit(const graph& g, const auto& m, rewrite::emitter& e) {
    e.replace_root(e.constant(*evaluation::evaluated(g, g.output(m.root(), 0))));
  }
};

}  // namespace fusekit::rules
