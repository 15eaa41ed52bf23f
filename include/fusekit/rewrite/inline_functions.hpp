// Calls of model-local functions (ModelProto.functions, what torch's export_modules_as_functions
// writes) replaced by their bodies, so that rules and facts see through them.
//
// A call is inlined in place: its body's nodes take its position (the body is in topological
// order, so the graph stays so), the function's inputs and outputs become the call's, and every
// other name of the body gets a fresh name of the model (`<call>/<name>_k`). Attributes the body
// refers to (ref_attr_name) take the call's value. A call is left as it is where inlining could
// change what it computes: the function imports a domain at another version than the model, a
// body node holds a subgraph, or the body refers to an attribute the call does not give (its
// default, FunctionProto.attribute_proto, is newer than the protos fusekit builds against).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fusekit/io/model.hpp"
#include "fusekit/rewrite/names.hpp"

namespace fusekit::rewrite {

// One call inlined: the call node's name (or "op_type #i" when it has none) and the function's.
struct inlined_call {
  std::string call;
  std::string function;
  std::vector<std::string> nodes;  // the names its body's nodes got
};

namespace detail {

using function_key = std::pair<std::string, std::string>;  // domain, name

inline std::map<function_key, const onnx::FunctionProto*> local_functions(
    const onnx::ModelProto& m) {
  std::map<function_key, const onnx::FunctionProto*> out;
  for (const auto& f : m.functions()) out.emplace(function_key{f.domain(), f.name()}, &f);
  return out;
}

inline bool inlinable(const onnx::ModelProto& m, const onnx::FunctionProto& f,
                      const onnx::NodeProto& call) {
  for (const auto& mine : f.opset_import())
    for (const auto& theirs : m.opset_import())
      if (mine.domain() == theirs.domain() && mine.version() != theirs.version()) return false;
  for (const auto& node : f.node())
    for (const auto& a : node.attribute()) {
      if (a.has_g() || a.graphs_size() > 0) return false;
      if (a.ref_attr_name().empty()) continue;
      bool given = false;
      for (const auto& c : call.attribute()) given = given || c.name() == a.ref_attr_name();
      if (!given) return false;
    }
  return true;
}

inline void inline_call(const onnx::NodeProto& call, const onnx::FunctionProto& f,
                        const std::string& label, name_pool& names,
                        google::protobuf::RepeatedPtrField<onnx::NodeProto>& into,
                        inlined_call& record) {
  std::unordered_map<std::string, std::string> renamed;
  for (int i = 0; i < f.input_size(); ++i)
    renamed[f.input(i)] = i < call.input_size() ? call.input(i) : std::string();
  for (int i = 0; i < f.output_size(); ++i)
    if (i < call.output_size() && !call.output(i).empty()) renamed[f.output(i)] = call.output(i);
  auto name_of = [&](const std::string& inner) -> std::string {
    if (inner.empty()) return inner;
    auto [it, added] = renamed.try_emplace(inner);
    if (added) it->second = names.fresh(label + "/" + inner);
    return it->second;
  };
  std::unordered_map<std::string, const onnx::AttributeProto*> given;
  for (const auto& a : call.attribute()) given[a.name()] = &a;
  for (const auto& body : f.node()) {
    onnx::NodeProto& node = *into.Add();
    node = body;
    node.clear_attribute();
    for (const auto& a : body.attribute()) {
      if (a.ref_attr_name().empty()) {
        *node.add_attribute() = a;
        continue;
      }
      onnx::AttributeProto& copy = *node.add_attribute();
      copy = *given.at(a.ref_attr_name());  // inlinable() saw the call give it
      copy.set_name(a.name());
    }
    for (auto& v : *node.mutable_input()) v = name_of(v);
    for (auto& v : *node.mutable_output()) v = name_of(v);
    node.set_name(names.fresh(label + "/" + (body.name().empty() ? body.op_type() : body.name())));
    record.nodes.push_back(node.name());
  }
}

}  // namespace detail

// Inlines, in every graph of m, the calls of local functions for which `wanted(call)` is true,
// through nested calls up to a depth of 16. Returns the calls inlined, in order.
inline std::vector<inlined_call> inline_functions(
    onnx::ModelProto& m, name_pool& names,
    const std::function<bool(const onnx::NodeProto&)>& wanted) {
  std::vector<inlined_call> done;
  std::vector<const onnx::FunctionProto*> used;
  const auto functions = detail::local_functions(m);
  if (functions.empty()) return done;
  for (int depth = 0; depth < 16; ++depth) {
    bool changed = false;
    fusekit::detail::for_each_graph(*m.mutable_graph(), [&](onnx::GraphProto& g) {
      bool calls = false;
      for (const auto& node : g.node()) {
        const auto it = functions.find({node.domain(), node.op_type()});
        calls = calls ||
                (it != functions.end() && detail::inlinable(m, *it->second, node) && wanted(node));
      }
      if (!calls) return;
      google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
      for (int i = 0; i < g.node_size(); ++i) {
        const onnx::NodeProto& node = g.node(i);
        const auto it = functions.find({node.domain(), node.op_type()});
        if (it == functions.end() || !detail::inlinable(m, *it->second, node) || !wanted(node)) {
          *nodes.Add() = node;
          continue;
        }
        const std::string label =
            node.name().empty() ? node.op_type() + "_" + std::to_string(i) : node.name();
        inlined_call& record = done.emplace_back(inlined_call{
            node.name().empty() ? node.op_type() + " #" + std::to_string(i) : node.name(),
            node.domain() + "." + node.op_type(),
            {}});
        detail::inline_call(node, *it->second, label, names, nodes, record);
        used.push_back(it->second);
        changed = true;
      }
      g.mutable_node()->Swap(&nodes);
    });
    if (!changed) break;
  }
  // The model now uses the domains the inlined bodies import.
  for (const onnx::FunctionProto* f : used)
    for (const auto& mine : f->opset_import()) {
      bool imported = false;
      for (const auto& theirs : m.opset_import())
        imported = imported || theirs.domain() == mine.domain();
      if (!imported) *m.add_opset_import() = mine;
    }
  return done;
}

}  // namespace fusekit::rewrite
