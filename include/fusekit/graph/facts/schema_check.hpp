// What a node's schema guarantees. The rules, fusekit's and ONNX's, read a node as its schema
// describes it. A node that breaks its schema (a Where without its third input, a perm given as one
// int, a Concat without its axis) gets unknown facts: what it computes, if it runs at all, is no
// rule's to say. Checked as onnx's checker checks it: the counts of inputs and outputs, every input
// the schema requires present, no attribute the schema does not name, each of the schema's type,
// every required one set.
#pragma once

#include <onnx/defs/schema.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fusekit/graph/contributed_op_schemas.hpp"
#include "fusekit/graph/graph.hpp"
#include "fusekit/graph/schema_inference.hpp"

namespace fusekit::facts_detail {

struct op_schema {
  bool resolved = false;
  const onnx::OpSchema* schema = nullptr;  // null: no schema to hold the node to
  std::vector<std::string_view> required;  // its required attributes
};

struct schema_flaw {
  enum kind_t : std::uint8_t {
    well_formed,
    input_count,
    missing_input,
    output_count,
    attribute_type,
    unknown_attribute,
    missing_attribute
  } kind = well_formed;
  int slot = 0;                                     // of missing_input
  const onnx::AttributeProto* attribute = nullptr;  // of attribute_type, unknown_attribute
  std::string_view name;                            // of missing_attribute
};

// The schema of each op id a graph uses, looked up on its first node.
class schema_check {
 public:
  // ai.onnx ops of the opsets the linked onnx release knows (a newer opset may have changed the
  // schema) and ONNX Runtime's, as the checker holds them.
  const op_schema& resolve(const graph& g, node_id n) {
    const op_id op = g.op(n);
    if (op >= by_op_.size()) by_op_.resize(std::max<std::size_t>(op + 1, g.ops().size()));
    op_schema& s = by_op_[op];
    if (s.resolved) return s;
    s.resolved = true;
    const std::string domain(g.domain(n));
    const std::int64_t opset = g.opset(domain);
    if (opset <= 0 || (domain.empty() && opset > schema_registry_opset())) return s;
    if (!domain.empty() && domain != "com.microsoft") return s;
    s.schema = schemas().GetSchema(std::string(g.op_type(n)), int(opset), domain);
    if (s.schema != nullptr)
      for (const auto& [name, attribute] : s.schema->attributes())
        if (attribute.required) s.required.push_back(name);
    return s;
  }
  // The schemas resolved while the facts were built; none for a node they never reached.
  const op_schema* resolved(const graph& g, node_id n) const {
    const op_id op = g.op(n);
    return op < by_op_.size() && by_op_[op].resolved ? &by_op_[op] : nullptr;
  }

  static schema_flaw flaw_of(const graph& g, node_id n, const op_schema& s) {
    if (s.schema == nullptr) return {};
    const onnx::OpSchema& schema = *s.schema;
    const onnx::NodeProto& node = g.node(n);
    if (node.input_size() < schema.min_input() || node.input_size() > schema.max_input())
      return {schema_flaw::input_count, 0, nullptr, {}};
    const auto& formal = schema.inputs();
    for (int i = 0; i < node.input_size() && !formal.empty(); ++i)
      if (node.input(i).empty() &&
          formal[std::min(std::size_t(i), formal.size() - 1)].GetOption() == onnx::OpSchema::Single)
        return {schema_flaw::missing_input, i, nullptr, {}};
    if (node.output_size() < schema.min_output() || node.output_size() > schema.max_output())
      return {schema_flaw::output_count, 0, nullptr, {}};
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (!a.ref_attr_name().empty()) continue;  // a function's attribute, typed where it is called
      // An attribute the schema does not name is an older opset's (Split's `split` at 18): a rule
      // reading it would size the outputs by what the op no longer reads.
      const auto it = schema.attributes().find(a.name());
      if (it == schema.attributes().end()) return {schema_flaw::unknown_attribute, 0, &a, {}};
      if (it->second.type != a.type()) return {schema_flaw::attribute_type, 0, &a, {}};
    }
    for (std::string_view name : s.required) {
      bool set = false;
      for (const onnx::AttributeProto& a : node.attribute()) set = set || a.name() == name;
      if (!set) return {schema_flaw::missing_attribute, 0, nullptr, name};
    }
    return {};
  }

 private:
  std::vector<op_schema> by_op_;
};

}  // namespace fusekit::facts_detail
