#include "sweeps.hpp"

#include <algorithm>
#include <functional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace fusekit::rules {

namespace {

std::vector<onnx::GraphProto*> bodies(onnx::NodeProto& n) {
  std::vector<onnx::GraphProto*> out;
  for (onnx::AttributeProto& a : *n.mutable_attribute()) {
    if (a.has_g()) out.push_back(a.mutable_g());
    for (onnx::GraphProto& body : *a.mutable_graphs()) out.push_back(&body);
  }
  return out;
}

// Every name the nodes of g, and of the subgraphs within them, read; and g's outputs.
void names_read(const onnx::GraphProto& g, std::unordered_set<std::string>& out) {
  for (const onnx::ValueInfoProto& o : g.output()) out.insert(o.name());
  for (const onnx::NodeProto& n : g.node()) {
    out.insert(n.input().begin(), n.input().end());
    for (const onnx::AttributeProto& a : n.attribute()) {
      if (a.has_g()) names_read(a.g(), out);
      for (const onnx::GraphProto& body : a.graphs()) names_read(body, out);
    }
  }
}

bool gives_the_same_for_the_same_inputs(const onnx::NodeProto& n) {
  const std::string& d = n.domain();
  const std::string& op = n.op_type();
  if (!(d.empty() || d == "ai.onnx" || d == "com.microsoft")) return false;
  if (op.starts_with("Random") || op == "Multinomial" || op == "Bernoulli") return false;
  return std::none_of(n.attribute().begin(), n.attribute().end(),
                      [](const auto& a) { return a.has_g() || a.graphs_size() > 0; });
}

// The nodes of g in an order that puts each after the nodes it reads: the model's own where it is
// one (ONNX asks for that, not every producer heeds it), else the lowest-numbered ready node first.
std::vector<int> topological(const onnx::GraphProto& g) {
  std::unordered_map<std::string_view, int> producer;
  for (int i = 0; i < g.node_size(); ++i)
    for (const std::string& out : g.node(i).output())
      if (!out.empty()) producer.emplace(out, i);
  std::vector<int> waiting(std::size_t(g.node_size()), 0);
  std::vector<std::vector<int>> readers(std::size_t(g.node_size()));
  for (int i = 0; i < g.node_size(); ++i)
    for (const std::string& in : g.node(i).input())
      if (auto it = producer.find(in); it != producer.end() && it->second != i) {
        ++waiting[std::size_t(i)];
        readers[std::size_t(it->second)].push_back(i);
      }
  std::vector<int> order;
  std::vector<int> ready;  // a min-heap of node indices
  for (int i = 0; i < g.node_size(); ++i)
    if (waiting[std::size_t(i)] == 0) ready.push_back(i);
  std::make_heap(ready.begin(), ready.end(), std::greater<>{});
  while (!ready.empty()) {
    std::pop_heap(ready.begin(), ready.end(), std::greater<>{});
    const int n = ready.back();
    ready.pop_back();
    order.push_back(n);
    for (int r : readers[std::size_t(n)])
      if (--waiting[std::size_t(r)] == 0) {
        ready.push_back(r);
        std::push_heap(ready.begin(), ready.end(), std::greater<>{});
      }
  }
  // A cycle is no model; its nodes keep their places after the rest, touched by neither sweep.
  if (order.size() != std::size_t(g.node_size())) return {};
  return order;
}

// What two nodes must share to compute the same: op, domain, inputs, attributes (in name order)
// and which outputs they write.
std::string key_of(const onnx::NodeProto& n) {
  std::string key = n.domain() == "ai.onnx" ? std::string() : n.domain();
  key += '\n' + n.op_type();
  for (const std::string& in : n.input()) key += '\n' + in;
  key += "\n|";
  for (const std::string& out : n.output()) key += out.empty() ? '0' : '1';
  std::vector<const onnx::AttributeProto*> attributes;
  for (const auto& a : n.attribute()) attributes.push_back(&a);
  std::sort(attributes.begin(), attributes.end(),
            [](const auto* a, const auto* b) { return a->name() < b->name(); });
  for (const auto* a : attributes) key += '\n' + a->SerializeAsString();
  return key;
}

}  // namespace

void merge_duplicates(onnx::GraphProto& g, removed_ops& removed) {
  // Names that must live on: a graph output, or one a subgraph reads from the outer scope.
  std::unordered_set<std::string> kept;
  for (const onnx::ValueInfoProto& o : g.output()) kept.insert(o.name());
  for (onnx::NodeProto& n : *g.mutable_node())
    for (onnx::GraphProto* body : bodies(n)) names_read(*body, kept);
  std::unordered_map<std::string, std::string> renamed;
  std::unordered_map<std::string, const onnx::NodeProto*> first;
  std::vector<char> merged(std::size_t(g.node_size()), 0);
  for (int i : topological(g)) {
    onnx::NodeProto& n = *g.mutable_node(i);
    for (std::string& in : *n.mutable_input())
      if (auto it = renamed.find(in); it != renamed.end()) in = it->second;
    for (onnx::GraphProto* body : bodies(n)) merge_duplicates(*body, removed);
    if (!gives_the_same_for_the_same_inputs(n)) continue;
    const auto [at, is_first] = first.try_emplace(key_of(n), &n);
    if (is_first || std::any_of(n.output().begin(), n.output().end(),
                                [&](const std::string& o) { return kept.contains(o); }))
      continue;
    for (int k = 0; k < n.output_size(); ++k)
      if (!n.output(k).empty()) renamed[n.output(k)] = at->second->output(k);
    merged[std::size_t(i)] = 1;
    ++removed[n.op_type()];
  }
  int i = 0;
  auto& nodes = *g.mutable_node();
  nodes.erase(std::remove_if(nodes.begin(), nodes.end(),
                             [&](const onnx::NodeProto&) { return merged[std::size_t(i++)]; }),
              nodes.end());
}

int remove_dead(onnx::GraphProto& g, removed_ops& removed) {
  const std::vector<int> order = topological(g);
  if (order.empty() && g.node_size() > 0) return 0;
  std::unordered_set<std::string> needed;
  for (const onnx::ValueInfoProto& o : g.output()) needed.insert(o.name());
  std::vector<char> live(std::size_t(g.node_size()), 0);
  // Readers first: a node is live where a live node, a subgraph of one or the graph reads it.
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    onnx::NodeProto& n = *g.mutable_node(*it);
    if (std::none_of(n.output().begin(), n.output().end(),
                     [&](const std::string& o) { return !o.empty() && needed.contains(o); })) {
      ++removed[n.op_type()];
      continue;
    }
    live[std::size_t(*it)] = 1;
    needed.insert(n.input().begin(), n.input().end());
    for (onnx::GraphProto* body : bodies(n)) names_read(*body, needed);
  }
  int i = 0;
  auto& nodes = *g.mutable_node();
  nodes.erase(std::remove_if(nodes.begin(), nodes.end(),
                             [&](const onnx::NodeProto&) { return !live[std::size_t(i++)]; }),
              nodes.end());
  int gone = 0;
  for (onnx::NodeProto& n : nodes)
    for (onnx::GraphProto* body : bodies(n)) gone += remove_dead(*body, removed);
  std::unordered_set<std::string> inputs;
  for (const onnx::ValueInfoProto& in : g.input()) inputs.insert(in.name());
  auto& initializers = *g.mutable_initializer();
  const auto kept = std::remove_if(initializers.begin(), initializers.end(), [&](const auto& t) {
    return !needed.contains(t.name()) && !inputs.contains(t.name());
  });
  gone += int(initializers.end() - kept);
  initializers.erase(kept, initializers.end());
  // The declared types of values no node writes any more go with them.
  std::unordered_set<std::string> written;
  for (const onnx::NodeProto& n : nodes) written.insert(n.output().begin(), n.output().end());
  auto& declared = *g.mutable_value_info();
  declared.erase(std::remove_if(declared.begin(), declared.end(),
                                [&](const auto& v) { return !written.contains(v.name()); }),
                 declared.end());
  return gone;
}

void sweep(model& m, const rewrite::options& run, rewrite::report& out) {
  onnx::GraphProto& g = *m.proto.mutable_graph();
  if (run.runs(duplicate_elimination)) {
    out.rules.emplace_back(duplicate_elimination);
    merge_duplicates(g, out.cleaned[std::string(duplicate_elimination)]);
  }
  if (run.runs(dead_node_elimination)) {
    out.rules.emplace_back(dead_node_elimination);
    removed_ops& removed = out.cleaned[std::string(dead_node_elimination)];
    if (const int initializers = remove_dead(g, removed); initializers > 0)
      removed["initializer"] += initializers;
  }
}

}  // namespace fusekit::rules
