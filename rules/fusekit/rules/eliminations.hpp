// Eliminations: nodes that compute nothing at inference, and constants written as nodes. What a
// runtime other than ONNX Runtime would otherwise see, and what a fusion's pattern need not skip.
//
//   x ── Identity | Dropout (inference) | Cast (to x's type) ── y ── readers   ==>   x ── readers
//
//   Constant(value) ── y ── readers   ==>   initializer y ── readers
//
// The readers of y read x itself, with no node in between. Where y is a graph output, or a
// subgraph reads it by name, the name must live on and the node stays (forwardable()); so does a
// Dropout whose mask is read. The Constant's tensor becomes an initializer of y's name, read
// unchanged (from IR version 4: before it, an initializer must also be a graph input).
//
// Neither rule has near misses: a node either computes nothing or is no elimination.
#pragma once

#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"

namespace fusekit::rules {
using namespace pattern;

inline bool passes_its_input_on(const graph& g, node_id n) {
  const auto outs = g.outputs(n);
  return g.passes_input_at_inference(n) &&
         std::all_of(outs.begin() + 1, outs.end(), [&](value_id v) {
           return v == no_id || (!g.is_graph_output(v) && g.consumers(v).empty());
         });
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

}  // namespace fusekit::rules
