// Running rules over a model: fuse(model, rules, options) for a list of any_rule, or
// fuse<rules…>(model, options) for rules named in the program.
//
// Each pass indexes the model, tries every rule at its anchors (from the op index) in every graph
// and subgraph, keeps the matches whose guard agrees, whose emit completes and whose edit reads
// only what exists where it goes (validate.hpp), resolves overlaps (higher priority first, then
// graph order), and commits the survivors in place: replacement nodes go where the matched root
// was, so topological order holds; the matched nodes that nothing else reads any more are removed,
// the others stay; outputs keep their names. Passes repeat until no rule matches, so a second run
// changes nothing, or until max_passes, which the report then says. The whole run is one
// transaction: if anything throws, every graph and the opset imports are restored as they came,
// or, where an at_rest hook ran, as the hook left them.
#pragma once

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fusekit/engine.hpp"
#include "fusekit/graph/graph.hpp"
#include "fusekit/io/model.hpp"
#include "fusekit/rewrite/any_rule.hpp"
#include "fusekit/rewrite/emitter.hpp"
#include "fusekit/rewrite/inline_branches.hpp"
#include "fusekit/rewrite/inline_functions.hpp"
#include "fusekit/rewrite/invariants.hpp"
#include "fusekit/rewrite/journal.hpp"
#include "fusekit/rewrite/names.hpp"
#include "fusekit/rewrite/report.hpp"
#include "fusekit/rewrite/rule.hpp"
#include "fusekit/rewrite/validate.hpp"

namespace fusekit::rewrite {

// Passes after which a rule set that keeps matching its own output is stopped.
inline constexpr int max_passes = 8;

// Called with the first pass's index, before anything changes: what a rule library wants to know
// about the model as it came (the fused ops it held already) without indexing it again.
using survey = void (*)(const graph&, report&);

// Called when the rules rest (a pass found no edit, or the last allowed pass), with that pass's
// index of the model, its facts computed already: a library's clean-ups of the whole graph
// (rules/sweeps.hpp) and its last word on the report. Returns whether it changed the model, which
// the rules then see in another pass. The edits before it are final: if a later pass fails, the
// model is restored to what the hook left.
using at_rest = std::function<bool(const graph&, model&, report&)>;

namespace detail {

inline void collect(const graph& g, std::span<const any_rule> rules, attempt_sink& to) {
  for (const any_rule& r : rules) r.attempt(g, to);
  for (node_id n = 0; n < g.node_count(); ++n)
    for (const subgraph_ref& sub : g.subgraphs(n)) collect(*sub.body, rules, to);
}

// What the edits chosen so far in one graph claim: their nodes, the interior values they compute
// anew (and where), and the values their nodes read (and where first).
struct claims {
  std::unordered_set<node_id> nodes;
  std::unordered_map<value_id, std::size_t> replaced_at, read_at;

  // A candidate waits for the next pass when it shares a node with a chosen edit, reads a value
  // a chosen edit computes anew only after it, or computes anew a value a chosen edit reads
  // before it.
  bool admit(const candidate& c) {
    const graph& g = *c.where;
    auto taken = [&](node_id n) { return nodes.contains(n); };
    if (std::any_of(c.nodes.begin(), c.nodes.end(), taken) ||
        std::any_of(c.rewired.begin(), c.rewired.end(), taken))
      return false;
    for (value_id v : c.reads)
      if (auto it = replaced_at.find(v); it != replaced_at.end() && it->second > c.position)
        return false;
    for (value_id v : c.replaced)
      if (auto it = read_at.find(v); it != read_at.end() && it->second < c.position) return false;
    nodes.insert(c.nodes.begin(), c.nodes.end());
    nodes.insert(c.rewired.begin(), c.rewired.end());
    for (value_id v : c.replaced)
      if (g.producer(v) != c.root) replaced_at.emplace(v, c.position);
    for (value_id v : c.reads) {
      auto [it, added] = read_at.emplace(v, c.position);
      if (!added) it->second = std::min(it->second, c.position);
    }
    return true;
  }
};

// Higher priority first, then graph order.
inline std::vector<candidate*> select(std::vector<candidate>& found) {
  std::vector<candidate*> order;
  order.reserve(found.size());
  for (auto& c : found) order.push_back(&c);
  std::stable_sort(order.begin(), order.end(), [](const candidate* a, const candidate* b) {
    if (a->priority != b->priority) return a->priority > b->priority;
    if (a->where != b->where) return std::less<const graph*>{}(a->where, b->where);
    return a->position < b->position;
  });
  std::unordered_map<const graph*, claims> taken;
  std::vector<candidate*> chosen;
  for (candidate* c : order)
    if (taken[c->where].admit(*c)) chosen.push_back(c);
  return chosen;
}

inline std::map<std::string, int> count_ops(
    std::span<const std::unique_ptr<onnx::NodeProto>> nodes) {
  std::map<std::string, int> counts;
  for (const auto& n : nodes) ++counts[n->op_type()];
  return counts;
}

// The values a pass's edits forward to another name (emitter::forwards), each followed to its end
// (an edit may forward to a value another edit forwards), and the nodes that read them.
class forwarding {
 public:
  forwarding(const graph& g, std::span<candidate* const> edits) {
    for (const candidate* c : edits)
      for (const auto& [old, to] : c->edit->forwards()) {
        to_.emplace(std::string(g.name(old)), to);
        for (const use& u : g.consumers(old)) readers_.insert(u.node);
      }
    for (auto& [from, to] : to_)
      for (std::size_t hops = 0; hops < to_.size(); ++hops) {
        auto next = to_.find(to);
        if (next == to_.end()) break;
        to = next->second;
      }
  }
  bool reads_one(node_id n) const { return readers_.contains(n); }
  void rename_inputs(onnx::NodeProto& node) const {
    if (to_.empty()) return;
    for (std::string& in : *node.mutable_input())
      if (auto it = to_.find(in); it != to_.end()) in = it->second;
  }

 private:
  std::unordered_map<std::string, std::string> to_;
  std::unordered_set<node_id> readers_;
};

// One graph's edits of a pass, worked out before anything changes: its new node and initializer
// lists, as pointers to the elements it keeps and to new ones.
struct graph_edit {
  onnx::GraphProto* proto;
  std::vector<onnx::NodeProto*> nodes;
  std::vector<std::unique_ptr<onnx::NodeProto>> added_nodes;
  std::vector<onnx::TensorProto*> initializers;
  std::vector<std::unique_ptr<onnx::TensorProto>> added_initializers;
  bool initializers_change = false;
  std::vector<fusion> fusions;

  graph_edit(const graph& g, std::span<candidate* const> edits, name_pool& names)
      : proto(const_cast<onnx::GraphProto*>(&g.proto())) {  // the caller's model, which we own
    std::vector<footprint> prints;
    std::vector<candidate*> edit_at(g.node_count(), nullptr);  // by root
    std::unordered_set<value_id> read;
    // Where a rewired Shape or Size was: the nodes that compute its output now.
    std::unordered_map<node_id, std::vector<onnx::NodeProto*>> rewired_at;
    for (candidate* c : edits) {
      prints.push_back(c->print());
      edit_at[c->root] = c;
      read.insert(c->reads.begin(), c->reads.end());
    }
    std::unordered_set<node_id> dead = dead_nodes(g, prints);
    add_orphans(g, prints, dead);
    // A rewired Shape or Size is computed anew where it was, unless all that read it die too
    // (it sized a view of the match): then it goes with them.
    auto still_read = [&](node_id reader) {
      const auto outs = g.outputs(reader);
      return std::any_of(outs.begin(), outs.end(), [&](value_id out) {
        return out != no_id && read_after(g, out, read, dead);
      });
    };
    for (candidate* c : edits)
      for (std::size_t i = 0; i < c->rewired.size(); ++i) {
        auto& counts = rewired_counts[c];
        ++counts.first[std::string(g.op_type(c->rewired[i]))];
        if (!still_read(c->rewired[i])) continue;
        const std::size_t first = added_nodes.size();
        for (onnx::NodeProto& node : dims_reader(g, c->rewired[i], c->rewired_from[i], names)) {
          added_nodes.push_back(std::make_unique<onnx::NodeProto>(std::move(node)));
          rewired_at[c->rewired[i]].push_back(added_nodes.back().get());
        }
        for (const auto& node : std::span(added_nodes).subspan(first))
          ++counts.second[node->op_type()];
      }
    std::vector<char> gone(g.node_count(), 0);
    for (node_id n : dead) gone[n] = 1;
    const forwarding forwarded(g, edits);

    nodes.reserve(g.node_count());
    for (node_id n : g.topological_order()) {
      if (edit_at[n] != nullptr) {
        realize(g, *edit_at[n], dead);
      } else if (auto it = rewired_at.find(n); it != rewired_at.end()) {
        nodes.insert(nodes.end(), it->second.begin(), it->second.end());
      } else if (!gone[n] && forwarded.reads_one(n)) {
        added_nodes.push_back(std::make_unique<onnx::NodeProto>(g.node(n)));
        nodes.push_back(added_nodes.back().get());
      } else if (!gone[n]) {
        nodes.push_back(const_cast<onnx::NodeProto*>(&g.node(n)));
      }
    }
    // A reader that stays, or a node an edit of this pass wrote, reads a forwarded value by its
    // new name: the former as a copy, so that the journal can put the original back.
    for (const auto& node : added_nodes) forwarded.rename_inputs(*node);

    // Initializers that only dead nodes read go with them.
    // Each is judged once: one shared by every layer (a scale) has as many readers as layers.
    std::unordered_set<const onnx::TensorProto*> orphans;
    std::unordered_set<value_id> judged;
    for (node_id n : dead)
      for (value_id v : g.inputs(n)) {
        const onnx::TensorProto* t = g.constant_tensor(v);
        if (t == nullptr || !g.is_initializer(v) || g.is_graph_output(v) || read.contains(v) ||
            !judged.insert(v).second)
          continue;
        const auto uses = g.consumers(v);
        if (std::all_of(uses.begin(), uses.end(),
                        [&](const use& u) { return dead.contains(u.node); }))
          orphans.insert(t);
      }
    drop_unread(added_initializers);
    initializers_change = !orphans.empty() || !added_initializers.empty();
    if (!initializers_change) return;
    auto& all = *proto->mutable_initializer();
    for (auto it = all.pointer_begin(); it != all.pointer_end(); ++it)
      if (!orphans.contains(*it)) initializers.push_back(*it);
    for (const auto& t : added_initializers) initializers.push_back(t.get());
  }

  void apply(journal& edits) {
    edits.replace(*proto->mutable_node(), nodes, std::move(added_nodes));
    if (initializers_change)
      edits.replace(*proto->mutable_initializer(), initializers, std::move(added_initializers));
  }

 private:
  // An initializer an edit adds that no node of the graph as it will be reads, nor a graph output
  // names, is not written: a Constant made an initializer in the pass whose fusion removed its
  // readers. A subgraph's reads count wherever it reads the name.
  void drop_unread(std::vector<std::unique_ptr<onnx::TensorProto>>& added) const {
    if (added.empty()) return;
    std::unordered_set<std::string_view> read;
    for (const auto& out : proto->output()) read.insert(out.name());
    std::vector<const onnx::NodeProto*> work(nodes.begin(), nodes.end());
    while (!work.empty()) {
      const onnx::NodeProto* n = work.back();
      work.pop_back();
      for (const std::string& in : n->input()) read.insert(in);
      for (const auto& a : n->attribute()) {
        if (a.has_g())
          for (const auto& inner : a.g().node()) work.push_back(&inner);
        for (const auto& body : a.graphs())
          for (const auto& inner : body.node()) work.push_back(&inner);
      }
    }
    std::erase_if(added, [&](const auto& t) { return !read.contains(t->name()); });
  }

  // Per candidate: the ops of the Shapes and Sizes it rewires, and of the nodes that replace them.
  std::unordered_map<const candidate*,
                     std::pair<std::map<std::string, int>, std::map<std::string, int>>>
      rewired_counts;

  static onnx::NodeProto node_of(std::string op, std::string name, std::vector<std::string> ins,
                                 std::string out) {
    onnx::NodeProto n;
    n.set_op_type(std::move(op));
    n.set_name(std::move(name));
    for (std::string& in : ins) n.add_input(std::move(in));
    n.add_output(std::move(out));
    return n;
  }
  static onnx::NodeProto int64_constant(std::string name, std::string out,
                                        std::span<const std::int64_t> values, bool scalar) {
    onnx::NodeProto n = node_of("Constant", std::move(name), {}, std::move(out));
    onnx::AttributeProto& a = *n.add_attribute();
    a.set_name("value");
    a.set_type(onnx::AttributeProto::TENSOR);
    onnx::TensorProto& t = *a.mutable_t();
    t.set_data_type(onnx::TensorProto::INT64);
    if (!scalar) t.add_dims(std::int64_t(values.size()));
    for (std::int64_t v : values) t.add_int64_data(v);
    return n;
  }

  // The nodes that compute what the Shape or Size `reader` computed, from `from`: a constant, or
  // the dims of the value the match read, picked in order.
  static std::vector<onnx::NodeProto> dims_reader(const graph& g, node_id reader,
                                                  const shape_source& from, name_pool& names) {
    const onnx::NodeProto& old = g.node(reader);
    const std::string& out = old.output(0);
    const auto rank = std::int64_t(from.rank);
    std::vector<onnx::NodeProto> made;
    if (from.mixed()) return mixed_dims_reader(g, reader, from, names);
    if (old.op_type() == "Size") {
      if (from.from != no_id) {
        made.push_back(node_of("Size", old.name(), {std::string(g.name(from.from))}, out));
      } else {
        std::int64_t product = 1;
        for (std::int64_t i = 0; i < rank; ++i) product *= from.dims[std::size_t(i)];
        made.push_back(int64_constant(old.name(), out, std::span(&product, 1), true));
      }
      return made;
    }
    // Shape's start and end (opset 15), clamped as the op clamps them.
    auto bound = [&](std::string_view attribute, std::int64_t fallback) {
      std::int64_t i = g.attribute_int(reader, attribute).value_or(fallback);
      if (i < 0) i += rank;
      return std::clamp<std::int64_t>(i, 0, rank);
    };
    const std::int64_t start = bound("start", 0), end = std::max(start, bound("end", rank));
    std::vector<std::int64_t> picked;
    bool in_order = true;
    for (std::int64_t i = start; i < end; ++i) {
      const std::size_t k = std::size_t(i);
      picked.push_back(from.from == no_id ? from.dims[k] : from.order[k]);
      in_order = in_order && from.order[k] == i;
    }
    if (from.from == no_id) {
      made.push_back(int64_constant(old.name(), out, picked, false));
    } else if (in_order) {
      onnx::NodeProto shape = node_of("Shape", old.name(), {std::string(g.name(from.from))}, out);
      for (const auto& a : old.attribute()) *shape.add_attribute() = a;
      made.push_back(std::move(shape));
    } else {
      const std::string dims = names.fresh(old.name() + "/dims");
      const std::string order = names.fresh(old.name() + "/order");
      made.push_back(node_of("Shape", dims, {std::string(g.name(from.from))}, dims));
      made.push_back(int64_constant(order, order, picked, false));
      made.push_back(node_of("Gather", old.name(), {dims, order}, out));
    }
    return made;
  }

  // The dims, some numbers and the rest dims of `from.from` (each plus its offset): each a
  // one-element piece, joined (their product, for Size).
  static std::vector<onnx::NodeProto> mixed_dims_reader(const graph& g, node_id reader,
                                                        const shape_source& from,
                                                        name_pool& names) {
    const onnx::NodeProto& old = g.node(reader);
    const auto rank = std::int64_t(from.rank);
    std::int64_t start = 0, end = rank;
    if (old.op_type() == "Shape") {
      auto bound = [&](std::string_view attribute, std::int64_t fallback) {
        std::int64_t i = g.attribute_int(reader, attribute).value_or(fallback);
        if (i < 0) i += rank;
        return std::clamp<std::int64_t>(i, 0, rank);
      };
      start = bound("start", 0);
      end = std::max(start, bound("end", rank));
    }
    std::vector<onnx::NodeProto> made;
    const std::string dims = names.fresh(old.name() + "/dims");
    made.push_back(node_of("Shape", dims, {std::string(g.name(from.from))}, dims));
    std::vector<std::string> pieces;
    for (std::int64_t i = start; i < end; ++i) {
      const std::size_t k = std::size_t(i);
      const std::string piece = names.fresh(old.name() + "/dim");
      if (from.order[k] < 0) {
        made.push_back(int64_constant(piece, piece, std::span(&from.dims[k], 1), false));
      } else {
        const std::string index = names.fresh(old.name() + "/index");
        const std::string dim = from.offset[k] ? names.fresh(old.name() + "/source") : piece;
        made.push_back(int64_constant(index, index, std::span(&from.order[k], 1), false));
        made.push_back(node_of("Gather", dim, {dims, index}, dim));
        if (from.offset[k]) {
          const std::string offset = names.fresh(old.name() + "/offset");
          made.push_back(int64_constant(offset, offset, std::span(&from.offset[k], 1), false));
          made.push_back(node_of("Add", piece, {dim, offset}, piece));
        }
      }
      pieces.push_back(piece);
    }
    const bool size = old.op_type() == "Size";
    const std::string joined = size ? names.fresh(old.name() + "/joined") : old.output(0);
    onnx::NodeProto concat = node_of("Concat", size ? joined : old.name(), pieces, joined);
    onnx::AttributeProto* axis = concat.add_attribute();
    axis->set_name("axis");
    axis->set_type(onnx::AttributeProto_AttributeType_INT);
    axis->set_i(0);
    made.push_back(std::move(concat));
    if (size) {
      onnx::NodeProto product = node_of("ReduceProd", old.name(), {joined}, old.output(0));
      onnx::AttributeProto* keep = product.add_attribute();
      keep->set_name("keepdims");
      keep->set_type(onnx::AttributeProto_AttributeType_INT);
      keep->set_i(0);
      made.push_back(std::move(product));
    }
    return made;
  }

  void realize(const graph& g, candidate& c, const std::unordered_set<node_id>& dead) {
    fusion f{std::string(c.rule),      g.describe(c.root), {}, {},
             describe_all(g, c.nodes), c.edit->notes()};
    for (node_id m : std::set<node_id>(c.nodes.begin(), c.nodes.end()))
      if (dead.contains(m)) ++f.removed[std::string(g.op_type(m))];
    const std::size_t first = added_nodes.size();
    for (onnx::NodeProto& node : c.edit->take_nodes()) {
      added_nodes.push_back(std::make_unique<onnx::NodeProto>(std::move(node)));
      nodes.push_back(added_nodes.back().get());
    }
    f.added = count_ops(std::span(added_nodes).subspan(first));
    if (auto it = rewired_counts.find(&c); it != rewired_counts.end()) {
      for (const auto& [op, k] : it->second.first) f.removed[op] += k;
      for (const auto& [op, k] : it->second.second) f.added[op] += k;
    }
    for (onnx::TensorProto& t : c.edit->take_initializers())
      added_initializers.push_back(std::make_unique<onnx::TensorProto>(std::move(t)));
    fusions.push_back(std::move(f));
  }
};

inline void plan_graphs(const graph& g, const std::vector<candidate*>& chosen,
                        std::vector<graph_edit>& plans, name_pool& names) {
  std::vector<candidate*> mine;
  for (candidate* c : chosen)
    if (c->where == &g) mine.push_back(c);
  if (!mine.empty()) plans.emplace_back(g, mine, names);
  for (node_id n = 0; n < g.node_count(); ++n)
    for (const subgraph_ref& sub : g.subgraphs(n)) plan_graphs(*sub.body, chosen, plans, names);
}

// The domains the chosen edits use that the model does not import yet, at version 1.
inline void import_domains(onnx::ModelProto& m, const std::vector<candidate*>& chosen,
                           journal& edits) {
  std::vector<std::unique_ptr<onnx::OperatorSetIdProto>> added;
  std::vector<onnx::OperatorSetIdProto*> after(m.mutable_opset_import()->pointer_begin(),
                                               m.mutable_opset_import()->pointer_end());
  auto imported = [&](const std::string& domain) {
    return std::any_of(after.begin(), after.end(),
                       [&](const auto* o) { return o->domain() == domain; });
  };
  for (const candidate* c : chosen)
    for (const std::string& domain : c->edit->domains()) {
      if (imported(domain)) continue;
      auto& opset = added.emplace_back(std::make_unique<onnx::OperatorSetIdProto>());
      opset->set_domain(domain);
      opset->set_version(1);
      after.push_back(opset.get());
    }
  if (!added.empty()) edits.replace(*m.mutable_opset_import(), after, std::move(added));
}

// Every graph's edits and the opset imports of one pass. Each graph's edit is worked out in full
// before any is applied; the journal undoes what was applied if anything later fails.
inline void commit(const graph& g, onnx::ModelProto& m, const std::vector<candidate*>& chosen,
                   journal& edits, report& out, name_pool& names) {
  std::vector<graph_edit> plans;
  plan_graphs(g, chosen, plans, names);
  std::size_t fusions = out.fusions.size();
  for (const graph_edit& p : plans) fusions += p.fusions.size();
  out.fusions.reserve(fusions);
  for (graph_edit& p : plans) p.apply(edits);
  import_domains(m, chosen, edits);
  for (graph_edit& p : plans)
    for (fusion& f : p.fusions) out.fusions.push_back(std::move(f));
}

// One block, one near miss: a rule whose anchor another rule's deeper attempt already covers
// (the bare attention inside the merged one) adds nothing.
inline void drop_covered(std::vector<near_miss>& misses) {
  std::unordered_map<std::string_view, std::size_t> deepest;  // node → deepest attempt over it
  for (const near_miss& y : misses)
    for (const std::string& node : y.matched) {
      auto [it, added] = deepest.emplace(node, y.depth);
      if (!added) it->second = std::max(it->second, y.depth);
    }
  std::vector<bool> covered;
  for (const near_miss& x : misses) {
    auto it = deepest.find(x.anchor);
    covered.push_back(it != deepest.end() && it->second > x.depth);
  }
  std::vector<near_miss> kept;
  for (std::size_t i = 0; i < misses.size(); ++i)
    if (!covered[i]) kept.push_back(std::move(misses[i]));
  misses = std::move(kept);
}

// The calls of local functions whose bodies hold a match: every call is inlined on trial, one
// attempt finds the matches, and the model is put back as it came. Near misses inside the calls
// that hold none go to `misses`, named as the trial inlined them.
inline std::set<std::string> calls_holding_matches(model& m, std::span<const any_rule> rules,
                                                   const options& opts,
                                                   std::vector<near_miss>& misses) {
  std::set<std::string> wanted;
  const auto nodes = m.proto.graph().node();
  const auto opsets = m.proto.opset_import();
  name_pool trial_names(m.proto);
  const std::vector<inlined_call> trial =
      inline_functions(m.proto, trial_names, [](const onnx::NodeProto&) { return true; });
  if (trial.empty()) return wanted;
  try {
    std::unordered_map<std::string_view, const inlined_call*> call_of;
    for (const inlined_call& c : trial)
      for (const std::string& n : c.nodes) call_of.emplace(n, &c);
    const graph g(m);
    std::vector<candidate> found;
    report attempt;
    attempt_sink sink{opts, trial_names, found, attempt};
    collect(g, rules, sink);
    // A rule of negative priority cleans up after the others: it inlines no call on its own.
    for (const candidate& c : found)
      for (node_id n : c.priority < 0 ? std::span<const node_id>{} : std::span(c.nodes))
        if (auto it = call_of.find(c.where->node(n).name()); it != call_of.end())
          wanted.insert(it->second->call);
    if (!opts.explain) drop_covered(attempt.near_misses);
    // A matched node is described as "Op 'name'": the name says which call it came from.
    auto call_holding = [&](const std::string& described) -> const inlined_call* {
      const auto open = described.find('\''), close = described.rfind('\'');
      if (open == std::string::npos || close <= open) return nullptr;
      const auto it = call_of.find(std::string_view(described).substr(open + 1, close - open - 1));
      return it == call_of.end() ? nullptr : it->second;
    };
    for (near_miss& y : attempt.near_misses) {
      const inlined_call* holder = nullptr;
      for (const std::string& n : y.matched)
        if (const inlined_call* c = call_holding(n)) holder = c;
      if (holder != nullptr && !wanted.contains(holder->call)) misses.push_back(std::move(y));
    }
  } catch (...) {
    *m.proto.mutable_graph()->mutable_node() = nodes;
    *m.proto.mutable_opset_import() = opsets;
    throw;
  }
  *m.proto.mutable_graph()->mutable_node() = nodes;
  *m.proto.mutable_opset_import() = opsets;
  return wanted;
}

// The passes of one run, to a fixed point or max_passes. `settled`: whether the at_rest hook ran,
// after which the edits before it are final.
inline void run_passes(model& m, std::span<const any_rule> running, const options& opts,
                       survey first_look, const at_rest& settle, name_pool& names, journal& edits,
                       report& out, bool& settled) {
  // Nodes this run's fusions wrote: a later pass's near miss that stops at one is about a fusion
  // already made (an output projection reading the fused op), not a block left unfused. A
  // clean-up's node (negative priority) computes what the model did, and a near miss at it is
  // still about a block left unfused, unless it rewrote a node a fusion wrote.
  std::unordered_set<std::string> written;
  for (bool looked = first_look == nullptr;;) {
    const graph g(m);
    // The next graph holds the branch an If takes where the facts prove which: the rules and the
    // facts see what it computes (inline_branches.hpp).
    if (detail::inline_decided_branches(g, m.proto, names, edits, out.notes)) continue;
    if (!looked) {
      first_look(g, out);
      looked = true;
    }
    std::vector<detail::candidate> found;
    report attempt;
    std::vector<detail::deferred_miss> deferred;
    detail::attempt_sink sink{opts, names, found, attempt, &deferred};
    detail::collect(g, running, sink);
    // The report keeps the near misses of the pass that ends the run, the one that finds no
    // edit or the last allowed: only those are written.
    if (found.empty() || out.passes == max_passes) {
      detail::write_deferred(deferred, attempt);
      if (!opts.explain) detail::drop_covered(attempt.near_misses);
      std::erase_if(attempt.near_misses, [&](const near_miss& n) {
        return !opts.explain && written.contains(n.failing);
      });
      out.near_misses = std::move(attempt.near_misses);
    }
    const bool last = !found.empty() && out.passes == max_passes;
    if (found.empty() || last) {
      out.fixed_point = !last;
      if (!settle) break;
      edits.checkpoint();
      settled = true;
      if (!settle(g, m, out) || last) break;
      continue;
    }
    const std::vector<detail::candidate*> chosen = detail::select(found);
    for (const detail::candidate* c : chosen) {
      const bool fusion =
          c->priority >= 0 || std::any_of(c->nodes.begin(), c->nodes.end(), [&](node_id n) {
            return written.contains(c->where->describe(n));
          });
      if (!fusion) continue;
      for (const onnx::NodeProto& node : c->edit->nodes())
        written.insert(node.op_type() + " '" + node.name() + "'");  // as graph::describe
    }
    detail::commit(g, m.proto, chosen, edits, out, names);
    ++out.passes;
  }
}

}  // namespace detail

// Applies the rules to a fixed point and reports what fused and what nearly did.
FUSEKIT_ENGINE_INLINE report fuse(model& m, std::span<const any_rule> rules,
                                  const options& opts = {}, survey first_look = nullptr,
                                  const at_rest& settle = {});
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE report fuse(model& m, std::span<const any_rule> rules, const options& opts,
                                  survey first_look, const at_rest& settle) {
  std::vector<any_rule> running;
  for (const any_rule& r : rules)
    if (opts.runs(r.name())) running.push_back(r);
  report out;
  for (const any_rule& r : running) out.rules.emplace_back(r.name());
  name_pool names(m.proto);
  // Local functions whose bodies hold a match are inlined first (their calls go); the others
  // stay calls, their near misses reported as the trial saw them.
  std::vector<near_miss> in_functions;
  const auto nodes_as_given = m.proto.functions_size() > 0
                                  ? m.proto.graph().node()
                                  : google::protobuf::RepeatedPtrField<onnx::NodeProto>();
  const auto opsets_as_given = m.proto.opset_import();
  const bool had_functions = m.proto.functions_size() > 0;
  if (had_functions) {
    const std::set<std::string> calls =
        detail::calls_holding_matches(m, running, opts, in_functions);
    for (const inlined_call& c : inline_functions(m.proto, names, [&](const onnx::NodeProto& call) {
           return calls.contains(call.name());
         }))
      out.notes.push_back("inlined " + c.function + " called by '" + c.call +
                          "': its body holds a match");
  }
  // The edits before the at_rest hook ran, the inlining included, are final: a failure after it
  // restores the model as the hook left it.
  bool settled = false;
  try {
    detail::journal edits;  // undone, before the inlining is, unless the whole run succeeds
    detail::run_passes(m, running, opts, first_look, settle, names, edits, out, settled);
    edits.keep();
  } catch (...) {
    if (had_functions && !settled) {
      *m.proto.mutable_graph()->mutable_node() = nodes_as_given;
      *m.proto.mutable_opset_import() = opsets_as_given;
    }
    throw;
  }
  for (near_miss& y : in_functions) out.near_misses.push_back(std::move(y));
  return out;
}
#endif

// The same for rules named in the program, each with its options' defaults.
template <class... Rules>
report fuse(model& m, const options& opts = {}, survey first_look = nullptr) {
  const std::array<any_rule, sizeof...(Rules)> rules{any_rule::of<Rules>()...};
  return fuse(m, rules, opts, first_look);
}

}  // namespace fusekit::rewrite
