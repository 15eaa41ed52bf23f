// Synthetic ONNX models in a few lines, for rule tests, benchmarks and users' own rule tests:
//
//   fusekit::build::model_builder b(17);
//   auto q  = b.input("q", dtype::float16, {2, 16, "S", 64});
//   auto kt = b.input("kt", dtype::float16, {2, 16, 64, "S"});
//   auto s  = b.op("MatMul", {q, kt});
//   auto p  = b.op("Softmax", {b.op("Mul", {s, b.scalar(dtype::float16, 0.125)})}, {{"axis", -1}});
//   b.output(p);
//   onnx::ModelProto m = b.build();
//
// Names are deterministic: node "<OpType>_<n>", its first output the same name.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "fusekit/engine.hpp"
#include "fusekit/graph/dtype.hpp"
#include "fusekit/graph/op_table.hpp"
#include "fusekit/io/model.hpp"

namespace fusekit::build {

// A value of the graph being built. An empty name is an omitted optional input.
struct value {
  std::string name;
};

// A dimension: static size or symbolic name.
struct dim_spec {
  dim_spec(std::int64_t size) : size(size) {}
  dim_spec(int size) : size(size) {}
  dim_spec(const char* symbol) : symbol(symbol) {}
  dim_spec(std::string symbol) : symbol(std::move(symbol)) {}
  std::int64_t size = -1;
  std::string symbol;
};

// No shape at all (rank unknown), as opposed to {} (a scalar).
struct unknown_shape_t {};
inline constexpr unknown_shape_t unknown_shape;

class shape_spec {
 public:
  shape_spec(unknown_shape_t) {}
  shape_spec(std::initializer_list<dim_spec> dims) : known_(true), dims_(dims) {}
  shape_spec(std::vector<dim_spec> dims) : known_(true), dims_(std::move(dims)) {}

  void write(onnx::TypeProto_Tensor& tensor) const {
    if (!known_) return;
    auto* shape = tensor.mutable_shape();
    for (const auto& d : dims_) {
      auto* out = shape->add_dim();
      if (d.symbol.empty())
        out->set_dim_value(d.size);
      else
        out->set_dim_param(d.symbol);
    }
  }

 private:
  bool known_ = false;
  std::vector<dim_spec> dims_;
};

struct attr {
  attr(std::string name, std::int64_t v)
      : attr(std::move(name), onnx::AttributeProto_AttributeType_INT) {
    proto.set_i(v);
  }
  attr(std::string name, int v) : attr(std::move(name), std::int64_t(v)) {}
  attr(std::string name, dtype v) : attr(std::move(name), std::int64_t(v)) {}
  attr(std::string name, double v)
      : attr(std::move(name), onnx::AttributeProto_AttributeType_FLOAT) {
    proto.set_f(float(v));
  }
  attr(std::string name, const char* v)
      : attr(std::move(name), onnx::AttributeProto_AttributeType_STRING) {
    proto.set_s(v);
  }
  attr(std::string name, std::string v)
      : attr(std::move(name), onnx::AttributeProto_AttributeType_STRING) {
    proto.set_s(std::move(v));
  }
  attr(std::string name, std::vector<std::int64_t> v)
      : attr(std::move(name), onnx::AttributeProto_AttributeType_INTS) {
    for (auto x : v) proto.add_ints(x);
  }
  attr(std::string name, std::vector<double> v)
      : attr(std::move(name), onnx::AttributeProto_AttributeType_FLOATS) {
    for (auto x : v) proto.add_floats(float(x));
  }
  attr(std::string name, onnx::TensorProto v)
      : attr(std::move(name), onnx::AttributeProto_AttributeType_TENSOR) {
    *proto.mutable_t() = std::move(v);
  }
  attr(std::string name, onnx::GraphProto v)
      : attr(std::move(name), onnx::AttributeProto_AttributeType_GRAPH) {
    *proto.mutable_g() = std::move(v);
  }
  // An attribute as a node already has it: emit's copy of a matched node.
  explicit attr(onnx::AttributeProto a) : proto(std::move(a)) {}

  onnx::AttributeProto proto;

 private:
  attr(std::string name, onnx::AttributeProto_AttributeType type) {
    proto.set_name(std::move(name));
    proto.set_type(type);
  }
};

struct node_options {
  std::string name{};    // default "<OpType>_<n>"
  std::string domain{};  // default ai.onnx
  int outputs = 1;
};

// Encodes `values` as raw_data of the given type (float16/bfloat16 rounded to nearest even).
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE onnx::TensorProto make_tensor(std::string name, dtype type,
                                                    std::vector<std::int64_t> dims,
                                                    const std::vector<double>& values) {
  onnx::TensorProto t;
  t.set_name(std::move(name));
  t.set_data_type(static_cast<int>(type));
  for (auto d : dims) t.add_dims(d);
  std::string raw;
  auto put = [&raw](auto x) { raw.append(reinterpret_cast<const char*>(&x), sizeof(x)); };
  for (double v : values) {
    switch (type) {
      case dtype::float32:
        put(float(v));
        break;
      case dtype::float64:
        put(v);
        break;
      case dtype::float16:
        put(float_to_half(float(v)));
        break;
      case dtype::bfloat16:
        put(float_to_bfloat16(float(v)));
        break;
      case dtype::int8:
        put(std::int8_t(v));
        break;
      case dtype::uint8:
      case dtype::boolean:
        put(std::uint8_t(v));
        break;
      case dtype::int16:
        put(std::int16_t(v));
        break;
      case dtype::uint16:
        put(std::uint16_t(v));
        break;
      case dtype::int32:
        put(std::int32_t(v));
        break;
      case dtype::uint32:
        put(std::uint32_t(v));
        break;
      case dtype::int64:
        put(std::int64_t(v));
        break;
      case dtype::uint64:
        put(std::uint64_t(v));
        break;
      default:
        throw error("make_tensor cannot encode " + std::string(dtype_name(type)));
    }
  }
  t.set_raw_data(std::move(raw));
  return t;
}
#else
onnx::TensorProto make_tensor(std::string name, dtype type, std::vector<std::int64_t> dims,
                              const std::vector<double>& values);
#endif

// A 1-D int64 tensor of `values`, each written exactly (a shape, axes, a Slice's bounds: torch's
// INT64_MAX for "to the end" has no double).
inline onnx::TensorProto make_ints_tensor(std::string name, std::span<const std::int64_t> values) {
  onnx::TensorProto t;
  t.set_name(std::move(name));
  t.set_data_type(static_cast<int>(dtype::int64));
  t.add_dims(std::int64_t(values.size()));
  t.set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size_bytes()));
  return t;
}

class graph_builder {
 public:
  explicit graph_builder(std::string name = "main") : names_(std::make_shared<int>(0)) {
    graph_.set_name(std::move(name));
  }

  value input(std::string name, dtype type, shape_spec shape = unknown_shape) {
    add_info(*graph_.add_input(), name, type, shape);
    return {std::move(name)};
  }

  void output(const value& v, dtype type = dtype::undefined, shape_spec shape = unknown_shape) {
    add_info(*graph_.add_output(), v.name, type, shape);
  }

  void value_info(const value& v, dtype type, shape_spec shape = unknown_shape) {
    add_info(*graph_.add_value_info(), v.name, type, shape);
  }

  // Adds a node and returns its first output.
  value op(std::string_view op_type, std::vector<value> inputs,
           std::initializer_list<attr> attrs = {}, node_options options = {}) {
    return ops(op_type, std::move(inputs), attrs, std::move(options)).front();
  }

  // Adds a node with options.outputs outputs and returns them all.
  std::vector<value> ops(std::string_view op_type, std::vector<value> inputs,
                         std::initializer_list<attr> attrs = {}, node_options options = {});

  value initializer(std::string name, dtype type, std::vector<std::int64_t> dims,
                    const std::vector<double>& values) {
    *graph_.add_initializer() = make_tensor(name, type, std::move(dims), values);
    return {std::move(name)};
  }
  value initializer(dtype type, std::vector<std::int64_t> dims, const std::vector<double>& values) {
    return initializer(fresh("init"), type, std::move(dims), values);
  }

  // A 0-d initializer.
  value scalar(dtype type, double v) { return initializer(type, {}, {v}); }
  // A 1-D int64 initializer, its values written exactly.
  value ints(std::vector<std::int64_t> values) {
    std::string name = fresh("init");
    *graph_.add_initializer() = make_ints_tensor(name, values);
    return {std::move(name)};
  }

  // A Constant node holding the tensor.
  value constant(dtype type, std::vector<std::int64_t> dims, const std::vector<double>& values) {
    return op("Constant", {}, {{"value", make_tensor("", type, std::move(dims), values)}});
  }
  value constant_scalar(dtype type, double v) { return constant(type, {}, {v}); }

  // A builder for an If/Loop/Scan body. It shares this builder's name counter, because ONNX forbids
  // a subgraph from reusing its enclosing graph's names.
  graph_builder subgraph(std::string name) const { return graph_builder(std::move(name), names_); }

  onnx::GraphProto& proto() { return graph_; }
  const onnx::GraphProto& proto() const { return graph_; }

 private:
  graph_builder(std::string name, std::shared_ptr<int> names) : names_(std::move(names)) {
    graph_.set_name(std::move(name));
  }

  std::string fresh(std::string_view prefix) {
    return std::string(prefix) + "_" + std::to_string((*names_)++);
  }

  static void add_info(onnx::ValueInfoProto& info, const std::string& name, dtype type,
                       const shape_spec& shape) {
    info.set_name(name);
    if (type == dtype::undefined) return;
    auto* tensor = info.mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(static_cast<int>(type));
    shape.write(*tensor);
  }

  onnx::GraphProto graph_;
  std::shared_ptr<int> names_;
};

#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::vector<value> graph_builder::ops(std::string_view op_type,
                                                            std::vector<value> inputs,
                                                            std::initializer_list<attr> attrs,
                                                            node_options options) {
  auto& node = *graph_.add_node();
  node.set_op_type(std::string(op_type));
  node.set_domain(options.domain);
  node.set_name(options.name.empty() ? fresh(op_type) : options.name);
  for (const auto& in : inputs) node.add_input(in.name);
  std::vector<value> outputs;
  for (int k = 0; k < options.outputs; ++k) {
    outputs.push_back({k == 0 ? node.name() : node.name() + "_" + std::to_string(k)});
    node.add_output(outputs.back().name);
  }
  for (const auto& a : attrs) *node.add_attribute() = a.proto;
  return outputs;
}
#endif

class model_builder : public graph_builder {
 public:
  explicit model_builder(std::int64_t opset = 17) { opset_import("", opset); }

  model_builder& opset_import(std::string domain, std::int64_t version) {
    for (auto& [d, v] : opsets_)
      if (d == domain) {
        v = version;
        return *this;
      }
    opsets_.emplace_back(std::move(domain), version);
    return *this;
  }

  // Defaults to the IR version the ONNX release that introduced the ai.onnx opset wrote.
  model_builder& ir_version(std::int64_t version) {
    ir_version_ = version;
    return *this;
  }

  onnx::ModelProto build() const {
    onnx::ModelProto m = build_without_graph();
    *m.mutable_graph() = proto();
    return m;
  }

  // The model around an empty graph (IR version, producer, opset imports): for a graph of one's
  // own, a part of the one being built.
  onnx::ModelProto build_without_graph() const {
    onnx::ModelProto m;
    m.set_ir_version(ir_version_ ? ir_version_ : default_ir_version());
    m.set_producer_name("fusekit.model_builder");
    for (const auto& [domain, version] : opsets_) {
      auto* opset = m.add_opset_import();
      opset->set_domain(domain);
      opset->set_version(version);
    }
    return m;
  }

  fusekit::model build_model() const { return {.proto = build(), .path = {}}; }

 private:
  std::int64_t default_ir_version() const {
    std::int64_t onnx_opset = 0;
    for (const auto& [domain, version] : opsets_)
      if (canonical_domain(domain).empty()) onnx_opset = version;
    if (onnx_opset >= 23) return 11;
    if (onnx_opset >= 21) return 10;
    if (onnx_opset >= 19) return 9;
    return 8;
  }

  std::vector<std::pair<std::string, std::int64_t>> opsets_;
  std::int64_t ir_version_ = 0;
};

// Moves the main graph's nodes into a model-local function `domain.name` (its initializers become
// Constant nodes, its inputs and outputs the function's) that one node, `call`, calls: what
// torch's export_modules_as_functions writes for a module.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE void move_into_local_function(onnx::ModelProto& m, const std::string& name,
                                                    const std::string& domain,
                                                    const std::string& call) {
  onnx::GraphProto& g = *m.mutable_graph();
  onnx::FunctionProto& f = *m.add_functions();
  f.set_name(name);
  f.set_domain(domain);
  for (const auto& o : m.opset_import()) *f.add_opset_import() = o;
  for (const auto& t : g.initializer()) {
    onnx::NodeProto& c = *f.add_node();
    c.set_op_type("Constant");
    c.add_output(t.name());
    onnx::AttributeProto& a = *c.add_attribute();
    a.set_name("value");
    a.set_type(onnx::AttributeProto::TENSOR);
    *a.mutable_t() = t;
  }
  for (const auto& n : g.node()) *f.add_node() = n;
  onnx::NodeProto caller;
  caller.set_name(call);
  caller.set_op_type(name);
  caller.set_domain(domain);
  for (const auto& v : g.input()) {
    f.add_input(v.name());
    caller.add_input(v.name());
  }
  for (const auto& v : g.output()) {
    f.add_output(v.name());
    caller.add_output(v.name());
  }
  g.clear_node();
  g.clear_initializer();
  g.clear_value_info();
  *g.add_node() = std::move(caller);
  onnx::OperatorSetIdProto& local = *m.add_opset_import();
  local.set_domain(domain);
  local.set_version(1);
}
#else
void move_into_local_function(onnx::ModelProto& m, const std::string& name,
                              const std::string& domain, const std::string& call);
#endif

}  // namespace fusekit::build
