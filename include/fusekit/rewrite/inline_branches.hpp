// An If whose condition the facts prove, replaced by the branch it takes, so that rules and facts
// see the values it computes. TorchScript writes `x.squeeze(d)` of a dim it cannot size at export
// as If(Equal(Shape(x)[d], 1)) with a Squeeze and an Identity for branches: the If's output has
// no rank the facts can hold, and nothing computed from it has one either, though the condition
// is a constant of the model (a diffusion transformer's adaLN chunks, an attention pool).
//
// The branch's nodes take the If's place under fresh names (`<If>/<name>`), and its outputs the
// If's names, so that readers and graph outputs read them unchanged. Its initializers become
// Constants. A branch output it does not compute (an outer value passed on, or one value given
// twice) is written by an Identity. A branch whose nodes hold subgraphs of their own stays an If:
// those may read the branch's values by their names.
#pragma once

#include <onnx/onnx_pb.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fusekit/graph/facts.hpp"
#include "fusekit/graph/graph.hpp"
#include "fusekit/rewrite/journal.hpp"
#include "fusekit/rewrite/names.hpp"

namespace fusekit::rewrite::detail {

// The branch an If takes where the facts prove its condition and the branch may be inlined.
struct decided_if {
  const onnx::GraphProto* branch = nullptr;
  bool then = false;
};
inline decided_if decided_branch(const graph& g, node_id n) {
  if (g.op_type(n) != "If" || !g.domain(n).empty() || g.input(n, 0) == no_id) return {};
  const auto condition = facts_of(g).real_scalar(g.input(n, 0));
  if (!condition) return {};
  const bool then = *condition != 0;
  for (const onnx::AttributeProto& a : g.node(n).attribute()) {
    if (a.name() != (then ? "then_branch" : "else_branch") || !a.has_g()) continue;
    const onnx::GraphProto& branch = a.g();
    if (branch.sparse_initializer_size() > 0 || branch.output_size() != g.node(n).output_size())
      return {};
    for (const onnx::NodeProto& node : branch.node())
      for (const onnx::AttributeProto& b : node.attribute())
        if (b.has_g() || b.graphs_size() > 0) return {};
    return {&branch, then};
  }
  return {};
}

// The nodes that compute what If `call` computes by taking `branch`.
inline std::vector<std::unique_ptr<onnx::NodeProto>> branch_nodes(const onnx::NodeProto& call,
                                                                  const onnx::GraphProto& branch,
                                                                  name_pool& names) {
  std::unordered_set<std::string> own;
  for (const onnx::TensorProto& t : branch.initializer()) own.insert(t.name());
  for (const onnx::NodeProto& node : branch.node())
    for (const std::string& out : node.output()) own.insert(out);
  std::unordered_map<std::string, std::string> renamed;
  std::vector<std::pair<std::string, std::string>> passed;  // (branch value, If output)
  for (int i = 0; i < branch.output_size(); ++i) {
    const std::string& out = branch.output(i).name();
    if (own.contains(out) && renamed.try_emplace(out, call.output(i)).second) continue;
    passed.emplace_back(out, call.output(i));
  }
  const std::string label = call.name().empty() ? "If" : call.name();
  const auto name_of = [&](const std::string& inner) -> std::string {
    if (inner.empty() || !own.contains(inner)) return inner;  // an outer value
    auto [it, added] = renamed.try_emplace(inner);
    if (added) it->second = names.fresh(label + "/" + inner);
    return it->second;
  };
  const auto node_named = [&](const std::string& op, const std::string& stem) {
    auto node = std::make_unique<onnx::NodeProto>();
    node->set_op_type(op);
    node->set_name(names.fresh(label + "/" + stem));
    return node;
  };
  std::vector<std::unique_ptr<onnx::NodeProto>> out;
  for (const onnx::TensorProto& t : branch.initializer()) {
    auto constant = node_named("Constant", t.name());
    constant->add_output(name_of(t.name()));
    onnx::AttributeProto* value = constant->add_attribute();
    value->set_name("value");
    value->set_type(onnx::AttributeProto_AttributeType_TENSOR);
    *value->mutable_t() = t;
    value->mutable_t()->clear_name();
    out.push_back(std::move(constant));
  }
  for (const onnx::NodeProto& body : branch.node()) {
    auto node = std::make_unique<onnx::NodeProto>(body);
    for (std::string& v : *node->mutable_input()) v = name_of(v);
    for (std::string& v : *node->mutable_output()) v = name_of(v);
    node->set_name(names.fresh(label + "/" + (body.name().empty() ? body.op_type() : body.name())));
    out.push_back(std::move(node));
  }
  for (const auto& [value, written] : passed) {
    auto identity = node_named("Identity", "Identity");
    identity->add_input(name_of(value));
    identity->add_output(written);
    out.push_back(std::move(identity));
  }
  return out;
}

// Replaces each If of the main graph whose condition the facts prove by the branch it takes, in
// one journaled edit; `notes` says which. Returns whether any was.
inline bool inline_decided_branches(const graph& g, onnx::ModelProto& m, name_pool& names,
                                    journal& edits, std::vector<std::string>& notes) {
  std::unordered_map<const onnx::NodeProto*, decided_if> decided;
  for (node_id n = 0; n < g.node_count(); ++n)
    if (const decided_if d = decided_branch(g, n); d.branch != nullptr)
      decided.emplace(&g.node(n), d);
  if (decided.empty()) return false;
  auto& field = *m.mutable_graph()->mutable_node();
  std::vector<onnx::NodeProto*> after;
  std::vector<std::unique_ptr<onnx::NodeProto>> added;
  for (onnx::NodeProto* node :
       std::vector<onnx::NodeProto*>(field.pointer_begin(), field.pointer_end())) {
    const auto it = decided.find(node);
    if (it == decided.end()) {
      after.push_back(node);
      continue;
    }
    const bool then = it->second.then;
    for (auto& made : branch_nodes(*node, *it->second.branch, names)) {
      after.push_back(made.get());
      added.push_back(std::move(made));
    }
    notes.push_back("inlined the " + std::string(then ? "then" : "else") + " branch of If '" +
                    node->name() + "': the facts prove its condition " + (then ? "true" : "false"));
  }
  edits.replace(field, after, std::move(added));
  return true;
}

}  // namespace fusekit::rewrite::detail
