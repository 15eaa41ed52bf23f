// The invariants every rewrite keeps: every input has a producer, no cycles, no name defined twice
// (the index checks these as it is built, function_body_error the first in the bodies of
// model-local functions), and the ONNX checker passes — on every model, whatever its opsets, with
// the contributed ops' nodes checked against their contracts — unless the model came in failing it
// already: ONNX Runtime runs many models the checker rejects (an output with no shape, an empty
// graph name, nodes out of order), and fusing them is no reason to refuse. Every message is one
// line.
#pragma once

#include <onnx/checker.h>
#include <onnx/common/version.h>
#include <onnx/defs/schema.h>

#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "fusekit/engine.hpp"
#include "fusekit/graph/contributed_op_schemas.hpp"
#include "fusekit/graph/graph.hpp"
#include "fusekit/graph/schema_inference.hpp"
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

// onnx::checker::check_model's checks, with fusekit's schemas: onnx's own and the contributed
// ops' contracts, so that a node of ONNX Runtime's ops is checked rather than failed (ai.onnx) or
// passed unread (com.microsoft). onnx's check_model takes no registry, so its model-level checks
// are repeated here before the graph and the local functions are checked.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE void check_model(const onnx::ModelProto& proto) {
  onnx::checker::CheckerContext ctx;
  ctx.set_schema_registry(&schemas());
  if (proto.ir_version() == 0) fail_check("The model does not have an ir_version set properly.");
  if (proto.ir_version() > onnx::IR_VERSION)
    fail_check("Your model ir_version ", proto.ir_version(), " is higher than the checker's (",
               onnx::IR_VERSION, ").");
  std::unordered_set<std::string_view> keys;
  for (const auto& entry : proto.metadata_props())
    if (!keys.insert(entry.key()).second)
      fail_check("Your model has duplicate keys in metadata_props.");
  ctx.set_ir_version(static_cast<int>(proto.ir_version()));
  std::unordered_map<std::string, int> opsets;
  for (const auto& o : proto.opset_import()) {
    if (o.version() < std::numeric_limits<int>::min() ||
        o.version() > std::numeric_limits<int>::max())
      fail_check("Opset import version ", o.version(), " is out of supported range");
    opsets[o.domain()] = static_cast<int>(o.version());
  }
  if (proto.ir_version() >= 3 && opsets.empty())
    fail_check("model with IR version >= 3 must specify opset_import for ONNX");
  if (proto.ir_version() < 3) {
    if (!opsets.empty()) fail_check("model with IR version < 3 cannot have opset_import specified");
    opsets[onnx::ONNX_DOMAIN] = 1;
  }
  ctx.set_opset_imports(opsets);
  const onnx::checker::LexicalScopeContext scope;
  onnx::checker::check_graph(proto.graph(), ctx, scope);
  if (ctx.get_ir_version() >= 8) onnx::checker::check_model_local_functions(proto, ctx, scope);
}
#else
void check_model(const onnx::ModelProto& proto);
#endif

// What the ONNX checker says against `m`, on one line; "" when it accepts the model.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::string checker_error(const model& m) {
  try {
    check_model(m.proto);
  } catch (const std::exception& e) {
    std::string why = one_line(e.what());
    // The checker's complaint about a value_info names the field, not the value: say which.
    auto untyped = [](const onnx::ValueInfoProto& v) {
      return !v.has_type() ||
             (v.type().has_tensor_type() &&
              (!v.type().tensor_type().has_elem_type() || !v.type().tensor_type().has_shape()));
    };
    const auto& g = m.proto.graph();
    for (const auto* list : {&g.input(), &g.output()})
      for (const auto& v : *list)
        if (untyped(v))
          return "graph " + std::string(list == &g.input() ? "input" : "output") + " '" + v.name() +
                 "': " + why;
    return why;
  }
  return {};
}
#else
std::string checker_error(const model& m);
#endif

// The note a model past the linked onnx release's ai.onnx opsets gets: the checker read it against
// the newest schemas the release has, and the facts used none of ONNX's shape rules, which that
// opset may have changed.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::optional<std::string> newer_opset_note(const model& m) {
  const int known = schema_registry_opset();
  for (const auto& o : m.proto.opset_import())
    if ((o.domain().empty() || o.domain() == "ai.onnx") && o.version() > known)
      return "ai.onnx opset " + std::to_string(o.version()) + " is newer than onnx " +
             ONNX_VERSION_STRING + " knows (" + std::to_string(known) +
             "): the ONNX checker read " + "it with opset " + std::to_string(known) +
             "'s schemas, and no shape fact came from " + "ONNX's shape rules";
  return std::nullopt;
}
#else
std::optional<std::string> newer_opset_note(const model& m);
#endif

// The index's first invariant for the bodies of model-local functions, which it does not build:
// every node input is an input of the function or an output of an earlier node ("" when so). A
// body that breaks it cannot be inlined, nor run.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::string function_body_error(const model& m) {
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
#else
std::string function_body_error(const model& m);
#endif

// Throws when `m` breaks an invariant, the checker's included.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE void check_invariants(const model& m) {
  const graph g(m);
  if (std::string why = function_body_error(m); !why.empty())
    throw error(why, {.file = m.path.string()});
  if (std::string why = checker_error(m); !why.empty())
    throw error("the ONNX checker rejects the model: " + why, {.file = m.path.string()});
}
#else
void check_invariants(const model& m);
#endif

// After a rewrite of a model whose checker_error() was `input_error`: throws when the rewrite broke
// an invariant; returns a note when the checker rejects the result only as it rejected the input.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::optional<std::string> check_rewrite(const model& m,
                                                               std::string_view input_error) {
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
#else
std::optional<std::string> check_rewrite(const model& m, std::string_view input_error);
#endif

}  // namespace fusekit::rewrite
