// Why bytes do not parse as an ONNX model, and where: protobuf itself only says no. A walk of the
// protobuf wire format that knows which fields of the ONNX messages hold messages, so a fault deep
// inside a node's attribute is found at its byte offset with the path to it
// ("graph.node[3].attribute[0].t").
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fusekit::detail {

// The ONNX messages (onnx.proto) and their fields that a walk must enter or check.
enum class wire_message : std::uint8_t {
  model,
  graph,
  node,
  attribute,
  tensor,
  sparse_tensor,
  value_info,
  type,
  type_tensor,   // TypeProto.Tensor and TypeProto.SparseTensor
  type_element,  // TypeProto.Sequence and TypeProto.Optional: elem_type is a TypeProto
  type_map,
  shape,
  dimension,
  function,
  training_info,
  tensor_annotation,
  leaf,  // only scalars and strings inside (opset ids, string pairs, segments)
};

enum class packed : std::uint8_t { none, varints, fixed32, fixed64 };

struct wire_field {
  std::uint32_t number;
  std::string_view name;
  wire_message holds = wire_message::leaf;  // the message a length-delimited value holds
  bool repeated = true;                     // paths index repeated fields: node[3]
  packed values = packed::none;             // not none: packed scalars, no message
};

inline std::span<const wire_field> wire_fields(wire_message m) {
  using enum wire_message;
  static constexpr wire_field model_fields[] = {{7, "graph", graph, false},
                                                {8, "opset_import", leaf},
                                                {14, "metadata_props", leaf},
                                                {20, "training_info", training_info},
                                                {25, "functions", function}};
  static constexpr wire_field graph_fields[] = {{1, "node", node},
                                                {5, "initializer", tensor},
                                                {15, "sparse_initializer", sparse_tensor},
                                                {11, "input", value_info},
                                                {12, "output", value_info},
                                                {13, "value_info", value_info},
                                                {14, "quantization_annotation", tensor_annotation},
                                                {16, "metadata_props", leaf}};
  static constexpr wire_field node_fields[] = {{5, "attribute", attribute},
                                               {9, "metadata_props", leaf}};
  static constexpr wire_field attribute_fields[] = {{5, "t", tensor, false},
                                                    {6, "g", graph, false},
                                                    {22, "sparse_tensor", sparse_tensor, false},
                                                    {14, "tp", type, false},
                                                    {10, "tensors", tensor},
                                                    {11, "graphs", graph},
                                                    {23, "sparse_tensors", sparse_tensor},
                                                    {15, "type_protos", type},
                                                    {7, "floats", leaf, true, packed::fixed32},
                                                    {8, "ints", leaf, true, packed::varints}};
  static constexpr wire_field tensor_fields[] = {{3, "segment", leaf, false},
                                                 {13, "external_data", leaf},
                                                 {16, "metadata_props", leaf},
                                                 {1, "dims", leaf, true, packed::varints},
                                                 {4, "float_data", leaf, true, packed::fixed32},
                                                 {5, "int32_data", leaf, true, packed::varints},
                                                 {7, "int64_data", leaf, true, packed::varints},
                                                 {10, "double_data", leaf, true, packed::fixed64},
                                                 {11, "uint64_data", leaf, true, packed::varints}};
  static constexpr wire_field sparse_tensor_fields[] = {{1, "values", tensor, false},
                                                        {2, "indices", tensor, false},
                                                        {3, "dims", leaf, true, packed::varints}};
  static constexpr wire_field value_info_fields[] = {{2, "type", type, false},
                                                     {4, "metadata_props", leaf}};
  static constexpr wire_field type_fields[] = {{1, "tensor_type", type_tensor, false},
                                               {4, "sequence_type", type_element, false},
                                               {5, "map_type", type_map, false},
                                               {9, "optional_type", type_element, false},
                                               {8, "sparse_tensor_type", type_tensor, false},
                                               {7, "opaque_type", leaf, false}};
  static constexpr wire_field type_tensor_fields[] = {{2, "shape", shape, false}};
  static constexpr wire_field type_element_fields[] = {{1, "elem_type", type, false}};
  static constexpr wire_field type_map_fields[] = {{2, "value_type", type, false}};
  static constexpr wire_field shape_fields[] = {{1, "dim", dimension}};
  static constexpr wire_field function_fields[] = {{11, "attribute_proto", attribute},
                                                   {7, "node", node},
                                                   {9, "opset_import", leaf},
                                                   {12, "value_info", value_info},
                                                   {14, "metadata_props", leaf}};
  static constexpr wire_field training_info_fields[] = {{1, "initialization", graph, false},
                                                        {2, "algorithm", graph, false},
                                                        {3, "initialization_binding", leaf},
                                                        {4, "update_binding", leaf}};
  static constexpr wire_field tensor_annotation_fields[] = {
      {2, "quant_parameter_tensor_names", leaf}};
  switch (m) {
    case model:
      return model_fields;
    case graph:
      return graph_fields;
    case node:
      return node_fields;
    case attribute:
      return attribute_fields;
    case tensor:
      return tensor_fields;
    case sparse_tensor:
      return sparse_tensor_fields;
    case value_info:
      return value_info_fields;
    case type:
      return type_fields;
    case type_tensor:
      return type_tensor_fields;
    case type_element:
      return type_element_fields;
    case type_map:
      return type_map_fields;
    case shape:
      return shape_fields;
    case function:
      return function_fields;
    case training_info:
      return training_info_fields;
    case tensor_annotation:
      return tensor_annotation_fields;
    case dimension:
    case leaf:
      return {};
  }
  return {};
}

// Joins a message's parts by appending: g++ 12 at -O3 takes `"text" + std::string` for an
// overlapping copy (-Werror=restrict).
template <class... Parts>
std::string cat(const Parts&... parts) {
  std::string out;
  (out.append(std::string_view(parts)), ...);
  return out;
}

// Finds the first fault in `bytes` read as a ModelProto; nullopt when the wire format is sound
// (the fault is then in what the fields mean).
class wire_walker {
 public:
  explicit wire_walker(std::string_view bytes) : bytes_(bytes) {}

  std::optional<std::string> fault() {
    walk(0, bytes_.size(), wire_message::model, "", 0);
    return fault_;
  }

 private:
  // protobuf's default recursion limit: deeper messages fail to parse.
  static constexpr int max_depth = 100;

  bool varint(std::size_t& at, std::size_t end, std::uint64_t& out) const {
    out = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at >= end) return false;
      const auto byte = static_cast<unsigned char>(bytes_[at++]);
      out |= std::uint64_t(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }

  // " (in graph.node[3].attribute[0])"; a path through many bodies keeps its ends.
  static std::string in(const std::string& path) {
    if (path.empty()) return {};
    std::vector<std::string_view> parts;
    for (std::size_t at = 0; at <= path.size();) {
      const std::size_t dot = std::min(path.find('.', at), path.size());
      parts.push_back(std::string_view(path).substr(at, dot - at));
      at = dot + 1;
    }
    if (parts.size() <= 7) return cat(" (in ", path, ")");
    std::string text = " (in ";
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (i >= 3 && i + 3 < parts.size()) {
        if (i == 3) text += "….";
        continue;
      }
      text += parts[i];
      text += i + 1 < parts.size() ? "." : ")";
    }
    return text;
  }

  // Walks the fields in [begin, end); a group ends at its end-group tag, whose end goes to
  // `group_end`.
  bool walk(std::size_t begin, std::size_t end, wire_message kind, const std::string& path,
            int depth, std::optional<std::uint64_t> group = std::nullopt,
            std::size_t* group_end = nullptr) {
    const bool top = path.empty() && !group;
    if (depth > max_depth) {
      fault_ = cat("corrupt: messages nested deeper than protobuf's limit of ",
                   std::to_string(max_depth), " at byte ", std::to_string(begin), in(path));
      return false;
    }
    std::map<std::uint32_t, std::size_t> seen;
    std::size_t at = begin;
    while (at < end) {
      const std::size_t field_start = at;
      std::uint64_t tag = 0;
      // A varint that runs out of bytes is truncated; one longer than 10 bytes is garbage.
      const bool tag_read = varint(at, end, tag);
      if (!tag_read && at == end && end == bytes_.size()) {
        fault_ =
            cat("truncated inside a field tag at byte ", std::to_string(field_start), in(path));
        return false;
      }
      const std::uint64_t field = tag >> 3, wire_type = tag & 7;
      if (!tag_read || field == 0 || field > 0x1fffffff || wire_type > 5 ||
          (wire_type == 4 && field != group)) {
        fault_ = cat(top ? "not a protobuf: byte " : "corrupt: byte ", std::to_string(field_start),
                     " is not a valid field tag", top ? " (is this an ONNX model?)" : in(path));
        return false;
      }
      if (wire_type == 4) {  // the end of the group being walked
        *group_end = at;
        return true;
      }
      const std::string where = cat(" at byte ", std::to_string(field_start), in(path));
      std::uint64_t length = 0;
      switch (wire_type) {
        case 0:
          if (!varint(at, end, length)) {
            fault_ =
                cat(at >= bytes_.size() ? "truncated in field " : "corrupt: a bad varint in field ",
                    std::to_string(field), where);
            return false;
          }
          continue;
        case 1:
          length = 8;
          break;
        case 5:
          length = 4;
          break;
        case 3: {
          std::size_t after = 0;
          if (!walk(at, end, wire_message::leaf, path, depth + 1, field, &after)) return false;
          at = after;
          continue;
        }
        case 2:
          if (!varint(at, end, length)) {
            fault_ = cat("truncated in the length of field ", std::to_string(field), where);
            return false;
          }
          break;
      }
      if (length > end - at) {
        fault_ = cat(end == bytes_.size() ? "truncated: field " : "corrupt: field ",
                     std::to_string(field), where, " needs ", std::to_string(length), " bytes, ",
                     std::to_string(end - at), " remain");
        return false;
      }
      if (wire_type == 2 && !nested(kind, std::uint32_t(field), at, at + length, path, depth,
                                    seen[std::uint32_t(field)]++, field_start))
        return false;
      at += length;
    }
    if (group) {
      fault_ = cat("corrupt: group ", std::to_string(*group), " has no end", in(path));
      return false;
    }
    return true;
  }

  // A length-delimited value of a known field: a message to walk, or packed scalars to check.
  bool nested(wire_message kind, std::uint32_t field, std::size_t begin, std::size_t end,
              const std::string& path, int depth, std::size_t index, std::size_t field_start) {
    for (const wire_field& f : wire_fields(kind)) {
      if (f.number != field) continue;
      const bool message = f.values == packed::none;
      const std::string here =
          cat(path, path.empty() ? "" : ".", f.name, f.repeated && message ? "[" : "",
              f.repeated && message ? std::to_string(index) : "", f.repeated && message ? "]" : "");
      if (message) return walk(begin, end, f.holds, here, depth + 1);
      const std::size_t width = f.values == packed::fixed32 ? 4 : 8;
      if (f.values != packed::varints) {
        if ((end - begin) % width == 0) return true;
        fault_ =
            cat("corrupt: field ", std::to_string(field), " at byte ", std::to_string(field_start),
                " (in ", here, ") holds ", std::to_string(end - begin),
                " bytes, not a whole number of ", std::to_string(width), "-byte values");
        return false;
      }
      for (std::size_t at = begin; at < end;) {
        const std::size_t value_start = at;
        std::uint64_t ignored = 0;
        if (!varint(at, end, ignored)) {
          fault_ = cat("corrupt: a bad varint at byte ", std::to_string(value_start), " (in ", here,
                       ")");
          return false;
        }
      }
      return true;
    }
    return true;  // a string, bytes, or a field this walk does not know
  }

  std::string_view bytes_;
  std::optional<std::string> fault_;
};

// What to tell a user whose bytes protobuf refused.
inline std::string diagnose_wire_format(std::string_view bytes) {
  if (auto fault = wire_walker(bytes).fault()) return *fault;
  return "not an ONNX model: the protobuf fields do not match ModelProto";
}

}  // namespace fusekit::detail
