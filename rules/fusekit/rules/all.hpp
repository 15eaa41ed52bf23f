// The bundled rule library, in one call: what `fusekit fuse` runs.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dit.hpp"
#include "fusekit/rewrite/driver.hpp"

namespace fusekit::rules {

// The attention ops a model holds before any rule runs: the dynamo exporter writes ai.onnx
// Attention itself at opset 23. Reported, so a user reads "already fused", not silence.
inline void find_fused_attention(const graph& g, std::vector<std::string>& out) {
  static constexpr std::pair<std::string_view, std::string_view> fused_ops[] = {
      {"", "Attention"},
      {"com.microsoft", "MultiHeadAttention"},
      {"com.microsoft", "GroupQueryAttention"},
      {"com.microsoft", "Attention"}};
  for (node_id n : g.topological_order()) {
    for (const auto& [domain, op] : fused_ops)
      if (g.domain(n) == domain && g.op_type(n) == op) out.push_back(g.describe(n));
    for (const subgraph_ref& body : g.subgraphs(n)) find_fused_attention(*body.body, out);
  }
}

// A rule set named once: what fuse() runs and what the command line accepts come from one list.
template <rewrite::rule... Rules>
struct rule_list {
  static constexpr std::array<std::string_view, sizeof...(Rules)> names = {Rules::name...};

  static rewrite::report fuse(model& m, const rewrite::options& opts) {
    return rewrite::fuse<Rules...>(m, opts, [](const graph& g, rewrite::report& out) {
      find_fused_attention(g, out.already_fused);
    });
  }
};

// The bundled library, in the order the report lists it.
using bundled = rule_list<dit_attention_merged, dit_attention>;

inline rewrite::report fuse_all(model& m, const rewrite::options& opts = {}) {
  return bundled::fuse(m, opts);
}

inline constexpr auto names = bundled::names;

}  // namespace fusekit::rules
