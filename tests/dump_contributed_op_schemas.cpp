// Writes fusekit's contributed op schemas to stdout as JSON, each field named and spelt as ONNX
// Runtime's Python schema API gives it, for tests/python/test_contributed_op_schemas.py to compare
// with ONNX Runtime's own registrations.
#include <onnx/defs/schema.h>

#include <algorithm>
#include <exception>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "fusekit/graph/contributed_op_schemas.hpp"

namespace {

using nlohmann::json;
using onnx::OpSchema;

std::string option_name(OpSchema::FormalParameterOption option) {
  switch (option) {
    case OpSchema::Single:
      return "Single";
    case OpSchema::Optional:
      return "Optional";
    case OpSchema::Variadic:
      return "Variadic";
  }
  throw std::logic_error("unknown formal parameter option");
}

std::string support_name(OpSchema::SupportType support) {
  switch (support) {
    case OpSchema::SupportType::COMMON:
      return "COMMON";
    case OpSchema::SupportType::EXPERIMENTAL:
      return "EXPERIMENTAL";
  }
  throw std::logic_error("unknown support level");
}

json formal_parameters(const std::vector<OpSchema::FormalParameter>& parameters) {
  json all = json::array();
  for (const auto& p : parameters) {
    std::vector<std::string> types;
    for (const onnx::DataType type : p.GetTypes()) types.push_back(*type);
    std::sort(types.begin(), types.end());
    all.push_back({{"name", p.GetName()},
                   {"option", option_name(p.GetOption())},
                   {"isHomogeneous", p.GetIsHomogeneous()},
                   {"typeStr", p.GetTypeStr()},
                   {"types", types}});
  }
  return all;
}

// The default as the Python value onnx.helper.get_attribute_value gives; null where there is none.
json default_value(const OpSchema::Attribute& attribute) {
  const onnx::AttributeProto& value = attribute.default_value;
  switch (value.type()) {
    case onnx::AttributeProto::UNDEFINED:
      return nullptr;
    case onnx::AttributeProto::INT:
      return value.i();
    case onnx::AttributeProto::FLOAT:
      return static_cast<double>(value.f());
    default:
      throw std::runtime_error("no JSON form for the default of attribute " + attribute.name +
                               " of type " + onnx::AttributeProto_AttributeType_Name(value.type()));
  }
}

json schema_json(const OpSchema& schema) {
  json attributes = json::array();
  for (const auto& [name, attribute] : schema.attributes()) {
    attributes.push_back({{"name", name},
                          {"type", onnx::AttributeProto_AttributeType_Name(attribute.type)},
                          {"required", attribute.required},
                          {"default", default_value(attribute)}});
  }
  // onnx keeps them unordered; by name, the output is the same from one run to the next.
  std::sort(attributes.begin(), attributes.end(),
            [](const json& a, const json& b) { return a["name"] < b["name"]; });
  json constraints = json::array();
  for (const auto& constraint : schema.typeConstraintParams()) {
    constraints.push_back({{"type_param_str", constraint.type_param_str},
                           {"allowed_type_strs", constraint.allowed_type_strs}});
  }
  return {{"name", schema.Name()},
          {"domain", schema.domain()},
          {"since_version", schema.since_version()},
          {"deprecated", schema.deprecated()},
          {"support_level", support_name(schema.support_level())},
          {"min_input", schema.min_input()},
          {"max_input", schema.max_input()},
          {"min_output", schema.min_output()},
          {"max_output", schema.max_output()},
          {"inputs", formal_parameters(schema.inputs())},
          {"outputs", formal_parameters(schema.outputs())},
          {"attributes", attributes},
          {"type_constraints", constraints}};
}

}  // namespace

int main() try {
  json all = json::array();
  for (const OpSchema& schema : fusekit::contributed_op_schemas())
    all.push_back(schema_json(schema));
  std::cout << all.dump(2) << "\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << "dump_contributed_op_schemas: " << e.what() << "\n";
  return 1;
}
