// The invariants every rewrite keeps: every input has a producer, no cycles, no name defined twice
// (the index checks these as it is built, function_body_error the first in the bodies of
// model-local functions), and the ONNX checker passes where libonnx knows the
// model's opsets — unless the model came in failing it already: ONNX Runtime runs many models the
// checker rejects (an output with no shape, an empty graph name, nodes out of order), and fusing
// them is no reason to refuse. Every message is one line.
#pragma once

#include <onnx/checker.h>
#include <onnx/defs/schema.h>

#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include "fusekit/graph/graph.hpp"
#include "fusekit/io/error.hpp"
#include "fusekit/io/model.hpp"

namespace fusekit::rewrite {

// Multi-line texts (the ONNX checker's) joined with "; ".
inline std::string one_line(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\n') {
      if (!out.empty() && out.back() != ' ') out += "; ";
    } else {
      out += c;
    }
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == ';')) out.pop_back();
  return out;
}

// What the ONNX checker says against `m`, on one line; "" when it accepts the model or does not
// know the model's ai.onnx opset.
inline std::string checker_error(const model& m) {
  const auto& versions = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  for (const auto& o : m.proto.opset_import())
    if ((o.domain().empty() || o.domain() == "ai.onnx") && o.version() > versions.at("").second)
      return {};
  try {
    onnx::checker::check_model(m.proto);
  } catch (const std::exception& e) {
    return one_line(e.what());
  }
  return {};
}

// The index's first invariant for the bodies of model-local functions, which it does not build:
// every node input is an input of the function or an output of an earlier node ("" when so). A
// body that breaks it cannot be inlined, nor run.
inline std::string function_body_error(const model& m) {
  for (const auto& f : m.proto.functions()) {
    std::unordered_set<std::string_view> defined(f.input().begin(), f.input().end());
    for (const auto& n : f.node()) {
      for (const auto& in : n.input())
        if (!in.empty() && !defined.contains(in))
          return "function " + f.domain() + "." + f.name() + ": node " + n.op_type() + " '" +
                 n.name() + "': input '" + in +
                 "' is neither an input of the function nor an output of an earlier node";
      defined.insert(n.output().begin(), n.output().end());
    }
  }
  return {};
}

// Throws when `m` breaks an invariant, the checker's included.
inline void check_invariants(const model& m) {
  const graph g(m);
  if (std::string why = function_body_error(m); !why.empty())
    throw error(why, {.file = m.path.string()});
  if (std::string why = checker_error(m); !why.empty())
    throw error("the ONNX checker rejects the model: " + why, {.file = m.path.string()});
}

// After a rewrite of a model whose checker_error() was `input_error`: throws when the rewrite broke
// an invariant; returns a note when the checker rejects the result only as it rejected the input.
inline std::optional<std::string> check_rewrite(const model& m, std::string_view input_error) {
  const graph g(m);
  const std::string now = checker_error(m);
  if (now.empty()) return std::nullopt;
  if (now == input_error)
    return "the ONNX checker rejects the input already, and the output for the same reason: " + now;
  std::string why = "the ONNX checker rejects the fused model: " + now;
  if (!input_error.empty())
    why += " (the input's own complaint was: " + std::string(input_error) + ")";
  throw error(std::move(why), {.file = m.path.string()});
}

}  // namespace fusekit::rewrite
