// ONNX's own type-and-shape rule of one node, run on what the facts know of its inputs.
//
// onnx carries the standard's shape rule for every op of ai.onnx, per opset, with data
// propagation for the ops that compute shapes. The facts oracle has rules of its own for the ops
// whose dims it follows symbolically (sums, products, quotients of named dims) and folds; every
// other op gets ONNX's rule here. What goes in: each input's element type, its dims (a constant as
// dim_value; a symbolic dim as a dim_param token that stands for it) and, for small tensors, its
// elements. What comes back: a dim_value is a constant; a token is the very dim it stood for (ONNX
// copies dims, it never computes with them); anything else is unknown to the caller.
#pragma once

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fusekit/graph/dtype.hpp"
#include "fusekit/graph/shape_fact.hpp"

namespace fusekit {

// One input of a node as the facts know it; `present` is false for an omitted optional input.
struct schema_input {
  bool present = false;
  dtype type = dtype::undefined;
  const shape_fact* shape = nullptr;
  const content_fact* content = nullptr;
  const onnx::TensorProto* constant = nullptr;  // the initializer or Constant tensor, if any
};

// Per output: the rank and dims ONNX's rule proves (unknown dims as sym::unknown()), or nullopt
// when not even the rank is known.
using schema_outputs = std::vector<std::optional<std::vector<sym>>>;

namespace detail {

class schema_context final : public onnx::InferenceContext {
 public:
  schema_context(const onnx::NodeProto& node, std::span<const schema_input> inputs,
                 std::size_t outputs)
      : node_(node),
        inputs_(inputs),
        types_(inputs.size()),
        data_(inputs.size(), nullptr),
        owned_data_(inputs.size()),
        symbolic_(inputs.size()),
        has_symbolic_(inputs.size(), false),
        outputs_(outputs) {
    for (std::size_t i = 0; i < inputs.size(); ++i) describe(i);
  }

  const onnx::AttributeProto* getAttribute(const std::string& name) const override {
    for (const auto& a : node_.attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  size_t getNumInputs() const override { return inputs_.size(); }
  const onnx::TypeProto* getInputType(size_t i) const override {
    return i < inputs_.size() && inputs_[i].present ? &types_[i] : nullptr;
  }
  const onnx::TensorProto* getInputData(size_t i) const override {
    return i < data_.size() ? data_[i] : nullptr;
  }
  size_t getNumOutputs() const override { return outputs_.size(); }
  onnx::TypeProto* getOutputType(size_t i) override {
    return i < outputs_.size() ? &outputs_[i] : nullptr;
  }
  onnx::GraphInferencer* getGraphAttributeInferencer(const std::string&) override {
    return nullptr;
  }
  const onnx::SparseTensorProto* getInputSparseData(size_t) const override { return nullptr; }
  const onnx::TensorShapeProto* getSymbolicInput(size_t i) const override {
    return i < symbolic_.size() && has_symbolic_[i] ? &symbolic_[i] : nullptr;
  }

  schema_outputs results() const {
    schema_outputs out(outputs_.size());
    for (std::size_t k = 0; k < outputs_.size(); ++k) {
      const onnx::TypeProto& t = outputs_[k];
      if (!t.has_tensor_type() || !t.tensor_type().has_shape()) continue;
      std::vector<sym> dims;
      for (const auto& d : t.tensor_type().shape().dim()) dims.push_back(read(d));
      out[k] = std::move(dims);
    }
    return out;
  }

 private:
  const onnx::NodeProto& node_;
  std::span<const schema_input> inputs_;
  std::vector<onnx::TypeProto> types_;
  std::vector<const onnx::TensorProto*> data_;
  std::vector<onnx::TensorProto> owned_data_;
  std::vector<onnx::TensorShapeProto> symbolic_;
  std::vector<bool> has_symbolic_;
  std::vector<onnx::TypeProto> outputs_;
  std::vector<sym> symbols_;  // token i stands for symbols_[i]

  static constexpr std::string_view token_prefix = "\x01fusekit:";

  std::string token(const sym& s) {
    std::size_t i = 0;
    while (i < symbols_.size() && !(symbols_[i] == s)) ++i;
    if (i == symbols_.size()) symbols_.push_back(s);
    return std::string(token_prefix) + std::to_string(i);
  }
  void write(const sym& s, onnx::TensorShapeProto_Dimension& d) {
    if (const auto k = s.constant(); k && *k >= 0)
      d.set_dim_value(*k);
    else if (s.known())
      d.set_dim_param(token(s));
  }
  sym read(const onnx::TensorShapeProto_Dimension& d) const {
    if (d.has_dim_value()) return d.dim_value() >= 0 ? sym::constant(d.dim_value()) : sym{};
    if (d.has_dim_param() && d.dim_param().starts_with(token_prefix)) {
      const std::size_t i = std::stoul(d.dim_param().substr(token_prefix.size()));
      if (i < symbols_.size()) return symbols_[i];
    }
    return sym::unknown();
  }

  void describe(std::size_t i) {
    const schema_input& in = inputs_[i];
    if (!in.present) return;
    auto* tensor = types_[i].mutable_tensor_type();
    // A type nothing states is given as float: the shape rules read dims, not element types, and
    // an op that checks the type fails here and leaves the output unknown.
    tensor->set_elem_type(in.type == dtype::undefined ? onnx::TensorProto::FLOAT
                                                      : static_cast<int>(in.type));
    if (in.shape != nullptr && in.shape->known) {
      auto* shape = tensor->mutable_shape();
      for (const sym& s : in.shape->dims) write(s, *shape->add_dim());
    }
    if (in.constant != nullptr && in.constant->data_location() != onnx::TensorProto::EXTERNAL) {
      data_[i] = in.constant;
      return;
    }
    if (in.content == nullptr || !in.content->known || in.shape == nullptr || !in.shape->known)
      return;
    const content_fact& c = *in.content;
    if (!c.real && in.shape->rank() <= 1) {
      // Data propagation's view of an integer vector: symbolic entries as tokens.
      for (const sym& s : c.ints) write(s, *symbolic_[i].add_dim());
      has_symbolic_[i] = true;
    }
    materialise(i);
  }

  // Folded content whose every element is a number, as the TensorProto the rule may parse.
  void materialise(std::size_t i) {
    const schema_input& in = inputs_[i];
    const content_fact& c = *in.content;
    onnx::TensorProto& t = owned_data_[i];
    for (const sym& d : in.shape->dims) {
      const auto k = d.constant();
      if (!k) return;
      t.add_dims(*k);
    }
    t.set_data_type(static_cast<int>(in.type));
    switch (in.type) {
      case dtype::int64:
        for (const sym& e : c.ints) {
          const auto k = e.constant();
          if (!k) return;
          t.add_int64_data(*k);
        }
        break;
      case dtype::int32:
      case dtype::int16:
      case dtype::int8:
      case dtype::uint8:
      case dtype::uint16:
      case dtype::boolean:
        for (const sym& e : c.ints) {
          const auto k = e.constant();
          if (!k) return;
          t.add_int32_data(std::int32_t(*k));
        }
        break;
      case dtype::float32:
        if (!c.real) return;
        for (double e : c.reals) t.add_float_data(float(e));
        break;
      case dtype::float64:
        if (!c.real) return;
        for (double e : c.reals) t.add_double_data(e);
        break;
      default:
        return;
    }
    data_[i] = &t;
  }
};

}  // namespace detail

// What ONNX's rules read without checking it first. The checker passes these nodes, and the rules
// (onnx 1.23's) index their inputs' dims, or a vector of their own, by the numbers they hold:
// GatherND copies data's dims from batch_dims plus indices' last dim on, before the first where
// that is negative (a crash); Split from opset 18 makes num_outputs parts and writes one per
// output, past the parts' end where the node has more outputs; Attention reads dims of its value
// as numbers even where they are none; Einsum's rule parses its equation unchecked and did not
// return on a fuzzed one ("bij,bkj-" and bytes past ASCII). Rules also read an int attribute as an
// int: an axis past its range wraps into it, and Split's axis dim past it wraps too. The input dims
// themselves need no check: a negative one is written as no number at all (schema_context::write).
//
// Why ONNX's rule cannot read `node` as it stands, as a phrase after the node's name; empty where
// it can. Ranks only where its inputs' shapes are known: a rule with no shape to read reads none.
inline std::string schema_rule_refusal(const onnx::NodeProto& node, std::int64_t opset,
                                       std::span<const schema_input> inputs) {
  auto int_attribute = [&](std::string_view name) -> std::optional<std::int64_t> {
    for (const auto& a : node.attribute())
      if (a.name() == name && a.type() == onnx::AttributeProto::INT) return a.i();
    return std::nullopt;
  };
  auto rank = [&](std::size_t i) -> std::optional<std::int64_t> {
    if (i >= inputs.size() || !inputs[i].present || inputs[i].shape == nullptr ||
        !inputs[i].shape->known)
      return std::nullopt;
    return std::int64_t(inputs[i].shape->rank());
  };
  auto dim = [&](std::size_t i, std::int64_t k) -> std::optional<std::int64_t> {
    const auto r = rank(i);
    if (!r || k < 0 || k >= *r) return std::nullopt;
    return inputs[i].shape->dims[std::size_t(k)].constant();
  };
  constexpr std::int64_t int_max = std::numeric_limits<int>::max();
  for (const auto& a : node.attribute())
    if (a.type() == onnx::AttributeProto::INT && a.name().ends_with("axis") &&
        (a.i() < -int_max || a.i() > int_max))
      return "sets '" + a.name() + "' to " + std::to_string(a.i()) +
             ", which ONNX's rule reads as an int";
  const std::string_view op = node.op_type();
  if (op == "Einsum") {
    std::string_view equation;
    for (const auto& a : node.attribute())
      if (a.name() == "equation") equation = a.s();
    const std::size_t arrow = equation.find("->");
    bool well_formed = true;
    for (std::size_t i = 0; i < equation.size(); ++i) {
      const char c = equation[i];
      well_formed =
          well_formed && (std::isalpha(static_cast<unsigned char>(c)) || c == ',' || c == ' ' ||
                          c == '.' || (c == '-' && i == arrow) ||
                          (c == '>' && arrow != std::string_view::npos && i == arrow + 1));
    }
    if (!well_formed)
      return "has an equation of other than letters, commas, spaces, dots and one \"->\"";
  }
  if (op == "GatherND") {
    const std::int64_t b = int_attribute("batch_dims").value_or(0);
    const auto r = rank(0), q = rank(1);
    std::optional<std::int64_t> last;
    if (q && *q > 0) last = dim(1, *q - 1);
    if (b < 0 || (r && q && b >= std::min(*r, *q)))
      return "sets batch_dims to " + std::to_string(b) +
             ", which must be from 0 to below both inputs' ranks";
    if (r && last && (*last < 1 || *last > *r - b))
      return "indexes " + std::to_string(*last) + " dims of data past " + std::to_string(b) +
             " batch dims, which must be from 1 to its rank less those";
  }
  if (op == "Split") {
    const auto r = rank(0);
    std::int64_t axis = int_attribute("axis").value_or(0);
    if (r && axis < 0) axis += *r;
    if (const auto d = dim(0, axis); d && *d > int_max)
      return "splits a dim of " + std::to_string(*d) + ", which ONNX's rule reads as an int";
    const bool sizes = inputs.size() > 1 && inputs[1].present;
    if (const auto parts = int_attribute("num_outputs");
        opset >= 18 && !sizes && parts && *parts != node.output_size())
      return "makes " + std::to_string(*parts) + " parts (num_outputs) for " +
             std::to_string(node.output_size()) + " outputs";
  }
  if (op == "Attention") {
    // The rule reads the value's kv sequence (and, 3-D, its hidden size) as numbers: a dim it
    // does not know reads as 0, and an output of length 0 follows. Its scores output (3) takes
    // that length, and is of rank 1 where query and value differ in rank.
    const auto q = rank(0), v = rank(2);
    const bool scores = node.output_size() > 3 && !node.output(3).empty();
    auto number = [&](std::int64_t k) {
      const auto d = dim(2, k);
      return d && *d >= 0;
    };
    if (q && v && *q == 3 && *v == 3 && !number(2))
      return "holds a value of hidden size no number, which ONNX's rule reads as one";
    if (scores && q && v && (*q != *v || !number(*v == 4 ? 2 : 1)))
      return "returns its scores, whose length ONNX's rule reads as a number from the value";
  }
  return {};
}

// The highest opset of ai.onnx whose rules the linked onnx release knows.
inline int schema_registry_opset() {
  const auto& map = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  const auto it = map.find(onnx::ONNX_DOMAIN);
  return it == map.end() ? 0 : it->second.second;
}

// ONNX's rule for `node` at `opset` of ai.onnx, or nullopt when the linked onnx release has none it
// can vouch for (unknown op, a subgraph-carrying op, an opset newer than the release, whose rules
// may have changed, a node the rule cannot read: schema_rule_refusal) or the rule refused the
// inputs.
inline std::optional<schema_outputs> schema_shapes(const onnx::NodeProto& node, std::int64_t opset,
                                                   std::span<const schema_input> inputs) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") return std::nullopt;
  for (const auto& a : node.attribute())
    if (a.has_g() || a.graphs_size() > 0) return std::nullopt;
  if (opset > schema_registry_opset()) return std::nullopt;
  const onnx::OpSchema* schema =
      onnx::OpSchemaRegistry::Schema(node.op_type(), int(opset), onnx::ONNX_DOMAIN);
  if (schema == nullptr || !schema->has_type_and_shape_inference_function()) return std::nullopt;
  if (!schema_rule_refusal(node, opset, inputs).empty()) return std::nullopt;
  detail::schema_context ctx(node, inputs, std::size_t(node.output_size()));
  try {
    schema->GetTypeAndShapeInferenceFunction()(ctx);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return ctx.results();
}

}  // namespace fusekit
