// What the driver proves about an emitted edit before it commits it: every output of the root that
// is still needed has a replacement; replaced values come from matched nodes and nothing before the
// root reads them; every emitted op that a known domain defines exists at the model's opset of
// that domain (an Expand written into an opset-7 model would make it invalid); and every emitted
// node reads only values that exist where it goes — graph inputs, initializers, outer-scope
// values, outputs of surviving nodes before the root, or values emitted earlier in the same edit.
// A refusal is one line, and the model stays as it was.
#pragma once

#include <algorithm>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fusekit/engine.hpp"
#include "fusekit/graph/contributed_op_schemas.hpp"
#include "fusekit/graph/graph.hpp"
#include "fusekit/rewrite/emitter.hpp"

namespace fusekit::rewrite::detail {

// One edit as the graph sees it: the matched nodes, the existing values its nodes read, and the
// matched values it replaces.
struct footprint {
  node_id root;
  std::span<const node_id> nodes;
  std::span<const value_id> reads;
  std::span<const value_id> replaced;
  // Shapes and Sizes outside the match that read a matched value's dims, which the edit
  // replaces where they are (graph/shape_source.hpp): they go, their outputs computed anew.
  std::span<const node_id> rewired = {};
};

// Whether `out` is still read once the nodes of `dead` are gone: a graph output, a value an
// emitted node reads (`read`), or one a node that stays reads.
inline bool read_after(const graph& g, value_id out, const std::unordered_set<value_id>& read,
                       const std::unordered_set<node_id>& dead) {
  if (g.is_graph_output(out) || read.contains(out)) return true;
  const auto uses = g.consumers(out);
  return std::any_of(uses.begin(), uses.end(),
                     [&](const use& u) { return !dead.contains(u.node); });
}

// Which matched nodes die: the roots, and every other matched node none of whose outputs is still
// needed — read by a node that stays or by an emitted node, or a graph output — unless the edit
// replaces that output. Linear in the edits' size, not the graph's.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::unordered_set<node_id> dead_nodes(const graph& g,
                                                             std::span<const footprint> edits) {
  std::unordered_set<node_id> roots, dead;
  std::unordered_set<value_id> read, replaced;
  for (const footprint& e : edits) {
    roots.insert(e.root);
    dead.insert(e.nodes.begin(), e.nodes.end());
    read.insert(e.reads.begin(), e.reads.end());
    replaced.insert(e.replaced.begin(), e.replaced.end());
    for (node_id n : e.rewired) {
      dead.insert(n);
      for (value_id out : g.outputs(n)) replaced.insert(out);
    }
  }
  auto needed = [&](value_id out) {
    return out != no_id && !replaced.contains(out) && read_after(g, out, read, dead);
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = dead.begin(); it != dead.end();) {
      const auto outs = g.outputs(*it);
      if (!roots.contains(*it) && std::any_of(outs.begin(), outs.end(), needed)) {
        it = dead.erase(it);
        changed = true;
      } else {
        ++it;
      }
    }
  }
  return dead;
}
#else
std::unordered_set<node_id> dead_nodes(const graph& g, std::span<const footprint> edits);
#endif

// The nodes only dying nodes read, which die with them, and so on upstream: a Constant, or the
// computation of a mask a fused op now applies itself. A node whose output is a graph output, or
// an emitted node reads, stays; so does anything the edits did not leave unread (a node no one
// read before stays as the model has it). Each dying node's reads are counted off once: linear
// in what dies.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE void add_orphans(const graph& g, std::span<const footprint> edits,
                                       std::unordered_set<node_id>& dead) {
  std::unordered_set<value_id> read;
  for (const footprint& e : edits) read.insert(e.reads.begin(), e.reads.end());
  std::unordered_map<node_id, std::size_t> readers_left;  // uses of a producer's outputs
  std::vector<node_id> work(dead.begin(), dead.end());
  while (!work.empty()) {
    const node_id n = work.back();
    work.pop_back();
    for (value_id in : g.inputs(n)) {
      const node_id p = in == no_id ? no_id : g.producer(in);
      if (p == no_id || dead.contains(p)) continue;
      auto [left, first] = readers_left.try_emplace(p, 0);
      if (first) {
        for (value_id out : g.outputs(p)) {
          if (out == no_id) continue;
          // Never counted down to 0: a graph output or what an emitted node reads.
          if (g.is_graph_output(out) || read.contains(out)) ++left->second;
          left->second += g.consumers(out).size();
        }
      }
      if (--left->second == 0) {
        dead.insert(p);
        work.push_back(p);
      }
    }
  }
}
#else
void add_orphans(const graph& g, std::span<const footprint> edits,
                 std::unordered_set<node_id>& dead);
#endif

// Checks one emitted edit; fills its footprint's reads and replaced values. Returns why the edit
// cannot be committed, or "" when it can.
class edit_check {
 public:
  // `rewired`: the Shapes and Sizes outside the match the edit rewires (they go with it);
  // `kept`: the values they read instead, which stay.
  edit_check(const graph& g, node_id root, std::span<const node_id> matched, const emitter& e,
             std::span<const node_id> rewired = {}, std::span<const value_id> kept = {})
      : g_(g), root_(root), matched_(matched), edit_(e), rewired_(rewired), kept_(kept) {}

  std::string run();

  const std::vector<value_id>& reads() const { return reads_; }
  const std::vector<value_id>& replaced() const { return replaced_; }

 private:
  std::string refuse_read(std::string_view name, const std::string& because) const {
    return "emit reads '" + std::string(name) + "', " + because + ", nothing changed";
  }

  // An op its domain's schemas know, but only from a later opset than the model imports. A domain
  // the model does not import yet gets version 1 from the driver. Ops no schema knows (a runtime's
  // own) are the runtime's to judge.
  std::string defined_at_opset(const onnx::NodeProto& node) const;

  std::string available(const std::string& name,
                        const std::unordered_set<std::string_view>& defined);

  // A replaced interior value is computed anew where the root was: its producer must go, and
  // every reader that stays must come after the root.
  std::string replaced_interior_values() const;

  const graph& g_;
  node_id root_;
  std::span<const node_id> matched_;
  const emitter& edit_;
  std::span<const node_id> rewired_;
  std::span<const value_id> kept_;
  std::vector<value_id> reads_, replaced_;
};

#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::string edit_check::available(
    const std::string& name, const std::unordered_set<std::string_view>& defined) {
  if (name.empty() || defined.contains(name)) return {};
  const std::optional<value_id> v = g_.find_value(name);
  if (!v) return refuse_read(name, "which nothing defines in this graph");
  if (std::find(replaced_.begin(), replaced_.end(), *v) != replaced_.end())
    return refuse_read(name, "which the same edit replaces");
  const node_id p = g_.producer(*v);
  if (p == root_) return refuse_read(name, "an output of the matched root " + g_.describe(root_));
  if (p != no_id && g_.topological_position(p) > g_.topological_position(root_))
    return refuse_read(name, "which " + g_.describe(p) + " computes after the insertion point " +
                                 g_.describe(root_));
  reads_.push_back(*v);
  return {};
}

FUSEKIT_ENGINE_INLINE std::string edit_check::defined_at_opset(const onnx::NodeProto& node) const {
  const std::string domain(canonical_domain(node.domain()));
  const std::int64_t imported = g_.opset(domain);
  const int version = imported > 0 ? int(imported) : 1;
  const auto& known = schemas();
  if (known.GetSchema(node.op_type(), version, domain) != nullptr ||
      known.GetSchema(node.op_type(), std::numeric_limits<int>::max(), domain) == nullptr)
    return {};
  int since = version + 1;
  while (known.GetSchema(node.op_type(), since, domain) == nullptr) ++since;
  return "emit writes " + node.op_type() + ", which " + (domain.empty() ? "ai.onnx" : domain) +
         " opset " + std::to_string(version) + " does not have (it came in opset " +
         std::to_string(since) + "), nothing changed";
}

FUSEKIT_ENGINE_INLINE std::string edit_check::replaced_interior_values() const {
  if (std::all_of(replaced_.begin(), replaced_.end(),
                  [&](value_id v) { return g_.producer(v) == root_; }))
    return {};
  std::vector<value_id> reads = reads_;
  reads.insert(reads.end(), kept_.begin(), kept_.end());
  const footprint self{root_, matched_, reads, replaced_, rewired_};
  // What dies with the match, and what only it read (a Shape of a replaced value that sized a
  // matched view): the driver removes both.
  std::unordered_set<node_id> dead = dead_nodes(g_, {&self, 1});
  add_orphans(g_, {&self, 1}, dead);
  for (value_id old : replaced_) {
    const node_id p = g_.producer(old);
    if (p == root_) continue;
    const std::string name(g_.name(old));
    if (!dead.contains(p))
      return "emit replaces '" + name + "', but " + g_.describe(p) +
             " stays for its other outputs, nothing changed";
    for (const use& u : g_.consumers(old))
      if (!dead.contains(u.node) &&
          g_.topological_position(u.node) < g_.topological_position(root_))
        return "emit replaces '" + name + "', which " + g_.describe(u.node) +
               " reads before the insertion point " + g_.describe(root_) + ", nothing changed";
  }
  return {};
}

FUSEKIT_ENGINE_INLINE std::string edit_check::run() {
  for (value_id out : g_.outputs(root_)) {
    if (out == no_id || (g_.consumers(out).empty() && !g_.is_graph_output(out))) continue;
    const auto& r = edit_.replacements();
    if (std::none_of(r.begin(), r.end(), [&](const auto& p) { return p.first == out; }))
      return "emit gave no replacement for output '" + std::string(g_.name(out)) +
             "', nothing changed";
  }
  for (const auto& [old, replacement] : edit_.replacements()) {
    if (std::find(matched_.begin(), matched_.end(), g_.producer(old)) == matched_.end())
      return "emit replaces '" + std::string(g_.name(old)) +
             "', which no matched node computes, nothing changed";
    replaced_.push_back(old);
  }
  for (const auto& node : edit_.nodes())
    if (std::string why = defined_at_opset(node); !why.empty()) return why;
  std::unordered_set<std::string_view> defined;
  for (const auto& t : edit_.initializers()) defined.insert(t.name());
  for (const auto& node : edit_.nodes()) {
    for (const std::string& in : node.input())
      if (std::string why = available(in, defined); !why.empty()) return why;
    for (const std::string& out : node.output()) defined.insert(out);
  }
  for (const auto& [old, replacement] : edit_.replacements())
    if (std::string why = available(replacement, defined); !why.empty()) return why;
  return replaced_interior_values();
}
#endif

}  // namespace fusekit::rewrite::detail
