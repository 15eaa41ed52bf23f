// What a rule's emit step writes: the nodes and initializers that replace a match, and which new
// value stands for each output of the matched root. Nothing touches the model until the driver
// commits every replacement of a pass together, so a rule that fails half-way leaves no trace.
#pragma once

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fusekit/graph/graph.hpp"
#include "fusekit/graph/model_builder.hpp"

namespace fusekit::rewrite {

// Which fused op a rule should produce, and what the caller knows that the model does not say.
struct options {
  enum class target : std::uint8_t {
    ort,   // com.microsoft contrib ops (MultiHeadAttention …): ONNX Runtime's fused kernels
    onnx,  // standard ops (ai.onnx Attention, opset 23): any runtime
  };
  target fused_target = target::ort;
  std::int64_t num_heads = 0;      // 0: infer from the model
  bool explain = false;            // every anchor's outcome, not only near misses
  std::vector<std::string> rules;  // names of the rules to run; empty: all

  bool runs(std::string_view rule) const {
    return rules.empty() || std::find(rules.begin(), rules.end(), rule) != rules.end();
  }
};

// Fresh, deterministic names: the first "<stem>_<k>" no node or value of the model uses.
class name_pool {
 public:
  explicit name_pool(const onnx::ModelProto& m) { collect(m.graph()); }

  std::string fresh(std::string_view stem) {
    for (std::size_t k = 0;; ++k) {
      std::string name = std::string(stem) + "_" + std::to_string(k);
      if (taken_.insert(name).second) return name;
    }
  }

 private:
  void collect(const onnx::GraphProto& g) {
    for (const auto& v : g.input()) taken_.insert(v.name());
    for (const auto& t : g.initializer()) taken_.insert(t.name());
    for (const auto& node : g.node()) {
      taken_.insert(node.name());
      for (const auto& out : node.output()) taken_.insert(out);
      for (const auto& a : node.attribute()) {
        if (a.has_g()) collect(a.g());
        for (const auto& body : a.graphs()) collect(body);
      }
    }
  }

  std::set<std::string> taken_;
};

class emitter {
 public:
  emitter(const graph& g, node_id root, const options& opts, name_pool& names, std::string stem)
      : graph_(&g), root_(root), options_(&opts), names_(&names), stem_(std::move(stem)) {}

  const graph& source() const { return *graph_; }
  const rewrite::options& options() const { return *options_; }

  // The name by which new nodes read an existing value.
  std::string value(value_id v) const {
    return v == no_id ? std::string() : std::string(graph_->name(v));
  }

  // Adds a node reading `inputs` (names of existing or emitted values; "" for an omitted input)
  // and returns its outputs.
  std::vector<std::string> ops(std::string_view op_type, std::vector<std::string> inputs,
                               std::initializer_list<build::attr> attrs = {},
                               std::string_view domain = {}, int outputs = 1) {
    onnx::NodeProto& node = nodes_.emplace_back();
    node.set_op_type(std::string(op_type));
    node.set_domain(std::string(domain));
    node.set_name(names_->fresh(stem_ + "/" + std::string(op_type)));
    for (auto& in : inputs) node.add_input(std::move(in));
    std::vector<std::string> names;
    for (int k = 0; k < outputs; ++k) {
      names.push_back(names_->fresh(node.name() + "/out"));
      node.add_output(names.back());
    }
    for (const auto& a : attrs) *node.add_attribute() = a.proto;
    if (!domain.empty()) domains_.insert(std::string(domain));
    return names;
  }
  std::string op(std::string_view op_type, std::vector<std::string> inputs,
                 std::initializer_list<build::attr> attrs = {}, std::string_view domain = {}) {
    return ops(op_type, std::move(inputs), attrs, domain).front();
  }

  // A new initializer holding `values` (encoded as `type`).
  std::string constant(dtype type, std::vector<std::int64_t> dims,
                       const std::vector<double>& values) {
    const std::string name = names_->fresh(stem_ + "/const");
    initializers_.push_back(build::make_tensor(name, type, std::move(dims), values));
    return name;
  }

  // `replacement` takes the place of `old`, an output of the matched root.
  void replace(value_id old, std::string replacement) {
    replacements_.emplace_back(old, std::move(replacement));
  }
  // The usual case: `replacement` takes the place of the root's first output.
  void replace_root(std::string replacement) {
    replace(graph_->output(root_, 0), std::move(replacement));
  }

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
  const rewrite::options* options_;
  name_pool* names_;
  std::string stem_;
  std::vector<onnx::NodeProto> nodes_;
  std::vector<onnx::TensorProto> initializers_;
  std::vector<std::pair<value_id, std::string>> replacements_;
  std::set<std::string> domains_;
  nlohmann::json notes_ = nlohmann::json::object();
};

}  // namespace fusekit::rewrite
