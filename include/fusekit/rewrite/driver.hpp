// Running rules over a model: fuse<rules…>(model, options).
//
// Each pass indexes the model, tries every rule at its anchors (from the op index) in every graph
// and subgraph, keeps the matches whose guard agrees and whose emit completes, resolves overlaps
// (higher priority first, then graph order), and commits the survivors: replacement nodes go
// where the matched root was, so topological order holds; the matched nodes that nothing else
// reads any more are removed, the others stay; outputs keep their names. Passes repeat until no
// rule matches, so a second run changes nothing.
#pragma once

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "fusekit/graph/graph.hpp"
#include "fusekit/io/model.hpp"
#include "fusekit/pattern/match.hpp"
#include "fusekit/rewrite/emitter.hpp"
#include "fusekit/rewrite/report.hpp"
#include "fusekit/rewrite/rule.hpp"

namespace fusekit::rewrite {

// Passes after which a rule set that keeps matching its own output is stopped.
inline constexpr int max_passes = 8;

namespace detail {

struct candidate {
  std::string_view rule;
  int priority;
  const graph* where;
  node_id root;
  std::size_t position;  // of the root in topological order
  std::vector<node_id> nodes;
  std::unique_ptr<emitter> edit;
};

template <class R>
constexpr std::size_t near_miss_depth() {
  if constexpr (requires { R::near_miss_depth; })
    return R::near_miss_depth;
  else
    return 2;
}

inline std::vector<std::string> describe_all(const graph& g, std::span<const node_id> nodes) {
  std::vector<std::string> out;
  for (node_id n : nodes) out.push_back(g.describe(n));
  return out;
}

// A rule may say which anchors look like its block at all (R::resembles(g, n)); a failed match
// at any other anchor is no near miss, however far it got (a RoPE MatMul is not attention).
template <class R>
bool resembles(const graph& g, node_id n) {
  if constexpr (requires { R::resembles(g, n); })
    return R::resembles(g, n);
  else
    return true;
}

template <class R>
void try_rule(const graph& g, const options& opts, name_pool& names, std::vector<candidate>& found,
              report& out) {
  if (!opts.runs(R::name)) return;
  for (node_id n : pattern::anchors(R::pattern, g)) {
    auto m = pattern::match(R::pattern, g, n);
    if (!m) {
      pattern::explanation why;
      pattern::match(R::pattern, g, n, &why);
      // A near miss got as far as the op type of the rule's near_miss_depth-th node. Failing
      // before that, on the anchor's own inputs, is not one: most anchors are unrelated nodes.
      if (opts.explain || (why.progress + 1 >= 2 * near_miss_depth<R>() && resembles<R>(g, n)))
        out.near_misses.push_back(
            {std::string(R::name), g.describe(n), why.message, why.depth,
             describe_all(g, why.matched),
             why.failing_node == no_id ? std::string() : g.describe(why.failing_node)});
      continue;
    }
    const verdict v = guard_of<R>(g, m, opts);
    if (!v) {
      out.near_misses.push_back({std::string(R::name), g.describe(n), v.reason, m.nodes().size(),
                                 describe_all(g, m.nodes()), g.describe(n)});
      continue;
    }
    auto edit = std::make_unique<emitter>(g, n, opts, names, std::string(R::name));
    try {
      R::emit(g, m, *edit);
    } catch (const std::exception& e) {
      out.near_misses.push_back({std::string(R::name), g.describe(n),
                                 std::string("emit failed, nothing changed: ") + e.what(),
                                 m.nodes().size(), describe_all(g, m.nodes()), g.describe(n)});
      continue;
    }
    for (value_id v_out : g.outputs(n)) {
      if (v_out == no_id || (g.consumers(v_out).empty() && !g.is_graph_output(v_out))) continue;
      const auto& r = edit->replacements();
      if (std::none_of(r.begin(), r.end(), [&](const auto& p) { return p.first == v_out; })) {
        out.near_misses.push_back({std::string(R::name), g.describe(n),
                                   "emit gave no replacement for output '" +
                                       std::string(g.name(v_out)) + "', nothing changed",
                                   m.nodes().size(), describe_all(g, m.nodes()), g.describe(n)});
        edit.reset();
        break;
      }
    }
    if (!edit) continue;
    found.push_back({R::name,
                     priority_of<R>(),
                     &g,
                     n,
                     g.topological_position(n),
                     {m.nodes().begin(), m.nodes().end()},
                     std::move(edit)});
  }
}

template <class... Rules>
void collect(const graph& g, const options& opts, name_pool& names, std::vector<candidate>& found,
             report& out) {
  (try_rule<Rules>(g, opts, names, found, out), ...);
  for (node_id n = 0; n < g.node_count(); ++n)
    for (const subgraph_ref& sub : g.subgraphs(n))
      collect<Rules...>(*sub.body, opts, names, found, out);
}

// Higher priority first, then graph order; a match that shares a node with an accepted one waits
// for the next pass.
inline std::vector<candidate*> select(std::vector<candidate>& found) {
  std::vector<candidate*> order;
  for (auto& c : found) order.push_back(&c);
  std::stable_sort(order.begin(), order.end(), [](const candidate* a, const candidate* b) {
    if (a->priority != b->priority) return a->priority > b->priority;
    if (a->where != b->where) return std::less<const graph*>{}(a->where, b->where);
    return a->position < b->position;
  });
  std::map<const graph*, std::set<node_id>> taken;
  std::vector<candidate*> chosen;
  for (candidate* c : order) {
    auto& used = taken[c->where];
    if (std::any_of(c->nodes.begin(), c->nodes.end(), [&](node_id n) { return used.contains(n); }))
      continue;
    used.insert(c->nodes.begin(), c->nodes.end());
    chosen.push_back(c);
  }
  return chosen;
}

// Which matched nodes die: the roots, and every interior node none of whose outputs is still read
// by a node that stays, or is a graph output.
inline std::set<node_id> dead_nodes(const graph& g, const std::vector<candidate*>& edits) {
  std::set<node_id> roots, dead;
  std::set<std::string> read_by_new;  // what the replacement nodes read stays alive
  for (const candidate* c : edits) {
    roots.insert(c->root);
    dead.insert(c->nodes.begin(), c->nodes.end());
    for (const auto& node : c->edit->nodes())
      for (const auto& in : node.input()) read_by_new.insert(in);
  }
  auto read_by_replacements = [&](value_id out) {
    return read_by_new.contains(std::string(g.name(out)));
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = dead.begin(); it != dead.end();) {
      bool alive = false;
      if (!roots.contains(*it))
        for (value_id out : g.outputs(*it)) {
          if (out == no_id) continue;
          alive |= g.is_graph_output(out) || read_by_replacements(out);
          for (const use& u : g.consumers(out)) alive |= !dead.contains(u.node);
        }
      if (alive) {
        it = dead.erase(it);
        changed = true;
      } else {
        ++it;
      }
    }
  }
  // Constants read only by dead nodes die with them.
  for (node_id n = 0; n < g.node_count(); ++n) {
    if (dead.contains(n) || g.op_type(n) != "Constant" || !g.domain(n).empty()) continue;
    const value_id out = g.output(n, 0);
    if (out == no_id || g.is_graph_output(out) || g.consumers(out).empty() ||
        read_by_replacements(out))
      continue;
    const auto uses = g.consumers(out);
    if (std::all_of(uses.begin(), uses.end(), [&](const use& u) { return dead.contains(u.node); }))
      dead.insert(n);
  }
  return dead;
}

// The emitted nodes, with each replacement written under the replaced output's name, so every
// reader and graph output keeps working unchanged.
inline std::vector<onnx::NodeProto> realize(const graph& g, const candidate& c) {
  std::vector<onnx::NodeProto> nodes = c.edit->nodes();
  std::map<std::string, std::string> renamed;
  for (const auto& [old, replacement] : c.edit->replacements()) {
    const std::string old_name(g.name(old));
    bool emitted = false;
    for (auto& node : nodes)
      for (auto& out : *node.mutable_output())
        if (out == replacement) {
          out = old_name;
          emitted = true;
        }
    if (emitted) {
      renamed[replacement] = old_name;
      continue;
    }
    onnx::NodeProto& identity = nodes.emplace_back();
    identity.set_op_type("Identity");
    identity.set_name(old_name + "/identity");
    identity.add_input(replacement);
    identity.add_output(old_name);
  }
  for (auto& node : nodes)
    for (auto& in : *node.mutable_input())
      if (auto it = renamed.find(in); it != renamed.end()) in = it->second;
  return nodes;
}

inline std::map<std::string, int> count_ops(const std::vector<onnx::NodeProto>& nodes) {
  std::map<std::string, int> counts;
  for (const auto& n : nodes) ++counts[n.op_type()];
  return counts;
}

// Rewrites one graph's proto with its accepted edits. The new node list is built aside and swapped
// in, so an exception leaves the graph as it was.
inline void commit(const graph& g, const std::vector<candidate*>& edits, report& out) {
  const std::set<node_id> dead = dead_nodes(g, edits);
  std::map<node_id, const candidate*> by_root;
  for (const candidate* c : edits) by_root[c->root] = c;

  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  std::vector<fusion> fusions;
  for (node_id n : g.topological_order()) {
    if (auto it = by_root.find(n); it != by_root.end()) {
      const candidate& c = *it->second;
      fusion f{std::string(c.rule),      g.describe(n),  {}, {},
               describe_all(g, c.nodes), c.edit->notes()};
      for (node_id m : std::set<node_id>(c.nodes.begin(), c.nodes.end()))
        if (dead.contains(m)) ++f.removed[std::string(g.op_type(m))];
      const auto realized = realize(g, c);
      f.added = count_ops(realized);
      for (const auto& node : realized) *nodes.Add() = node;
      fusions.push_back(std::move(f));
      continue;
    }
    if (!dead.contains(n)) *nodes.Add() = g.node(n);
  }

  std::set<std::string> still_read;
  for (const auto& node : nodes)
    for (const auto& in : node.input()) still_read.insert(in);
  auto& proto = const_cast<onnx::GraphProto&>(g.proto());  // the caller's model, which we own
  google::protobuf::RepeatedPtrField<onnx::TensorProto> initializers;
  for (const auto& t : proto.initializer()) {
    const value_id v = *g.find_value(t.name());
    const bool orphaned = !g.consumers(v).empty() && !still_read.contains(t.name()) &&
                          !g.is_graph_input(v) && !g.is_graph_output(v) &&
                          std::all_of(g.consumers(v).begin(), g.consumers(v).end(),
                                      [&](const use& u) { return dead.contains(u.node); });
    if (!orphaned) *initializers.Add() = t;
  }
  for (const candidate* c : edits)
    for (const auto& t : c->edit->initializers()) *initializers.Add() = t;

  proto.mutable_node()->Swap(&nodes);
  proto.mutable_initializer()->Swap(&initializers);
  for (auto& f : fusions) out.fusions.push_back(std::move(f));
}

// Subgraphs first: a parent's commit copies its nodes, bodies included.
inline void commit_all(const graph& g, const std::vector<candidate*>& chosen, report& out) {
  for (node_id n = 0; n < g.node_count(); ++n)
    for (const subgraph_ref& sub : g.subgraphs(n)) commit_all(*sub.body, chosen, out);
  std::vector<candidate*> mine;
  for (candidate* c : chosen)
    if (c->where == &g) mine.push_back(c);
  if (!mine.empty()) commit(g, mine, out);
}

// One block, one near miss: a rule whose anchor another rule's deeper attempt already covers
// (the bare attention inside the merged one) adds nothing.
inline void drop_covered(std::vector<near_miss>& misses) {
  std::vector<near_miss> kept;
  for (const near_miss& x : misses) {
    const bool covered = std::any_of(misses.begin(), misses.end(), [&](const near_miss& y) {
      return &x != &y && y.depth > x.depth &&
             std::find(y.matched.begin(), y.matched.end(), x.anchor) != y.matched.end();
    });
    if (!covered) kept.push_back(x);
  }
  misses = std::move(kept);
}

inline void import_domains(onnx::ModelProto& m, const std::vector<candidate*>& chosen) {
  for (const candidate* c : chosen)
    for (const std::string& domain : c->edit->domains()) {
      const auto& imports = m.opset_import();
      if (std::any_of(imports.begin(), imports.end(),
                      [&](const auto& o) { return o.domain() == domain; }))
        continue;
      auto* opset = m.add_opset_import();
      opset->set_domain(domain);
      opset->set_version(1);
    }
}

}  // namespace detail

// Applies the rules to a fixed point and reports what fused and what nearly did.
template <rule... Rules>
report fuse(model& m, const options& opts = {}) {
  report out;
  for (std::string_view name : {std::string_view(Rules::name)...})
    if (opts.runs(name)) out.rules.emplace_back(name);
  // Nodes this run wrote: a later pass's near miss that stops at one is about a fusion already
  // made (an output projection reading the fused op), not a block left unfused.
  std::set<std::string> written;
  for (int pass = 0; pass < max_passes; ++pass) {
    const graph g(m);
    name_pool names(m.proto);
    std::vector<detail::candidate> found;
    report attempt;
    detail::collect<Rules...>(g, opts, names, found, attempt);
    if (!opts.explain) detail::drop_covered(attempt.near_misses);
    std::erase_if(attempt.near_misses,
                  [&](const near_miss& n) { return !opts.explain && written.contains(n.failing); });
    out.near_misses = std::move(attempt.near_misses);
    if (found.empty()) break;
    const std::vector<detail::candidate*> chosen = detail::select(found);
    for (const detail::candidate* c : chosen)
      for (const onnx::NodeProto& node : c->edit->nodes())
        written.insert(node.op_type() + " '" + node.name() + "'");  // as graph::describe
    detail::commit_all(g, chosen, out);
    detail::import_domains(m.proto, chosen);
    ++out.passes;
  }
  return out;
}

// The invariants every rewrite keeps: every input has a producer, no cycles, no name defined
// twice (the index checks these as it is built), and the ONNX checker passes where libonnx knows
// the model's opsets.
inline void check_invariants(const model& m) {
  const graph g(m);
  const auto& versions = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  if (g.opset("") > versions.at("").second) return;
  try {
    onnx::checker::check_model(m.proto);
  } catch (const std::exception& e) {
    throw error(std::string("the ONNX checker rejects the model: ") + e.what(),
                {.file = m.path.string()});
  }
}

}  // namespace fusekit::rewrite
