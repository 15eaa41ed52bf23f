// What a rule's emit step writes: the nodes and initializers that replace a match, and which new
// value stands for each matched value that lives on (the root's outputs; interior values that are
// graph outputs or read elsewhere, such as a decoder's present key/value). Nothing touches the
// model until the driver has checked the edit and commits every edit of a pass together, so a rule
// that fails half-way leaves no trace.
#pragma once

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fusekit/engine.hpp"
#include "fusekit/graph/array.hpp"
#include "fusekit/graph/graph.hpp"
#include "fusekit/graph/model_builder.hpp"
#include "fusekit/rewrite/names.hpp"

namespace fusekit::rewrite {

class emitter {
 public:
  emitter(const graph& g, node_id root, name_pool& names, std::string stem)
      : graph_(&g), root_(root), names_(&names), stem_(std::move(stem)) {}

  const graph& source() const { return *graph_; }

  // The name by which new nodes read an existing value.
  std::string value(value_id v) const {
    return v == no_id ? std::string() : std::string(graph_->name(v));
  }

  // Adds a node reading `inputs` (names of existing or emitted values; "" for an omitted input)
  // and returns its outputs.
  std::vector<std::string> ops(std::string_view op_type, std::vector<std::string> inputs,
                               const std::vector<build::attr>& attrs = {},
                               std::string_view domain = {}, int outputs = 1) {
    return ops(op_type, std::move(inputs), attrs, domain, std::vector<bool>(outputs, true));
  }
  // The same, writing output k only where `written[k]`: an optional output left "" is one the
  // op need not compute (SkipLayerNormalization's mean beside the sum it is asked for). The
  // outputs not written are returned as "".
  std::vector<std::string> ops(std::string_view op_type, std::vector<std::string> inputs,
                               const std::vector<build::attr>& attrs, std::string_view domain,
                               const std::vector<bool>& written);
  std::string op(std::string_view op_type, std::vector<std::string> inputs,
                 std::initializer_list<build::attr> attrs = {}, std::string_view domain = {}) {
    return ops(op_type, std::move(inputs), attrs, domain).front();
  }
  // A node like `n`, a matched one: its op, domain and the attributes it sets, reading `inputs`;
  // each of `changed` takes the place of the attribute of its name, or is added. Returns its
  // output (one: a node of several outputs is written with ops()).
  std::string copy(node_id n, std::vector<std::string> inputs,
                   std::initializer_list<build::attr> changed = {}) {
    const onnx::NodeProto& from = graph_->node(n);
    std::vector<build::attr> attrs(changed);
    for (const onnx::AttributeProto& a : from.attribute())
      if (std::none_of(attrs.begin(), attrs.end(),
                       [&](const build::attr& c) { return c.proto.name() == a.name(); }))
        attrs.push_back(build::attr(a));
    return ops(from.op_type(), std::move(inputs), attrs, from.domain()).front();
  }

  // A new initializer holding `values` (encoded as `type`).
  std::string constant(dtype type, std::vector<std::int64_t> dims,
                       const std::vector<double>& values) {
    const std::string name = names_->fresh(stem_ + "/const");
    initializers_.push_back(build::make_tensor(name, type, std::move(dims), values));
    return name;
  }
  // A new 1-D int64 initializer: a shape, axes or bounds, each number written exactly.
  std::string ints(const std::vector<std::int64_t>& values) {
    const std::string name = names_->fresh(stem_ + "/const");
    initializers_.push_back(build::make_ints_tensor(name, values));
    return name;
  }
  // A new initializer holding a copy of `t`: a Constant node's tensor, made an initializer.
  std::string constant(const onnx::TensorProto& t) {
    const std::string name = names_->fresh(stem_ + "/const");
    initializers_.push_back(t);
    initializers_.back().set_name(name);
    return name;
  }
  // A new initializer holding a fold's result, in its type.
  std::string constant(const array& values) {
    const std::string name = names_->fresh(stem_ + "/const");
    initializers_.push_back(values.to_tensor(name));
    return name;
  }

  // `replacement` takes the place of `old`, an output of a matched node: every reader that stays,
  // and the graph output of that name, read it instead. An interior value may be replaced only
  // when nothing before the root reads it, since the replacement is computed where the root was.
  // `replacement` may be a value the model has (`e.value(x)`): its readers are forwarded to it,
  // as an elimination does, with no node in between.
  void replace(value_id old, std::string replacement) {
    replacements_.emplace_back(old, std::move(replacement));
  }
  // The usual case: `replacement` takes the place of the root's first output.
  void replace_root(std::string replacement) {
    replace(graph_->output(root_, 0), std::move(replacement));
  }

  // Writes each replacement under the name of the value it replaces, so that readers and graph
  // outputs keep working unchanged: an emitted output takes the old name. An existing value, or an
  // emitted one standing for a second value, is forwarded: the driver renames the readers' inputs
  // (forwards()). Only where a name must live on — a graph output, or a value a subgraph reads
  // from the outer scope by its name — an Identity writes it. The driver calls it once it has
  // checked the edit.
  void name_replacements();
  // Replaced values whose readers read another name from now on: the driver renames them.
  const std::vector<std::pair<value_id, std::string>>& forwards() const { return forwards_; }
  std::vector<onnx::NodeProto> take_nodes() { return std::move(nodes_); }
  std::vector<onnx::TensorProto> take_initializers() { return std::move(initializers_); }

  // A parameter of this fusion for the report: scale, heads, layout, casts removed …
  void note(std::string key, nlohmann::json value) { notes_[std::move(key)] = std::move(value); }

  const std::vector<onnx::NodeProto>& nodes() const { return nodes_; }
  const std::vector<onnx::TensorProto>& initializers() const { return initializers_; }
  const std::vector<std::pair<value_id, std::string>>& replacements() const {
    return replacements_;
  }
  const std::set<std::string>& domains() const { return domains_; }
  const nlohmann::json& notes() const { return notes_; }

 private:
  const graph* graph_;
  node_id root_;
  name_pool* names_;
  std::string stem_;
  std::vector<onnx::NodeProto> nodes_;
  std::vector<onnx::TensorProto> initializers_;
  std::vector<std::pair<value_id, std::string>> replacements_;
  std::vector<std::pair<value_id, std::string>> forwards_;
  std::set<std::string> domains_;
  nlohmann::json notes_ = nlohmann::json::object();
};

#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::vector<std::string> emitter::ops(std::string_view op_type,
                                                            std::vector<std::string> inputs,
                                                            const std::vector<build::attr>& attrs,
                                                            std::string_view domain,
                                                            const std::vector<bool>& written) {
  onnx::NodeProto& node = nodes_.emplace_back();
  node.set_op_type(std::string(op_type));
  node.set_domain(std::string(domain));
  node.set_name(names_->fresh(stem_ + "/" + std::string(op_type)));
  for (auto& in : inputs) node.add_input(std::move(in));
  std::vector<std::string> names;
  std::size_t listed = 0;  // trailing outputs not written are not listed either
  for (std::size_t k = 0; k < written.size(); ++k) {
    names.push_back(written[k] ? names_->fresh(node.name() + "/out") : std::string());
    if (written[k]) listed = k + 1;
  }
  for (std::size_t k = 0; k < listed; ++k) node.add_output(names[k]);
  for (const auto& a : attrs) *node.add_attribute() = a.proto;
  if (!domain.empty()) domains_.insert(std::string(domain));
  return names;
}

FUSEKIT_ENGINE_INLINE void emitter::name_replacements() {
  std::unordered_map<std::string, std::string> renamed;
  for (const auto& [old, replacement] : replacements_) {
    const std::string old_name(graph_->name(old));
    std::string* output = nullptr;
    if (!renamed.contains(replacement))
      for (auto& node : nodes_)
        for (auto& out : *node.mutable_output())
          if (out == replacement) output = &out;
    const bool name_lives_on =
        graph_->is_graph_output(old) || graph_->read_by_name_in_subgraph(old);
    // An emitted initializer takes the name too, where that name is not a graph output's (which
    // a node writes): a Constant made an initializer is read as before, with nothing forwarded.
    if (output == nullptr && !graph_->is_graph_output(old) && !renamed.contains(replacement))
      for (auto& t : initializers_)
        if (t.name() == replacement) output = t.mutable_name();
    if (output != nullptr) {
      renamed.emplace(replacement, old_name);
      *output = old_name;
      continue;
    }
    if (!name_lives_on) {
      forwards_.emplace_back(old, replacement);
      continue;
    }
    onnx::NodeProto& identity = nodes_.emplace_back();
    identity.set_op_type("Identity");
    identity.set_name(names_->fresh(stem_ + "/Identity"));
    identity.add_input(replacement);
    identity.add_output(old_name);
  }
  for (auto& node : nodes_)
    for (auto& in : *node.mutable_input())
      if (auto it = renamed.find(in); it != renamed.end()) in = it->second;
  for (auto& [old, to] : forwards_)
    if (auto it = renamed.find(to); it != renamed.end()) to = it->second;
}
#endif

}  // namespace fusekit::rewrite
