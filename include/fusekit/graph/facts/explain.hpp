// Where a proof broke: the explanations of unknown ranks and dims that facts::why_unknown gives and
// near misses end with. Each step names a node and the input it could not know, back to the first
// node whose output nothing could prove, and why.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "fusekit/engine.hpp"
#include "fusekit/graph/facts/rule_context.hpp"
#include "fusekit/graph/facts/schema_check.hpp"
#include "fusekit/graph/facts/store.hpp"
#include "fusekit/graph/graph.hpp"
#include "fusekit/graph/schema_inference.hpp"

namespace fusekit::facts_detail {

class explanation {
 public:
  // How far back an explanation walks before it stops with "…".
  static constexpr int max_steps = 6;

  explicit explanation(const facts& f) : f_(f), g_(f.g_) {}

  std::string why_shape(value_id v, int steps) const {
    if (steps == 0) return "…";
    const node_id n = g_.producer(v);
    if (n == no_id) return origin(v, "is declared without a shape");
    const auto inputs = g_.inputs(n);
    if (!inputs.empty() && inputs[0] == no_id) return g_.describe(n) + " has no input 0";
    if (std::string flaw = flaw_text(n); !flaw.empty()) return flaw;
    for (std::size_t k = 0; k < inputs.size(); ++k)
      if (inputs[k] != no_id && !f_.shape(inputs[k]).known)
        return step(n, k, inputs[k], "of unknown rank: ") + why_shape(inputs[k], steps - 1);
    for (std::size_t k = 0; k < inputs.size(); ++k)
      if (inputs[k] != no_id && reads_shape_from(g_.op_type(n), k) && !folded(inputs[k]))
        return step(n, k, inputs[k], "whose value is not folded: ") +
               why_content(inputs[k], steps - 1);
    return no_rule(n);
  }
  std::string why_content(value_id v, int steps) const {
    if (steps == 0) return "…";
    if (!f_.shape(v).known) return why_shape(v, steps);
    const node_id n = g_.producer(v);
    if (n == no_id) return origin(v, "is known only at run time");
    if (std::string flaw = flaw_text(n); !flaw.empty()) return flaw;
    const auto inputs = g_.inputs(n);
    const std::string_view op = g_.op_type(n);
    // A Shape's value is its input's dims, whatever its elements are.
    if (op == "Shape" && !inputs.empty() && inputs[0] != no_id)
      return g_.describe(n) + " reads '" + std::string(g_.name(inputs[0])) + "', whose dims are " +
             f_.shape_text(inputs[0]);
    for (std::size_t k = 0; k < inputs.size(); ++k)
      if (inputs[k] != no_id && !folded(inputs[k]))
        return step(n, k, inputs[k], "whose value is not folded: ") +
               why_content(inputs[k], steps - 1);
    return g_.describe(n) + " is not folded by fusekit (" +
           (f_.shape(v).known ? f_.shape_text(v) : std::string("unknown rank")) + ")";
  }
  std::string why_dim(value_id v, std::uint32_t i, int steps) const {
    if (steps == 0) return "…";
    const node_id n = g_.producer(v);
    if (n == no_id) return origin(v, "declares it without a number or a name");
    if (std::string flaw = flaw_text(n); !flaw.empty()) return flaw;
    const auto inputs = g_.inputs(n);
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      if (inputs[k] == no_id || !reads_shape_from(g_.op_type(n), k)) continue;
      const content_fact& c = f_.content(inputs[k]);
      if (!c.known)
        return step(n, k, inputs[k], "whose value is not folded: ") +
               why_content(inputs[k], steps - 1);
      if (!c.real && i < c.ints.size() && !f_.is_named(c.ints[i]))
        return step(n, k, inputs[k],
                    "whose element " + std::to_string(i) + " is " +
                        (c.ints[i].known() ? f_.text(c.ints[i]) : "not folded") + ": ") +
               why_content(inputs[k], steps - 1);
    }
    return g_.describe(n) + " cannot prove dim " + std::to_string(i) + " of its output " +
           f_.shape_text(v) + " from its inputs " + inputs_text(n);
  }

 private:
  const facts& f_;
  const graph& g_;

  // Every element is a number or a named dim.
  bool folded(value_id v) const {
    const content_fact& c = f_.content(v);
    if (!c.known) return false;
    for (const sym& e : c.ints)
      if (!e.known()) return false;
    return true;
  }
  // The inputs whose values decide an op's output shape.
  static bool reads_shape_from(std::string_view op, std::size_t slot) {
    if (op == "ConstantOfShape") return slot == 0;
    if (op == "Range") return slot <= 2;
    if (op == "Slice") return slot >= 1;
    if (op == "Pad" || op == "Resize") return slot >= 1;
    if (in(op, {"Reshape", "Expand", "Tile", "Unsqueeze", "Squeeze", "Split", "TopK", "OneHot",
                "Upsample", "CenterCropPad"}) ||
        op.starts_with("Reduce"))
      return slot == 1;
    return false;
  }
  std::string step(node_id n, std::size_t slot, value_id u, std::string_view what) const {
    return g_.describe(n) + " reads input " + std::to_string(slot) + " '" +
           std::string(g_.name(u)) + "', " + std::string(what);
  }
  std::string origin(value_id v, std::string_view what) const {
    if (g_.is_outer_scope(v))
      return "'" + std::string(g_.name(v)) + "' comes from an enclosing graph";
    if (g_.is_graph_input(v))
      return "graph input '" + std::string(g_.name(v)) + "' " + std::string(what);
    return "'" + std::string(g_.name(v)) + "' has no producer";
  }
  std::string no_rule(node_id n) const {
    const std::string domain(g_.domain(n));
    if (!domain.empty() && domain != "com.microsoft")
      return g_.describe(n) + " is of domain '" + domain + "', whose ops fusekit does not know";
    if (domain.empty())
      if (std::string refusal = schema_rule_refusal(g_.node(n), g_.opset(""), f_.schema_inputs(n));
          !refusal.empty())
        return g_.describe(n) + " " + refusal + ": ONNX's rule cannot read it";
    return g_.describe(n) + " has no shape rule fusekit or ONNX (opsets to " +
           std::to_string(schema_registry_opset()) + ") proves at opset " +
           std::to_string(g_.opset(domain)) + " for these inputs";
  }
  // How n breaks its schema; empty when it does not.
  std::string flaw_text(node_id n) const {
    const op_schema* s = f_.schemas_.resolved(g_, n);
    if (s == nullptr) return {};
    const schema_flaw flaw = schema_check::flaw_of(g_, n, *s);
    const onnx::NodeProto& node = g_.node(n);
    auto range = [](int low, int high) {
      if (low == high) return std::to_string(low);
      if (high == std::numeric_limits<int>::max()) return "at least " + std::to_string(low);
      return std::to_string(low) + " to " + std::to_string(high);
    };
    const std::string schema = "its schema at opset " + std::to_string(g_.opset(g_.domain(n)));
    switch (flaw.kind) {
      case schema_flaw::well_formed:
        return {};
      case schema_flaw::input_count:
        return g_.describe(n) + " has " + std::to_string(node.input_size()) + " inputs, " + schema +
               " takes " + range(s->schema->min_input(), s->schema->max_input());
      case schema_flaw::missing_input:
        return g_.describe(n) + " omits input " + std::to_string(flaw.slot) + ", which " + schema +
               " requires";
      case schema_flaw::output_count:
        return g_.describe(n) + " has " + std::to_string(node.output_size()) + " outputs, " +
               schema + " gives " + range(s->schema->min_output(), s->schema->max_output());
      case schema_flaw::attribute_type: {
        const onnx::AttributeProto& a = *flaw.attribute;
        return g_.describe(n) + " sets attribute '" + a.name() + "' as " +
               onnx::AttributeProto_AttributeType_Name(a.type()) + ", " + schema + " types it " +
               onnx::AttributeProto_AttributeType_Name(s->schema->attributes().at(a.name()).type);
      }
      case schema_flaw::unknown_attribute:
        return g_.describe(n) + " sets attribute '" + flaw.attribute->name() + "', which " +
               schema + " does not have";
      case schema_flaw::missing_attribute:
        return g_.describe(n) + " lacks attribute '" + std::string(flaw.name) + "', which " +
               schema + " requires";
    }
    return {};
  }
  std::string inputs_text(node_id n) const {
    std::string out;
    for (value_id u : g_.inputs(n))
      if (u != no_id) out += (out.empty() ? "" : ", ") + f_.shape_text(u);
    return out;
  }
};

}  // namespace fusekit::facts_detail

namespace fusekit {

#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::string facts::why_unknown(value_id v) const {
  if (shape(v).known) return {};
  // Appended piece by piece: g++ 12 -O3 misreads "'" + string (-Wrestrict).
  std::string out = "'";
  out += g_.name(v);
  out += "' has unknown rank: ";
  out += facts_detail::explanation(*this).why_shape(v, facts_detail::explanation::max_steps);
  return out;
}

FUSEKIT_ENGINE_INLINE std::string facts::why_unknown(value_id v, int i) const {
  if (!shape(v).known) return why_unknown(v);
  const sym* d = dim_of(v, i);
  if (d == nullptr || is_named(*d)) return {};
  std::string out = "dim " + std::to_string(i) + " of '" + std::string(g_.name(v)) + "' is ";
  // A dim nothing names was born where an op could not follow it.
  const auto a = d->lone_atom();
  if (!a) return out + text(*d) + ", which holds a dim nothing names";
  const facts_detail::birth& b = atoms_->born(*a);
  out += "unknown: ";
  if (b.where != &g_) return out + atoms_->name(*a);
  if (b.value != v)
    out += "it is dim " + std::to_string(b.dim) + " of '" + std::string(g_.name(b.value)) + "': ";
  return out + facts_detail::explanation(*this).why_dim(b.value, b.dim,
                                                        facts_detail::explanation::max_steps);
}
#endif

}  // namespace fusekit
