// Structural edits of a model: what an exporter's bug or a hand-edited file writes and a byte-level
// mutation almost never does, since the protobuf around the change has to stay intact. A node's
// input dropped (Where without its third input), a constant's data emptied (a Constant with empty
// value_floats, reshaped and transposed), an attribute's list resized (a perm one axis short, an
// axis named twice) or one of its numbers pushed to an extreme. The model still parses; what the
// edit breaks is a node's contract, which the loader, the facts and the rules must meet with an
// error or "unknown", never a crash.
//
// `choose(n)` picks a number in [0, n): the fuzzer's own bytes or a generator seeded by libFuzzer.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <vector>

namespace fusekit::fuzz {

namespace detail {

// The graph and every body it holds (If branches, Loop and Scan bodies), at any depth.
inline void collect_graphs(onnx::GraphProto& g, std::vector<onnx::GraphProto*>& out) {
  out.push_back(&g);
  for (onnx::NodeProto& node : *g.mutable_node())
    for (onnx::AttributeProto& a : *node.mutable_attribute()) {
      if (a.has_g()) collect_graphs(*a.mutable_g(), out);
      for (onnx::GraphProto& body : *a.mutable_graphs()) collect_graphs(body, out);
    }
}

// Numbers a size, an axis or a count should never be, and the small ones that are nearly right.
inline constexpr std::int64_t extremes[] = {-1,
                                            -2,
                                            0,
                                            1,
                                            3,
                                            std::int64_t(1) << 40,
                                            std::numeric_limits<std::int64_t>::max(),
                                            std::numeric_limits<std::int64_t>::min()};

template <class Choose>
std::int64_t extreme(Choose& choose) {
  return extremes[choose(std::size(extremes))];
}

// No data, and either the same dims (fewer elements than they say) or none at all ([0]).
template <class Choose>
void empty_tensor(onnx::TensorProto& t, Choose& choose) {
  t.clear_raw_data();
  t.clear_float_data();
  t.clear_double_data();
  t.clear_int32_data();
  t.clear_int64_data();
  t.clear_uint64_data();
  t.clear_string_data();
  if (choose(2) == 0) {
    t.clear_dims();
    t.add_dims(0);
  }
}

template <class Choose>
bool drop_input(onnx::GraphProto& g, Choose& choose) {
  std::vector<onnx::NodeProto*> nodes;
  for (onnx::NodeProto& node : *g.mutable_node())
    if (node.input_size() > 0) nodes.push_back(&node);
  if (nodes.empty()) return false;
  onnx::NodeProto& node = *nodes[choose(nodes.size())];
  auto& inputs = *node.mutable_input();
  inputs.erase(inputs.begin() + int(choose(std::size_t(inputs.size()))));
  return true;
}

// An initializer's or a Constant's tensor emptied, or the Constant rewritten as an empty list.
template <class Choose>
bool empty_constant(onnx::GraphProto& g, Choose& choose) {
  std::vector<onnx::TensorProto*> tensors;
  std::vector<onnx::NodeProto*> constants;
  for (onnx::TensorProto& t : *g.mutable_initializer()) tensors.push_back(&t);
  for (onnx::NodeProto& node : *g.mutable_node()) {
    if (node.op_type() != "Constant") continue;
    constants.push_back(&node);
    for (onnx::AttributeProto& a : *node.mutable_attribute())
      if (a.has_t()) tensors.push_back(a.mutable_t());
  }
  if (tensors.empty() && constants.empty()) return false;
  const std::size_t k = choose(tensors.size() + constants.size());
  if (k < tensors.size()) {
    empty_tensor(*tensors[k], choose);
    return true;
  }
  onnx::NodeProto& node = *constants[k - tensors.size()];
  node.clear_attribute();
  onnx::AttributeProto& a = *node.add_attribute();
  const bool floats = choose(2) == 0;
  a.set_name(floats ? "value_floats" : "value_ints");
  a.set_type(floats ? onnx::AttributeProto::FLOATS : onnx::AttributeProto::INTS);
  return true;
}

// A list attribute one shorter, one longer (a repeat or an extreme), or empty; a single int given
// as a list, or a list given as its first int; a number pushed to an extreme.
template <class Choose>
bool resize_attribute(onnx::GraphProto& g, Choose& choose) {
  std::vector<onnx::AttributeProto*> attributes;
  for (onnx::NodeProto& node : *g.mutable_node())
    for (onnx::AttributeProto& a : *node.mutable_attribute())
      if (a.type() == onnx::AttributeProto::INT || a.type() == onnx::AttributeProto::INTS ||
          a.type() == onnx::AttributeProto::FLOATS)
        attributes.push_back(&a);
  if (attributes.empty()) return false;
  onnx::AttributeProto& a = *attributes[choose(attributes.size())];
  if (a.type() == onnx::AttributeProto::INT) {
    if (choose(2) == 0) {
      a.set_i(extreme(choose));
    } else {
      a.set_type(onnx::AttributeProto::INTS);
      a.add_ints(a.i());
      a.clear_i();
    }
    return true;
  }
  if (a.type() == onnx::AttributeProto::FLOATS) {
    if (a.floats_size() > 0 && choose(2) == 0)
      a.mutable_floats()->RemoveLast();
    else
      a.clear_floats();
    return true;
  }
  auto& ints = *a.mutable_ints();
  switch (choose(5)) {
    case 0:
      if (!ints.empty()) ints.RemoveLast();
      break;
    case 1:
      if (!ints.empty()) ints.Add(ints.Get(int(choose(std::size_t(ints.size())))));
      break;
    case 2:
      ints.Add(extreme(choose));
      break;
    case 3:
      if (!ints.empty()) ints.Set(int(choose(std::size_t(ints.size()))), extreme(choose));
      break;
    default:
      if (!ints.empty() && choose(2) == 0) {
        a.set_type(onnx::AttributeProto::INT);
        a.set_i(ints.Get(0));
      }
      ints.Clear();
      break;
  }
  return true;
}

}  // namespace detail

// One structural edit somewhere in the model's graphs; false when the graph chosen had nothing the
// edit chosen applies to.
template <class Choose>
bool mutate_structure(onnx::ModelProto& m, Choose&& choose) {
  std::vector<onnx::GraphProto*> graphs;
  detail::collect_graphs(*m.mutable_graph(), graphs);
  onnx::GraphProto& g = *graphs[choose(graphs.size())];
  switch (choose(3)) {
    case 0:
      return detail::drop_input(g, choose);
    case 1:
      return detail::empty_constant(g, choose);
    default:
      return detail::resize_attribute(g, choose);
  }
}

}  // namespace fusekit::fuzz
