// Eliminations: nodes that compute nothing at inference, and constants written as nodes. What a
// runtime other than ONNX Runtime would otherwise see, and what a fusion's pattern need not skip.
//
//   x ── Identity | Dropout (inference) | Cast (to x's type) ── y ── readers   ==>   x ── readers
//
//   x ── Reshape | Expand | Tile | Squeeze | Slice | Pad | Concat | Split ── y ── readers
//        (each leaving x as it is)
//   x ── Mul(ones) | Div(ones) | Sub(0) (to x's own dims) ── y ── readers
//   ==>   x ── readers
//
//   Constant(value) ── y ── readers   ==>   initializer y ── readers
//
//   Where(Not(c), a, b)   ==>   Where(c, b, a)
//
//   CastLike(x, like)   ==>   Cast(x, to = like's type)
//
// The readers of y read x itself, with no node in between. Where y is a graph output, or a
// subgraph reads it by name, the name must live on and the node stays (forwardable()); so does a
// Dropout whose mask is read. The Constant's tensor becomes an initializer of y's name, read
// unchanged (from IR version 4: before it, an initializer must also be a graph input).
//
// The second form (no-op-elimination) is a view the facts prove to leave x as it is: its output of
// x's type and every dim proven x's (a Reshape or Expand to x's own shape, a Tile by ones, a
// Squeeze of no axis of size 1), a Slice of everything with no step below 1, a Pad of zeros, a
// Concat of one input, a Split of one piece. What exporters write for a shape known only at run
// time that, in this model, is static: Swin pads every window to a multiple it already is. And
// arithmetic by the identity of its op, exact in every type: x·1, x/1, x−0, where the scalar does
// not broadcast x to more dims, or a tensor of ones that does not either (a norm's weight as a
// fresh model holds it). Not x+0, which turns a float −0 into +0. What a rotary embedding's
// attention scaling of 1 and a division by a temperature of 1 leave.
//
// The last (not-elimination) swaps a Where's branches for the Not of its condition, what
// TorchScript writes for `masked_fill(~mask, …)`. The Not goes where nothing else reads it.
//
// The last (castlike-to-cast) states the type CastLike reads from its second input, known to
// every value of a model: `like` is then read by no node for its type alone, so that a block
// whose interior value it was (onnxscript's Phi-2 scales the scores by CastLike(c, scores)) has
// no reader outside it, and a cast constant folds.
//
// None of the rules has near misses: a node either computes nothing or is no elimination.
#pragma once

#include <algorithm>

#include "fusekit/graph/facts.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"
#include "selfcheck_inputs.hpp"

namespace fusekit::rules {
using namespace pattern;

// Whether nothing reads the outputs of `n` past its first.
inline bool others_unread(const graph& g, node_id n) {
  const auto outs = g.outputs(n);
  return std::all_of(outs.begin() + 1, outs.end(), [&](value_id v) {
    return v == no_id || (!g.is_graph_output(v) && g.consumers(v).empty());
  });
}

inline bool passes_its_input_on(const graph& g, node_id n) {
  return g.passes_input_at_inference(n) && others_unread(g, n);
}

template <class P>
constexpr auto passing_on(P node) {
  return node
      .where("passing its input on at inference, its other outputs unread", passes_its_input_on)
      .forwardable();
}

struct identity_elimination {
  static constexpr std::string_view name = "identity-elimination";
  // Below every fusion: one whose pattern skips the node (transparent()) takes it first.
  static constexpr int priority = -1;
  static constexpr auto x = capture<"x">;
  static constexpr auto pattern =
      any_of(passing_on(op<"Identity">(x)),
             passing_on(op<"Dropout">(x, maybe(constant_scalar<"ratio">),
                                      maybe(constant_scalar<"training_mode">.value(0)))),
             passing_on(op<"Cast">(x)));

  static bool resembles(const graph&, node_id) { return false; }
  static void emit(const graph&, const auto& m, rewrite::emitter& e) {
    e.replace_root(e.value(get<"x">(m)));
  }
};

// Whether the elements of input `slot` are proven, each satisfying `holds`.
template <class F>
bool every_element(const graph& g, node_id n, std::size_t slot, F holds) {
  if (slot >= g.inputs(n).size() || g.input(n, slot) == no_id) return true;
  const auto ints = facts_of(g).ints(g.input(n, slot));
  return ints && std::all_of(ints->begin(), ints->end(), holds);
}

// y has x's type and every dim proven x's.
inline bool same_type_and_dims(const graph& g, value_id x, value_id y) {
  const facts& f = facts_of(g);
  const auto rank = f.rank(x);
  if (g.type(x) != g.type(y) || g.type(x) == dtype::undefined || !rank || f.rank(y) != rank)
    return false;
  for (int i = 0; i < int(*rank); ++i)
    if (f.same_dim(x, i, y, i) != truth::yes) return false;
  return true;
}

inline bool keeps_its_input(const graph& g, node_id n) {
  if (!same_type_and_dims(g, g.input(n, 0), g.output(n, 0))) return false;
  const std::string_view op = g.op_type(n);
  // The same dims in a Slice hold x's elements where no step reverses or skips them.
  if (op == "Slice") return every_element(g, n, 4, [](std::int64_t k) { return k >= 1; });
  // Pads that cancel (one side −1, the other +1) keep the dims but shift the elements.
  if (op == "Pad") return every_element(g, n, 1, [](std::int64_t k) { return k == 0; });
  if (op == "Concat") return g.inputs(n).size() == 1;
  // A Split whose first piece is the whole: the others are empty, and must be unread.
  if (op == "Split") return others_unread(g, n);
  return true;
}

// y = x ∘ c, c the constant scalar identity of ∘, has x's type and dims, x either operand.
inline bool is_its_operand(const graph& g, node_id n) {
  for (std::size_t slot : {0, 1})
    if (g.constant_scalar(g.input(n, 1 - slot)) &&
        same_type_and_dims(g, g.input(n, slot), g.output(n, 0)))
      return true;
  return false;
}

struct noop_elimination {
  static constexpr std::string_view name = "no-op-elimination";
  static constexpr int priority = -1;
  static constexpr auto x = capture<"x">;
  static constexpr auto noop = [](auto node) {
    return node.where("leaving its input as it is, as the facts prove", keeps_its_input)
        .forwardable();
  };
  static constexpr auto identity = [](auto node) {
    return node.where("computing its other operand, of its type and dims", is_its_operand)
        .forwardable();
  };
  // Ones that do not broadcast x to more dims: the product keeps x's type (the operands share
  // one) and x's dims.
  static constexpr auto ones = constant<"ones">.all_ones().broadcasts_to<"x">();
  static constexpr auto ones_of_x = [](auto node) { return node.forwardable(); };
  static constexpr auto pattern =
      any_of(noop(op<"Reshape">(x, capture<"dims">)), noop(op<"Expand">(x, capture<"one">)),
             noop(op<"Tile">(x, capture<"repeats">)), noop(op<"Squeeze">(x)),
             noop(op<"Slice">(x, capture<"starts">, capture<"ends">, maybe(capture<"axes">),
                              maybe(capture<"steps">))),
             noop(op<"Pad">(x, capture<"pads">, maybe(capture<"fill">))), noop(op<"Concat">(x)),
             noop(op<"Split">(x, maybe(any()))), ones_of_x(commutative(op<"Mul">(x, ones))),
             ones_of_x(op<"Div">(x, ones)),
             identity(op<"Sub">(x, constant_scalar<"neutral">.value(0.0, 0.0))));
  static constexpr auto sources = pattern::sources(
      source<"dims">(written<selfcheck_inputs::dims_of_x>),
      source<"one">(written<selfcheck_inputs::int64_vector<1>>),
      source<"repeats">(written<selfcheck_inputs::per_axis_of_x<1>>),
      source<"starts">(written<selfcheck_inputs::int64_vector<0>>),
      source<"ends">(written<selfcheck_inputs::int64_vector<(std::int64_t(1) << 62)>>),
      source<"axes">(written<selfcheck_inputs::int64_vector<0>>),
      source<"steps">(written<selfcheck_inputs::int64_vector<1>>),
      source<"pads">(written<selfcheck_inputs::per_axis_of_x<0, 2>>),
      source<"fill">(written<selfcheck_inputs::scalar_of_type<0>>));

  static bool resembles(const graph&, node_id) { return false; }
  static void emit(const graph&, const auto& m, rewrite::emitter& e) {
    e.replace_root(e.value(get<"x">(m)));
  }
};

inline bool holds_a_dense_tensor(const graph& g, node_id n) {
  return g.constant_tensor(g.output(n, 0)) != nullptr;
}
inline bool initializers_stand_alone(const graph& g, node_id) { return g.ir_version() >= 4; }

struct constant_to_initializer {
  static constexpr std::string_view name = "constant-to-initializer";
  static constexpr int priority = -1;
  static constexpr auto pattern =
      op<"Constant">()
          .where("holding a dense tensor", holds_a_dense_tensor)
          .where("in a model of IR version 4 or later, whose initializers need no graph input",
                 initializers_stand_alone)
          .forwardable();

  static bool resembles(const graph&, node_id) { return false; }
  static void emit(const graph& g, const auto& m, rewrite::emitter& e) {
    e.replace_root(e.constant(*g.constant_tensor(g.output(m.root(), 0))));
  }
};

struct not_elimination {
  static constexpr std::string_view name = "not-elimination";
  static constexpr int priority = -1;
  static constexpr auto pattern = op<"Where">(op<"Not">(capture<"c">), capture<"a">, capture<"b">);

  static bool resembles(const graph&, node_id) { return false; }
  static void emit(const graph&, const auto& m, rewrite::emitter& e) {
    e.replace_root(
        e.copy(m.root(), {e.value(get<"c">(m)), e.value(get<"b">(m)), e.value(get<"a">(m))}));
  }
};

inline bool of_known_type(const graph& g, value_id v) { return g.type(v) != dtype::undefined; }

struct castlike_to_cast {
  static constexpr std::string_view name = "castlike-to-cast";
  static constexpr int priority = -1;
  static constexpr auto pattern =
      op<"CastLike">(capture<"x">, capture<"like">.where("of a known element type", of_known_type));

  static bool resembles(const graph&, node_id) { return false; }
  static void emit(const graph& g, const auto& m, rewrite::emitter& e) {
    // CastLike's attributes (saturate, round_mode) are Cast's, of the same opsets.
    std::vector<build::attr> attrs{{"to", g.type(get<"like">(m))}};
    for (const onnx::AttributeProto& a : g.node(m.root()).attribute()) attrs.emplace_back(a);
    e.replace_root(e.ops("Cast", {e.value(get<"x">(m))}, attrs).front());
  }
};

}  // namespace fusekit::rules
