// Where an attention block begins for the rules: a Softmax of scores a MatMul computed, whose
// probabilities a MatMul reads as its first operand. The rules anchor there, report a near miss
// wherever such a block does not fuse, and every other Softmax is explained by what it lacks
// (`not_a_block_because`), so no Softmax in a model goes unreported.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fusekit/graph/graph.hpp"

namespace fusekit::rules::sdpa {

// What a walk upstream makes of a node: the one sought, a node to walk through, or the end of
// this path.
enum class upstream : std::uint8_t { through, found, dead_end };
// The first node within `depth` ai.onnx producers upstream of x, through any input, that `judge`
// finds, or no_id.
template <class Judge>
node_id found_upstream(const graph& g, value_id x, const Judge& judge, int depth = 8) {
  const node_id p = g.producer(x);
  if (p == no_id || depth == 0 || !g.domain(p).empty()) return no_id;
  const upstream verdict = judge(p, x);
  if (verdict != upstream::through) return verdict == upstream::found ? p : no_id;
  for (value_id in : g.inputs(p))
    if (in != no_id)
      if (const node_id n = found_upstream(g, in, judge, depth - 1); n != no_id) return n;
  return no_id;
}

// Whether a MatMul within a few nodes upstream of x computes it (QKᵀ, in whatever form).
inline bool computed_from_a_product(const graph& g, value_id x) {
  return found_upstream(g, x, [&](node_id p, value_id) {
           return g.op_type(p) == "MatMul" ? upstream::found : upstream::through;
         }) != no_id;
}

// The TopK whose values x is computed from within a few nodes upstream, or no_id: the gate weights
// of the experts a mixture-of-experts router picked (JetMoE's attention experts), which a Softmax
// normalises as it would scores.
inline node_id top_k_upstream(const graph& g, value_id x) {
  return found_upstream(g, x, [&](node_id p, value_id read) {
    if (g.op_type(p) != "TopK") return upstream::through;
    return g.output(p, 0) == read ? upstream::found : upstream::dead_end;
  });
}

// The ops between Softmax and the ·V MatMul that keep the probabilities' values: a Reshape, a
// Cast, the NaN guard's Where (its third input), an identity at inference.
inline bool keeps_probabilities(std::string_view op) {
  return op == "Reshape" || op == "Cast" || op == "Where" || op == "Identity" || op == "Dropout";
}
inline std::size_t probabilities_slot(std::string_view op) { return op == "Where" ? 2 : 0; }

// The Softmax whose output a MatMul reads as its first input through ops that keep its values,
// or no_id: where the rules' core begins, and so where a failed match may be a near miss.
inline node_id softmax_read_by(const graph& g, node_id n) {
  if (g.op_type(n) != "MatMul" || !g.domain(n).empty()) return no_id;
  node_id p = g.producer(g.input(n, 0));
  for (int step = 0; step < 8 && p != no_id && g.domain(p).empty(); ++step) {
    const std::string_view op = g.op_type(p);
    if (op == "Softmax") return p;
    if (!keeps_probabilities(op)) return no_id;
    p = g.producer(g.input(p, probabilities_slot(op)));
  }
  return no_id;
}

// The ·V MatMul of an attention block, however the rest is spelled: it reads a Softmax of scores
// a MatMul computed. Such a block is never missed silently.
inline bool reads_attention_probabilities(const graph& g, node_id n) {
  const node_id softmax = softmax_read_by(g, n);
  return softmax != no_id && computed_from_a_product(g, g.input(softmax, 0));
}

// The nodes that read a Softmax's probabilities past the ops that keep them (the same walk as
// softmax_read_by, downstream), each with the input slot it reads them at.
inline std::vector<use> probability_readers(const graph& g, node_id softmax) {
  std::vector<use> out;
  std::vector<std::pair<value_id, int>> work{{g.output(softmax, 0), 0}};
  while (!work.empty()) {
    const auto [v, steps] = work.back();
    work.pop_back();
    for (const use& u : g.consumers(v)) {
      const std::string_view op = g.op_type(u.node);
      if (g.domain(u.node).empty() && keeps_probabilities(op) && u.slot == probabilities_slot(op) &&
          steps + 1 < 8)
        work.emplace_back(g.output(u.node, 0), steps + 1);
      else
        out.push_back(u);
    }
  }
  return out;
}

// Why a Softmax is no block the rules try: its scores come from no product, or no MatMul reads
// its probabilities as its first operand; "" when it is one.
inline std::string not_a_block_because(const graph& g, node_id softmax) {
  if (!computed_from_a_product(g, g.input(softmax, 0))) {
    if (const node_id top = top_k_upstream(g, g.input(softmax, 0)); top != no_id)
      return "its input is the values " + g.describe(top) +
             " kept, as a mixture-of-experts router picks its experts: these are no attention "
             "scores";
    return "no MatMul computes its input within 8 nodes: these are no attention scores";
  }
  std::string readers;
  for (const use& u : probability_readers(g, softmax)) {
    if (g.op_type(u.node) == "MatMul" && g.domain(u.node).empty() && u.slot == 0) return {};
    readers += (readers.empty() ? "" : ", ") + g.describe(u.node) +
               (u.is_implicit() ? std::string(" (in its subgraph)")
                : u.slot == 0   ? std::string()
                                : " (input " + std::to_string(u.slot) + ")");
  }
  const bool output = g.is_graph_output(g.output(softmax, 0));
  if (readers.empty()) readers = output ? "the graph output alone" : "nothing";
  return "no MatMul reads its probabilities as its first operand (through Reshape, Cast, Where, "
         "Identity or Dropout): they are read by " +
         readers;
}

}  // namespace fusekit::rules::sdpa
