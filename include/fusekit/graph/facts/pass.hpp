// The forward pass that builds a graph's facts. Values with no producer are seeded (an
// initializer's tensor, a declaration, an enclosing graph's facts); then each node, in topological
// order, is held to its schema (schema_check.hpp), given fusekit's own rule of its op family
// (rules/) and ONNX's rule for the outputs that leaves unknown, and its outputs are reconciled with
// what the model declares. Linear in the graph, no recursion, no depth limit; an op's rule is
// found by its name once, on its first node.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "fusekit/engine.hpp"
#include "fusekit/graph/facts/rule_context.hpp"
#include "fusekit/graph/facts/rules/generator.hpp"
#include "fusekit/graph/facts/rules/math.hpp"
#include "fusekit/graph/facts/rules/nn.hpp"
#include "fusekit/graph/facts/rules/reduction.hpp"
#include "fusekit/graph/facts/rules/tensor.hpp"
#include "fusekit/graph/facts/schema_check.hpp"
#include "fusekit/graph/facts/store.hpp"
#include "fusekit/graph/schema_inference.hpp"

namespace fusekit::facts_detail {

// Which of fusekit's own rules answers op: they are for ai.onnx's ops and ONNX Runtime's.
inline rule_choice own_rule_for(std::string_view domain, std::string_view op) {
  if (!domain.empty() && domain != "com.microsoft") return {};
  if (const auto r = generator_rule_for(op); r != generator_rule::none)
    return {rule_choice::generator, std::uint8_t(r)};
  if (const auto r = math_rule_for(op); r != math_rule::none)
    return {rule_choice::math, std::uint8_t(r)};
  if (const auto r = tensor_rule_for(op); r != tensor_rule::none)
    return {rule_choice::tensor, std::uint8_t(r)};
  if (const auto r = reduction_rule_for(op); r != reduction_rule::none)
    return {rule_choice::reduction, std::uint8_t(r)};
  if (const auto r = nn_rule_for(op); r != nn_rule::none) return {rule_choice::nn, std::uint8_t(r)};
  return {};
}

// The rule chosen, for a node whose output 0 is there: the one every rule proves first.
inline void run_own_rule(rule_context& cx, node_id n, rule_choice r) {
  if (cx.out(n) == no_id) return;
  switch (r.family) {
    case rule_choice::none:
      return;
    case rule_choice::generator:
      return run_generator_rule(cx, n, generator_rule(r.rule));
    case rule_choice::math:
      return run_math_rule(cx, n, math_rule(r.rule));
    case rule_choice::tensor:
      return run_tensor_rule(cx, n, tensor_rule(r.rule));
    case rule_choice::reduction:
      return run_reduction_rule(cx, n, reduction_rule(r.rule));
    case rule_choice::nn:
      return run_nn_rule(cx, n, nn_rule(r.rule));
  }
}

}  // namespace fusekit::facts_detail

namespace fusekit {

#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE facts::facts(const graph& g) : g_(g) {
  if (g.parent() == nullptr) {
    owned_atoms_ = std::make_unique<facts_detail::atom_table>();
    atoms_ = owned_atoms_.get();
  } else {
    parent_ = &facts_of(*g.parent());
    atoms_ = parent_->atoms_;
  }
  shapes_.resize(g.value_count());
  content_at_.assign(g.value_count(), none);
  fixed_.assign(g.value_count(), false);
  for (value_id v = 0; v < g.value_count(); ++v)
    if (g.producer(v) == no_id) {
      seed(v);
      hold_elements(v);
      fixed_[v] = g.is_constant(v) || content(v).known ||
                  (g.is_outer_scope(v) && parent_ != nullptr &&
                   facts_of(*g.definition(v).first).fixed(g.definition(v).second));
    }
  for (node_id n : g.topological_order()) {
    infer(n);
    const bool from_fixed = computes_from_fixed(n);
    for (value_id out : g.outputs(n))
      if (out != no_id) {
        reconcile(out);
        keep_fitting_content(out);
        hold_elements(out);
        fixed_[out] = from_fixed || content(out).known;
      }
  }
}
#endif

// An ai.onnx op of no subgraph, no randomness, reading fixed values only (a Constant reads none).
// CastLike reads its second input for its element type alone, which never changes.
inline bool facts::computes_from_fixed(node_id n) const {
  const std::string_view op = g_.op_type(n);
  if (!g_.domain(n).empty() || !g_.subgraphs(n).empty() || op.starts_with("Random") ||
      op == "Multinomial" || op == "Bernoulli")
    return false;
  const auto ins = g_.inputs(n);
  const std::size_t read = op == "CastLike" ? std::min<std::size_t>(ins.size(), 1) : ins.size();
  return std::all_of(ins.begin(), ins.begin() + std::ptrdiff_t(read),
                     [&](value_id v) { return v == no_id || fixed(v); });
}

inline void facts::infer(node_id n) {
  using facts_detail::schema_check;
  if (schema_check::flaw_of(g_, n, schemas_.resolve(g_, n)).kind !=
      facts_detail::schema_flaw::well_formed)
    return;
  facts_detail::rule_context cx(*this);
  facts_detail::run_own_rule(cx, n, own_rule(n));
  if (cx.proved_cannot_run()) return cannot_run_.push_back(n);
  for (value_id v : g_.outputs(n))
    if (v != no_id && !shapes_[v].known) return infer_by_schema(n);
}

inline facts_detail::rule_choice facts::own_rule(node_id n) {
  const op_id op = g_.op(n);
  if (op >= rules_.size()) rules_.resize(std::max<std::size_t>(op + 1, g_.ops().size()));
  if (!rules_[op]) rules_[op] = facts_detail::own_rule_for(g_.domain(n), g_.op_type(n));
  return *rules_[op];
}

inline std::vector<schema_input> facts::schema_inputs(node_id n) const {
  std::vector<schema_input> inputs;
  inputs.reserve(g_.inputs(n).size());
  for (value_id v : g_.inputs(n)) {
    if (v == no_id) {
      inputs.emplace_back();
      continue;
    }
    inputs.push_back({true, g_.type(v), &shape(v), &content(v), g_.constant_tensor(v)});
  }
  return inputs;
}

// ONNX's own rule, for the outputs fusekit's rules left unknown.
inline void facts::infer_by_schema(node_id n) {
  if (!g_.domain(n).empty()) return;
  const auto result = schema_shapes(g_.node(n), g_.opset(""), schema_inputs(n));
  if (!result) return;
  for (std::size_t k = 0; k < result->size() && k < g_.outputs(n).size(); ++k) {
    const value_id v = g_.output(n, k);
    if (v == no_id || shapes_[v].known || !(*result)[k]) continue;
    shape_fact s{true, std::move(*(*result)[k])};
    for (std::size_t i = 0; i < s.rank(); ++i)
      if (!s.dims[i].known()) s.dims[i] = fresh(v, i);
    shapes_[v] = std::move(s);
  }
}

}  // namespace fusekit
