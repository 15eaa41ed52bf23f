// An index over an onnx::GraphProto: dense ids for nodes and values, interned op types, producers,
// consumers, constants, element types and shapes, opset-correct attribute defaults, and the
// subgraphs of If/Loop/Scan with their outer-scope references resolved.
//
// Built once in O(nodes + edges); afterwards every query is an array access. The index points into
// the ModelProto it was built from: keep that alive and unchanged while the index is in use.
#pragma once

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <queue>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fusekit/engine.hpp"
#include "fusekit/graph/contributed_op_schemas.hpp"
#include "fusekit/graph/dtype.hpp"
#include "fusekit/graph/name_table.hpp"
#include "fusekit/graph/op_table.hpp"
#include "fusekit/graph/tensor.hpp"
#include "fusekit/graph/type_rules.hpp"
#include "fusekit/io/error.hpp"
#include "fusekit/io/model.hpp"

namespace fusekit {

class facts;
class graph;
const facts& facts_of(const graph& g);

using node_id = std::uint32_t;
using value_id = std::uint32_t;
inline constexpr std::uint32_t no_id = UINT32_MAX;

// One read of a value: input `slot` of `node`. A node whose subgraph reads an outer value uses it
// implicitly, with no slot; such uses keep the value alive like any other.
struct use {
  static constexpr std::uint32_t implicit_slot = no_id;
  node_id node;
  std::uint32_t slot;
  bool is_implicit() const { return slot == implicit_slot; }
  bool operator==(const use&) const = default;
};

struct dim {
  std::int64_t size = -1;     // -1 unless static
  std::string_view symbol{};  // dim_param, when symbolic (a view into the model)
  bool is_static() const { return size >= 0; }
  bool is_symbolic() const { return !symbol.empty(); }
  bool operator==(const dim&) const = default;
};

struct tensor_shape {
  bool known = false;  // false: not even the rank is known
  std::vector<dim> dims;
  std::size_t rank() const { return dims.size(); }
};

struct attribute_lookup {
  const onnx::AttributeProto* attribute = nullptr;  // null when neither set nor defaulted
  bool is_default = false;                          // came from the op schema
  explicit operator bool() const { return attribute != nullptr; }
};

class graph;

struct subgraph_ref {
  std::string_view attribute;  // then_branch, else_branch, body
  const graph* body;
};

class graph {
 public:
  // The main graph of `model`. `file` names the model in errors and is where external data lives.
  explicit graph(const onnx::ModelProto& model, std::filesystem::path file = {})
      : proto_(&model.graph()), root_(this), shared_(std::make_unique<shared_state>()) {
    shared_->directory = file.parent_path();
    shared_->file = std::move(file);
    shared_->ir_version = model.ir_version();
    for (const auto& opset : model.opset_import())
      shared_->opsets[std::string(canonical_domain(opset.domain()))] = opset.version();
    index();
    load_schemas();
    resolve_types();
  }

  explicit graph(const model& m) : graph(m.proto, m.path) {}

  graph(const graph&) = delete;
  graph& operator=(const graph&) = delete;

  const onnx::GraphProto& proto() const { return *proto_; }
  const graph* parent() const { return parent_; }
  node_id owner() const { return owner_; }  // the node in parent() that holds this subgraph
  const std::filesystem::path& file() const { return root_->shared_->file; }
  // Where the model's external data lives.
  const std::filesystem::path& directory() const { return root_->shared_->directory; }
  const op_interner& ops() const { return root_->shared_->ops; }

  // Below 4, every initializer must also be a graph input.
  std::int64_t ir_version() const { return root_->shared_->ir_version; }
  // 0 when the model does not import the domain.
  std::int64_t opset(std::string_view domain) const {
    const auto& opsets = root_->shared_->opsets;
    auto it = opsets.find(std::string(canonical_domain(domain)));
    return it == opsets.end() ? 0 : it->second;
  }

  // ---- nodes
  std::size_t node_count() const { return nodes_.size(); }
  const onnx::NodeProto& node(node_id n) const { return *nodes_[n].proto; }
  op_id op(node_id n) const { return nodes_[n].op; }
  std::string_view op_type(node_id n) const { return nodes_[n].proto->op_type(); }
  std::string_view domain(node_id n) const { return canonical_domain(nodes_[n].proto->domain()); }
  // Omitted optional inputs and outputs ("") are no_id.
  std::span<const value_id> inputs(node_id n) const {
    return {edges_.data() + nodes_[n].inputs, nodes_[n].input_count};
  }
  std::span<const value_id> outputs(node_id n) const {
    return {edges_.data() + nodes_[n].outputs, nodes_[n].output_count};
  }
  value_id input(node_id n, std::size_t slot) const {
    return slot < nodes_[n].input_count ? inputs(n)[slot] : no_id;
  }
  value_id output(node_id n, std::size_t slot) const {
    return slot < nodes_[n].output_count ? outputs(n)[slot] : no_id;
  }
  std::span<const subgraph_ref> subgraphs(node_id n) const {
    return {subgraph_refs_.data() + nodes_[n].subgraphs, nodes_[n].subgraph_count};
  }
  // Nodes of one op type, in graph order.
  std::span<const node_id> nodes_of(op_id op) const {
    if (op + 1 >= op_index_offsets_.size()) return {};
    return {op_index_.data() + op_index_offsets_[op],
            op_index_offsets_[op + 1] - op_index_offsets_[op]};
  }
  std::span<const node_id> topological_order() const { return topo_; }
  // The node's index in topological_order().
  std::size_t topological_position(node_id n) const { return topo_position_[n]; }

  // "Softmax 'attn/Softmax_12'", or "Softmax #12" (position in the graph) when unnamed.
  std::string describe(node_id n) const {
    const auto& proto = *nodes_[n].proto;
    std::string text(proto.op_type());
    if (proto.name().empty()) return text + " #" + std::to_string(n);
    return text + " '" + proto.name() + "'";
  }

  // ---- values
  std::size_t value_count() const { return values_.size(); }
  std::optional<value_id> find_value(std::string_view name) const { return by_name_.find(name); }
  // An omitted input (no_id) is a value like any other to these accessors: no name, no producer,
  // no readers, no type, no shape; walkers that step onto one stop instead of reading past the end.
  std::string_view name(value_id v) const { return value(v).name; }
  node_id producer(value_id v) const { return value(v).producer; }
  std::uint32_t producer_slot(value_id v) const { return value(v).producer_slot; }
  std::span<const use> consumers(value_id v) const {
    const value_record& r = value(v);
    return {uses_.data() + r.uses, r.use_count};
  }
  bool is_graph_input(value_id v) const { return value(v).flags & graph_input; }
  bool is_graph_output(value_id v) const { return value(v).flags & graph_output; }
  bool is_initializer(value_id v) const { return value(v).flags & initializer; }
  bool is_outer_scope(value_id v) const { return value(v).flags & outer_scope; }
  // Whether a subgraph reads v by its name: a reader renamed elsewhere cannot reach it there.
  bool read_by_name_in_subgraph(value_id v) const {
    const auto uses = consumers(v);
    return std::any_of(uses.begin(), uses.end(), [](const use& u) { return u.is_implicit(); });
  }
  // An initializer that is also a graph input (IR >= 4) can be overridden at run time: not
  // constant.
  bool is_constant(value_id v) const { return value(v).flags & constant; }
  // The tensor of a constant: initializer or Constant node (value_float & co. included). Null when
  // the value is not constant or is sparse.
  const onnx::TensorProto* constant_tensor(value_id v) const {
    return is_constant(v) ? value(v).tensor : nullptr;
  }
  // One-element numeric constant of any dtype, shape [] or [1, …, 1].
  std::optional<double> constant_scalar(value_id v) const {
    const onnx::TensorProto* t = constant_tensor(v);
    if (t == nullptr) return std::nullopt;
    try {
      return scalar_value(*t, directory());
    } catch (const error& e) {
      throw e.in_file(file().string());
    }
  }
  dtype type(value_id v) const { return value(v).type; }
  const tensor_shape& shape(value_id v) const {
    return v < shapes_.size() ? shapes_[v] : unknown_shape();
  }
  // Where an outer-scope value is defined: the enclosing graph and its id there.
  std::pair<const graph*, value_id> definition(value_id v) const {
    if (!is_outer_scope(v)) return {this, v};
    const value_id outer = *parent_->find_value(name(v));
    return parent_->definition(outer);
  }

  // ---- attributes
  // The node's attribute, else the schema default for the model's opset of the op's domain.
  attribute_lookup attribute(node_id n, std::string_view name) const {
    for (const auto& a : nodes_[n].proto->attribute())
      if (a.name() == name) return {&a, false};
    const auto& defaults = root_->shared_->defaults;
    if (op(n) < defaults.size())
      for (const auto& [attr_name, value] : defaults[op(n)])
        if (attr_name == name) return {value, true};
    return {};
  }
  // The op's schema at the model's opset of its domain; null where onnx (or fusekit's contributed
  // op schemas) does not know the op there.
  const onnx::OpSchema* schema(node_id n) const {
    const auto& schemas = root_->shared_->schemas;
    return op(n) < schemas.size() ? schemas[op(n)] : nullptr;
  }
  // Whether the op has an attribute of this name at other opsets but not at the model's, as
  // BatchNormalization before opset 14 has no training_mode, and from 7 on no is_test. False
  // where the schema is unknown, and for a name no opset of the op has (a misspelling).
  bool attribute_not_in_opset(node_id n, std::string_view name) const {
    const onnx::OpSchema* s = schema(n);
    const std::string attribute(name);
    if (s == nullptr || s->attributes().contains(attribute)) return false;
    for (const onnx::OpSchema* other = schemas().GetSchema(s->Name(), INT_MAX, s->domain());
         other != nullptr;
         other = other->SinceVersion() > 1
                     ? schemas().GetSchema(s->Name(), other->SinceVersion() - 1, s->domain())
                     : nullptr)
      if (other->attributes().contains(attribute)) return true;
    return false;
  }
  std::optional<std::int64_t> attribute_int(node_id n, std::string_view name) const {
    auto a = attribute(n, name);
    if (!a || a.attribute->type() != onnx::AttributeProto_AttributeType_INT) return std::nullopt;
    return a.attribute->i();
  }
  std::optional<float> attribute_float(node_id n, std::string_view name) const {
    auto a = attribute(n, name);
    if (!a || a.attribute->type() != onnx::AttributeProto_AttributeType_FLOAT) return std::nullopt;
    return a.attribute->f();
  }
  std::optional<std::string_view> attribute_string(node_id n, std::string_view name) const {
    auto a = attribute(n, name);
    if (!a || a.attribute->type() != onnx::AttributeProto_AttributeType_STRING) return std::nullopt;
    return a.attribute->s();
  }
  std::optional<std::span<const std::int64_t>> attribute_ints(node_id n,
                                                              std::string_view name) const {
    auto a = attribute(n, name);
    if (!a || a.attribute->type() != onnx::AttributeProto_AttributeType_INTS) return std::nullopt;
    return std::span<const std::int64_t>(a.attribute->ints().data(), a.attribute->ints_size());
  }

  // Whether output 0 of n is its input 0 unchanged when the model runs for inference: an
  // Identity, a Cast to the type it reads, or a Dropout not in training mode — before opset 12
  // every Dropout (from 7; is_test set before that), from 12 one whose training_mode is absent
  // or a constant false. A training_mode the model reads at run time proves nothing.
  bool passes_input_at_inference(node_id n) const {
    if (!domain(n).empty() || inputs(n).empty() || input(n, 0) == no_id) return false;
    const std::string_view op = op_type(n);
    if (op == "Identity") return true;
    if (op == "Cast")
      return type(input(n, 0)) != dtype::undefined &&
             attribute_int(n, "to") == std::int64_t(type(input(n, 0)));
    if (op != "Dropout") return false;
    const std::int64_t version = opset("");
    if (version < 7) return attribute_int(n, "is_test").value_or(0) != 0;
    if (version < 12 || input(n, 2) == no_id) return true;
    const std::optional<double> training = constant_scalar(input(n, 2));
    return training && *training == 0;
  }

 private:
  enum flag : std::uint8_t {
    graph_input = 1,
    graph_output = 2,
    initializer = 4,
    outer_scope = 8,
    constant = 16,
  };

  struct node_record {
    const onnx::NodeProto* proto;
    op_id op;
    std::uint32_t inputs, input_count, outputs, output_count, subgraphs, subgraph_count;
  };

  struct value_record {
    std::string_view name;
    node_id producer = no_id;
    std::uint32_t producer_slot = 0;
    std::uint32_t uses = 0, use_count = 0;
    std::uint8_t flags = 0;
    dtype type = dtype::undefined;
    const onnx::TensorProto* tensor = nullptr;
  };

  const value_record& value(value_id v) const {
    static const value_record absent{};
    return v < values_.size() ? values_[v] : absent;
  }
  static const tensor_shape& unknown_shape() {
    static const tensor_shape unknown{};
    return unknown;
  }

  // Owned by the main graph, shared by its subgraphs.
  struct shared_state {
    std::filesystem::path file;
    std::filesystem::path directory;  // where external data is found
    std::int64_t ir_version = 0;
    std::unordered_map<std::string, std::int64_t> opsets;
    op_interner ops;
    std::vector<bool> used_ops;  // op ids that occur in some graph of the model
    std::vector<std::vector<std::pair<std::string_view, const onnx::AttributeProto*>>> defaults;
    std::vector<const onnx::OpSchema*> schemas;  // by op id, at the model's opset; null: unknown
    std::deque<onnx::TensorProto> synthesized;   // grows without moving: pointers stay valid
  };

  graph(const onnx::GraphProto& proto, graph* parent, node_id owner)
      : proto_(&proto), parent_(parent), owner_(owner), root_(parent->root_) {
    index();
  }

  error fail(std::string message, node_id n = no_id, std::string field = {}) const {
    std::string node_text = n == no_id ? std::string() : "node " + describe(n);
    if (parent_ != nullptr) {
      const std::string scope = "in subgraph of " + parent_->describe(owner_);
      node_text = node_text.empty() ? scope : scope + ", " + node_text;
    }
    return error(
        std::move(message),
        {.file = file().string(), .node = std::move(node_text), .field = std::move(field)});
  }

  value_id add_value(std::string_view name, std::uint8_t flags) {
    const value_id v = value_id(values_.size());
    values_.push_back({.name = name, .flags = flags});
    by_name_.insert(name, v);
    return v;
  }

  // A value this graph reads but does not define: it must be visible in an enclosing scope.
  std::optional<value_id> resolve(std::string_view name) {
    if (auto v = by_name_.find(name)) return v;
    if (parent_ == nullptr || !parent_->resolve(name)) return std::nullopt;
    return add_value(name, outer_scope);
  }

  static void read_type(const onnx::TypeProto& type, value_record& value, tensor_shape& shape) {
    if (!type.has_tensor_type()) return;
    const auto& tensor = type.tensor_type();
    if (tensor.elem_type() != 0) value.type = static_cast<dtype>(tensor.elem_type());
    if (!tensor.has_shape()) return;
    shape.known = true;
    shape.dims.clear();
    for (const auto& d : tensor.shape().dim()) {
      dim x;
      if (d.has_dim_value()) x.size = d.dim_value();
      if (d.has_dim_param()) x.symbol = d.dim_param();
      shape.dims.push_back(std::move(x));
    }
  }

  static void read_tensor_shape(const onnx::TensorProto& t, value_record& value,
                                tensor_shape& shape) {
    value.type = static_cast<dtype>(t.data_type());
    shape.known = true;
    shape.dims.clear();
    for (std::int64_t d : t.dims()) shape.dims.push_back({.size = d});
  }

  const onnx::TensorProto* constant_node_tensor(const onnx::NodeProto& node) {
    auto& synthesized = root_->shared_->synthesized;
    for (const auto& a : node.attribute()) {
      if (a.name() == "value") return &a.t();
      if (a.name() == "sparse_value") return nullptr;
      onnx::TensorProto t;
      if (a.name() == "value_float") {
        t.set_data_type(onnx::TensorProto_DataType_FLOAT);
        t.add_float_data(a.f());
      } else if (a.name() == "value_int") {
        t.set_data_type(onnx::TensorProto_DataType_INT64);
        t.add_int64_data(a.i());
      } else if (a.name() == "value_floats") {
        t.set_data_type(onnx::TensorProto_DataType_FLOAT);
        t.add_dims(a.floats_size());
        t.mutable_float_data()->CopyFrom(a.floats());
      } else if (a.name() == "value_ints") {
        t.set_data_type(onnx::TensorProto_DataType_INT64);
        t.add_dims(a.ints_size());
        t.mutable_int64_data()->CopyFrom(a.ints());
      } else if (a.name() == "value_string") {
        t.set_data_type(onnx::TensorProto_DataType_STRING);
        t.add_string_data(a.s());
      } else if (a.name() == "value_strings") {
        t.set_data_type(onnx::TensorProto_DataType_STRING);
        t.add_dims(a.strings_size());
        t.mutable_string_data()->CopyFrom(a.strings());
      } else {
        continue;
      }
      synthesized.push_back(std::move(t));
      return &synthesized.back();
    }
    return nullptr;
  }

  // Data that does not hold its shape's elements is no model ONNX Runtime loads: refused where the
  // graph is read, not when a rule happens to read the constant. External data is checked when
  // read.
  void check_data(const onnx::TensorProto& t, node_id constant = no_id) const {
    if (is_external(t)) return;
    try {
      const tensor_values values(t);
    } catch (const error& e) {
      if (constant != no_id) throw fail(e.message(), constant, "its value");
      throw fail(e.message(), no_id, e.field());
    }
  }

  // Structure: values, nodes, edges, subgraphs. Types and order come after, in resolve_types().
  void index();

  void build_uses(std::vector<std::pair<value_id, use>>& reads) {
    // Counting sort by value keeps each value's uses in node order.
    std::vector<std::uint32_t> counts(values_.size() + 1, 0);
    for (const auto& [v, u] : reads) ++counts[v + 1];
    for (std::size_t i = 1; i < counts.size(); ++i) counts[i] += counts[i - 1];
    uses_.resize(reads.size());
    std::vector<std::uint32_t> next(counts.begin(), counts.end() - 1);
    // Reads come in node order unless a subgraph reads outer values; only then is a sort needed.
    const auto by_node = [](const auto& a, const auto& b) { return a.second.node < b.second.node; };
    if (!std::is_sorted(reads.begin(), reads.end(), by_node))
      std::stable_sort(reads.begin(), reads.end(), by_node);
    for (const auto& [v, u] : reads) uses_[next[v]++] = u;
    for (value_id v = 0; v < values_.size(); ++v) {
      values_[v].uses = counts[v];
      values_[v].use_count = counts[v + 1] - counts[v];
    }
  }

  void build_op_index() {
    const std::size_t op_count = root_->shared_->ops.size();
    op_index_offsets_.assign(op_count + 1, 0);
    auto& used = root_->shared_->used_ops;
    used.resize(std::max(used.size(), op_count));
    for (const auto& node : nodes_) used[node.op] = true;
    for (const auto& node : nodes_) ++op_index_offsets_[node.op + 1];
    for (std::size_t i = 1; i < op_index_offsets_.size(); ++i)
      op_index_offsets_[i] += op_index_offsets_[i - 1];
    op_index_.resize(nodes_.size());
    std::vector<std::uint32_t> next(op_index_offsets_.begin(), op_index_offsets_.end() - 1);
    for (node_id n = 0; n < nodes_.size(); ++n) op_index_[next[nodes_[n].op]++] = n;
  }

  // Graph order when it is already topological; otherwise the stable topological order (the
  // lowest-numbered ready node first), so results never depend on hash order.
  void sort_topologically() {
    std::vector<std::uint32_t> pending(nodes_.size(), 0);
    for (value_id v = 0; v < values_.size(); ++v)
      if (values_[v].producer != no_id)
        for (const use& u : consumers(v)) ++pending[u.node];
    std::priority_queue<node_id, std::vector<node_id>, std::greater<>> ready;
    for (node_id n = 0; n < nodes_.size(); ++n)
      if (pending[n] == 0) ready.push(n);
    topo_.reserve(nodes_.size());
    while (!ready.empty()) {
      const node_id n = ready.top();
      ready.pop();
      topo_.push_back(n);
      for (value_id v : outputs(n)) {
        if (v == no_id) continue;
        for (const use& u : consumers(v))
          if (--pending[u.node] == 0) ready.push(u.node);
      }
    }
    if (topo_.size() == nodes_.size()) {
      topo_position_.resize(nodes_.size());
      for (std::size_t i = 0; i < topo_.size(); ++i) topo_position_[topo_[i]] = i;
      return;
    }
    for (node_id n = 0; n < nodes_.size(); ++n)
      if (pending[n] != 0) throw fail("the graph has a cycle through this node", n);
  }

  dtype infer_type(node_id n, std::size_t slot) const {
    switch (output_type_rule(op(n), slot)) {
      case type_rule::same_as_input0:
        return typed_input(n, 0);
      case type_rule::same_as_input1:
        return typed_input(n, 1);
      case type_rule::same_as_first_known:
        for (value_id v : inputs(n))
          if (v != no_id && values_[v].type != dtype::undefined) return values_[v].type;
        return dtype::undefined;
      case type_rule::boolean:
        return dtype::boolean;
      case type_rule::int64:
        return dtype::int64;
      case type_rule::cast_to:
        return static_cast<dtype>(attribute_int(n, "to").value_or(0));
      case type_rule::cast_like:
        return typed_input(n, 1);
      case type_rule::value_attribute: {
        const onnx::AttributeProto* value = attribute(n, "value").attribute;
        return value != nullptr && value->has_t() ? static_cast<dtype>(value->t().data_type())
                                                  : dtype::float32;
      }
      case type_rule::unknown:
        return dtype::undefined;
    }
    return dtype::undefined;
  }

  dtype typed_input(node_id n, std::size_t slot) const {
    const value_id v = input(n, slot);
    return v == no_id ? dtype::undefined : values_[v].type;
  }

  // Declared types first (inputs, outputs, value_info, initializers, Constant tensors), then
  // fusekit's propagation in topological order for what is left.
  void resolve_types();

  void load_schemas();

  const onnx::GraphProto* proto_;
  graph* parent_ = nullptr;
  node_id owner_ = no_id;
  graph* root_;
  std::unique_ptr<shared_state> shared_;  // set on the main graph only

  std::vector<node_record> nodes_;
  std::vector<value_record> values_;
  std::vector<tensor_shape> shapes_;
  std::vector<value_id> edges_;  // node outputs, then node inputs, by node
  std::vector<use> uses_;
  struct value_name {
    const graph* g;
    std::string_view operator()(value_id v) const { return g->values_[v].name; }
  };
  name_table<value_name> by_name_{value_name{this}};
  std::vector<node_id> topo_;
  std::vector<std::size_t> topo_position_;
  std::vector<node_id> op_index_;
  std::vector<std::uint32_t> op_index_offsets_;
  std::vector<subgraph_ref> subgraph_refs_;
  std::vector<std::unique_ptr<graph>> children_;
  // Built by facts_of() on first use (graph/facts.hpp).
  mutable std::unique_ptr<facts> facts_;
  friend const facts& facts_of(const graph& g);
};

// Reading a model into the graph: compiled once in fusekit::engine where a program links it
// (fusekit/engine.hpp).
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE void graph::index() {
  const bool overridable_initializers = root_->shared_->ir_version >= 4;
  const std::size_t value_hint =
      proto_->node_size() * 2 + proto_->input_size() + proto_->initializer_size();
  values_.reserve(value_hint);
  by_name_.reserve(value_hint);

  for (const auto& t : proto_->initializer()) {
    if (by_name_.contains(t.name())) throw fail("initializer '" + t.name() + "' is defined twice");
    check_data(t);
    const value_id v = add_value(t.name(), initializer | constant);
    values_[v].tensor = &t;
  }
  for (const auto& s : proto_->sparse_initializer()) {
    const std::string& name = s.values().name();
    if (by_name_.contains(name)) throw fail("initializer '" + name + "' is defined twice");
    add_value(name, initializer | constant);
  }
  for (const auto& input : proto_->input()) {
    const std::optional<value_id> declared = by_name_.find(input.name());
    if (!declared) {
      add_value(input.name(), graph_input);
      continue;
    }
    auto& value = values_[*declared];
    if (value.flags & graph_input)
      throw fail("graph input '" + input.name() + "' is declared twice");
    value.flags |= graph_input;
    if (overridable_initializers) value.flags &= ~constant;
  }

  nodes_.reserve(proto_->node_size());
  for (int i = 0; i < proto_->node_size(); ++i) {
    const auto& node = proto_->node(i);
    const node_id n = node_id(i);
    nodes_.push_back({.proto = &node,
                      .op = root_->shared_->ops.intern(node.domain(), node.op_type()),
                      .inputs = 0,
                      .input_count = std::uint32_t(node.input_size()),
                      .outputs = std::uint32_t(edges_.size()),
                      .output_count = std::uint32_t(node.output_size()),
                      .subgraphs = 0,
                      .subgraph_count = 0});
    const onnx::TensorProto* constant_value =
        node.op_type() == "Constant" && canonical_domain(node.domain()).empty()
            ? constant_node_tensor(node)
            : nullptr;
    if (constant_value != nullptr) check_data(*constant_value, n);
    for (int slot = 0; slot < node.output_size(); ++slot) {
      const std::string& name = node.output(slot);
      if (name.empty()) {
        edges_.push_back(no_id);
        continue;
      }
      if (const std::optional<value_id> defined = by_name_.find(name)) {
        const auto& other = values_[*defined];
        const std::string first = other.producer != no_id ? "output of " + describe(other.producer)
                                  : (other.flags & initializer) ? "an initializer"
                                                                : "a graph input";
        throw fail("value '" + name + "' is already defined as " + first, n,
                   "output " + std::to_string(slot));
      }
      const value_id v = add_value(name, constant_value != nullptr ? constant : 0);
      values_[v].producer = n;
      values_[v].producer_slot = std::uint32_t(slot);
      values_[v].tensor = constant_value;
      edges_.push_back(v);
    }
  }

  std::vector<std::pair<value_id, use>> reads;
  reads.reserve(proto_->node_size() * 2);
  for (node_id n = 0; n < nodes_.size(); ++n) {
    const auto& node = *nodes_[n].proto;
    nodes_[n].inputs = std::uint32_t(edges_.size());
    for (int slot = 0; slot < node.input_size(); ++slot) {
      const std::string& name = node.input(slot);
      if (name.empty()) {
        edges_.push_back(no_id);
        continue;
      }
      const std::optional<value_id> v = resolve(name);
      if (!v)
        throw fail(
            "input '" + name + "' has no producer: no node, initializer or graph input defines it",
            n, "input " + std::to_string(slot));
      edges_.push_back(*v);
      reads.push_back({*v, use{n, std::uint32_t(slot)}});
    }
  }

  for (node_id n = 0; n < nodes_.size(); ++n) {
    nodes_[n].subgraphs = std::uint32_t(subgraph_refs_.size());
    for (const auto& a : nodes_[n].proto->attribute()) {
      auto add = [&](const onnx::GraphProto& body) {
        children_.push_back(std::unique_ptr<graph>(new graph(body, this, n)));
        subgraph_refs_.push_back({a.name(), children_.back().get()});
        for (value_id outer = 0; outer < children_.back()->value_count(); ++outer) {
          if (!children_.back()->is_outer_scope(outer)) continue;
          reads.push_back({*resolve(children_.back()->name(outer)), use{n, use::implicit_slot}});
        }
      };
      if (a.has_g()) add(a.g());
      for (const auto& body : a.graphs()) add(body);
    }
    nodes_[n].subgraph_count = std::uint32_t(subgraph_refs_.size()) - nodes_[n].subgraphs;
  }

  for (const auto& output : proto_->output()) {
    const std::optional<value_id> v = resolve(output.name());
    if (!v) throw fail("graph output '" + output.name() + "' has no producer");
    values_[*v].flags |= graph_output;
  }

  build_uses(reads);
  build_op_index();
}

FUSEKIT_ENGINE_INLINE void graph::load_schemas() {
  auto& shared = *shared_;
  shared.defaults.resize(shared.ops.size());
  shared.schemas.resize(shared.ops.size(), nullptr);
  // The interner knows every op of every schema; a model uses a few of them.
  for (op_id id = 0; id < shared.ops.size() && id < shared.used_ops.size(); ++id) {
    if (!shared.used_ops[id]) continue;
    const std::int64_t version = opset(shared.ops.domain(id));
    if (version <= 0) continue;
    const auto* schema = schemas().GetSchema(std::string(shared.ops.name(id)), int(version),
                                             std::string(shared.ops.domain(id)));
    if (schema == nullptr) continue;
    shared.schemas[id] = schema;
    for (const auto& [name, attr] : schema->attributes())
      if (attr.default_value.type() != onnx::AttributeProto_AttributeType_UNDEFINED)
        shared.defaults[id].emplace_back(name, &attr.default_value);
  }
}

FUSEKIT_ENGINE_INLINE void graph::resolve_types() {
  shapes_.resize(values_.size());
  for (value_id v = 0; v < values_.size(); ++v) {
    if (is_outer_scope(v)) {
      const auto [where, id] = definition(v);
      values_[v].type = where->type(id);
      shapes_[v] = where->shape(id);
    } else if (values_[v].tensor != nullptr) {
      read_tensor_shape(*values_[v].tensor, values_[v], shapes_[v]);
    }
  }
  auto declare = [&](const onnx::ValueInfoProto& info) {
    if (auto v = find_value(info.name())) read_type(info.type(), values_[*v], shapes_[*v]);
  };
  for (const auto& info : proto_->input()) declare(info);
  for (const auto& info : proto_->value_info()) declare(info);
  for (const auto& info : proto_->output()) declare(info);

  sort_topologically();
  for (node_id n : topo_) {
    for (std::size_t slot = 0; slot < nodes_[n].output_count; ++slot) {
      const value_id v = outputs(n)[slot];
      if (v != no_id && values_[v].type == dtype::undefined) values_[v].type = infer_type(n, slot);
    }
  }
  for (auto& child : children_) child->resolve_types();
}
#endif

}  // namespace fusekit

#include "fusekit/graph/facts.hpp"
