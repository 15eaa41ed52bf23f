#include "sweeps.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <numeric>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fusekit/graph/facts.hpp"
#include "fusekit/graph/graph.hpp"
#include "fusekit/io/external_data.hpp"

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
template <class Names>
void names_read(const onnx::GraphProto& g, Names& out) {
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
  std::vector<int> order(std::size_t(g.node_size()));
  std::iota(order.begin(), order.end(), 0);
  // The model's own order, where every node reads only what an earlier one writes.
  bool sorted = true;
  for (int i = 0; i < g.node_size() && sorted; ++i)
    for (const std::string& in : g.node(i).input())
      if (auto it = producer.find(in); it != producer.end() && it->second >= i) sorted = false;
  if (sorted) return order;
  order.clear();
  std::vector<int> waiting(std::size_t(g.node_size()), 0);
  std::vector<std::vector<int>> readers(std::size_t(g.node_size()));
  for (int i = 0; i < g.node_size(); ++i)
    for (const std::string& in : g.node(i).input())
      if (auto it = producer.find(in); it != producer.end() && it->second != i) {
        ++waiting[std::size_t(i)];
        readers[std::size_t(it->second)].push_back(i);
      }
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

// Initializers up to this size are compared: the copies an exporter writes (axes, scalars, shape
// vectors, biases, small masks), whether their bytes lie in the model or in an external file, so
// that the result does not depend on where the model keeps them. Larger ones, the weights, are
// not read.
inline constexpr std::uint64_t compared_bytes = 64 * 1024;

// What two initializers must share to hold the same tensor: type, dims and bytes, the bytes as
// the tensor's raw data (read from its file where it lies in one) or, for the typed fields, its
// values serialised without its name.
struct tensor_bytes {
  std::string header;  // type and dims
  const std::string* raw = nullptr;
  std::string read;
  std::string_view bytes() const { return raw ? std::string_view(*raw) : read; }
};
std::optional<tensor_bytes> bytes_of(const onnx::TensorProto& t,
                                     const std::filesystem::path& directory) {
  tensor_bytes out;
  out.header = std::to_string(t.data_type()) + ':';
  for (std::int64_t d : t.dims()) out.header += std::to_string(d) + ',';
  if (is_external(t)) {
    if (external_data_size(t, directory) > compared_bytes) return std::nullopt;
    out.read = read_external_data(t, directory);
  } else if (t.has_raw_data()) {
    if (t.raw_data().size() > compared_bytes) return std::nullopt;
    out.raw = &t.raw_data();
  } else {
    if (t.ByteSizeLong() > compared_bytes) return std::nullopt;
    onnx::TensorProto values = t;
    values.clear_name();
    values.clear_doc_string();
    out.read = values.SerializeAsString();
  }
  return out;
}

// Every initializer that holds what an earlier one holds, to the earlier one's name. One that is
// also a graph input is a default the caller may replace: it is neither merged nor merged into.
// The bytes are hashed where they lie and compared only where the hashes agree.
std::unordered_map<std::string, std::string> equal_initializers(
    const onnx::GraphProto& g, const std::filesystem::path& directory) {
  std::unordered_set<std::string_view> inputs;
  for (const onnx::ValueInfoProto& in : g.input()) inputs.insert(in.name());
  struct seen {
    tensor_bytes content;
    const std::string* name;
  };
  std::unordered_map<std::string, std::vector<seen>> first;  // header and hash → tensors
  std::unordered_map<std::string, std::string> renamed;
  for (const onnx::TensorProto& t : g.initializer()) {
    if (inputs.contains(t.name())) continue;
    std::optional<tensor_bytes> b = bytes_of(t, directory);
    if (!b) continue;
    std::vector<seen>& alike =
        first[b->header + '|' + std::to_string(std::hash<std::string_view>{}(b->bytes()))];
    const auto same = std::find_if(alike.begin(), alike.end(), [&](const seen& s) {
      return s.content.header == b->header && s.content.bytes() == b->bytes();
    });
    if (same != alike.end())
      renamed.emplace(t.name(), *same->name);
    else
      alike.push_back({std::move(*b), &t.name()});
  }
  return renamed;
}

// What the facts prove v holds, as a key two values share only when they hold the same: its
// type, its dims (numbers) and each element (an integer expression of dims, in canonical form).
// Integer and boolean contents only: the facts compute real numbers in double precision, not in
// the value's own type, so equal real facts need not be equal tensors.
std::optional<std::string> proven_key(const graph& g, const facts& f, value_id v) {
  const content_fact& c = f.content(v);
  const shape_fact& s = f.shape(v);
  if (!c.known || c.real || !s.known || g.type(v) == dtype::undefined) return std::nullopt;
  std::string key = std::to_string(int(g.type(v))) + ':';
  for (const sym& d : s.dims) {
    const auto n = d.constant();
    if (!n) return std::nullopt;
    key += std::to_string(*n) + ',';
  }
  for (const sym& e : c.ints) {
    if (!e.known()) return std::nullopt;
    key += '|' + std::to_string(e.denominator());
    for (const sym::term& t : e.terms()) {
      key += ' ' + std::to_string(t.coefficient);
      for (const sym::factor& x : t.factors)
        key += '*' + std::to_string(x.atom) + '^' + std::to_string(x.power);
    }
  }
  return key;
}

// Takes out the nodes of g whose index `marked` flags, keeping the others' order.
void erase_marked(onnx::GraphProto& g, const std::vector<char>& marked) {
  int i = 0;
  auto& nodes = *g.mutable_node();
  nodes.erase(std::remove_if(nodes.begin(), nodes.end(),
                             [&](const onnx::NodeProto&) { return marked[std::size_t(i++)]; }),
              nodes.end());
}

}  // namespace

void merge_proven_equal(model& m, removed_ops& removed, const graph* as_is) {
  onnx::GraphProto& proto = *m.proto.mutable_graph();
  std::unordered_map<std::string, std::string> renamed;
  std::vector<char> merged(std::size_t(proto.node_size()), 0);
  {
    std::optional<graph> indexed;
    const graph& g = as_is != nullptr ? *as_is : indexed.emplace(m);
    const facts& f = facts_of(g);
    std::unordered_map<std::string, value_id> first;
    auto holds = [&](value_id v) {
      if (std::optional<std::string> key = proven_key(g, f, v))
        return first.try_emplace(std::move(*key), v).first->second;
      return v;
    };
    // Initializers and inputs first: a value the model already holds is the one kept.
    for (value_id v = 0; v < g.value_count(); ++v)
      if (g.producer(v) == no_id && !g.is_outer_scope(v) &&
          !(g.is_graph_input(v) && g.is_initializer(v)))
        holds(v);
    for (node_id n : g.topological_order()) {
      bool all = g.outputs(n).size() > 0;
      for (value_id v : g.outputs(n)) {
        if (v == no_id) continue;
        const value_id earlier = holds(v);
        if (earlier == v || g.is_graph_output(v) || g.read_by_name_in_subgraph(v)) {
          all = false;
          continue;
        }
        renamed.emplace(std::string(g.name(v)), std::string(g.name(earlier)));
      }
      if (all) {
        merged[std::size_t(n)] = 1;
        ++removed[std::string(g.op_type(n))];
      }
    }
  }
  if (renamed.empty()) return;
  for (onnx::NodeProto& n : *proto.mutable_node())
    for (std::string& in : *n.mutable_input())
      if (auto it = renamed.find(in); it != renamed.end()) in = it->second;
  erase_marked(proto, merged);
}

void merge_duplicates(onnx::GraphProto& g, removed_ops& removed,
                      const std::filesystem::path& directory) {
  // Names that must live on: a graph output, or one a subgraph reads from the outer scope.
  std::unordered_set<std::string> kept;
  for (const onnx::ValueInfoProto& o : g.output()) kept.insert(o.name());
  for (onnx::NodeProto& n : *g.mutable_node())
    for (onnx::GraphProto* body : bodies(n)) names_read(*body, kept);
  const std::vector<int> order = topological(g);
  if (order.empty() && g.node_size() > 0) return;
  std::unordered_map<std::string, std::string> renamed = equal_initializers(g, directory);
  // A copy goes once this graph's nodes read the first; a subgraph may still read it by name.
  std::unordered_set<std::string> copies;
  for (const auto& [copy, first] : renamed)
    if (!kept.contains(copy)) copies.insert(copy);
  std::unordered_map<std::string, const onnx::NodeProto*> first;
  std::vector<char> merged(std::size_t(g.node_size()), 0);
  for (int i : order) {
    onnx::NodeProto& n = *g.mutable_node(i);
    for (std::string& in : *n.mutable_input())
      if (auto it = renamed.find(in); it != renamed.end()) in = it->second;
    for (onnx::GraphProto* body : bodies(n)) merge_duplicates(*body, removed, directory);
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
  erase_marked(g, merged);
  auto& initializers = *g.mutable_initializer();
  const auto left = std::remove_if(initializers.begin(), initializers.end(),
                                   [&](const auto& t) { return copies.contains(t.name()); });
  if (left != initializers.end()) removed["initializer"] += int(initializers.end() - left);
  initializers.erase(left, initializers.end());
}

int remove_dead(onnx::GraphProto& g, removed_ops& removed) {
  const std::vector<int> order = topological(g);
  if (order.empty() && g.node_size() > 0) return 0;
  // Names in the graph as it is: nothing is erased until the end.
  std::unordered_set<std::string_view> needed;
  for (const onnx::ValueInfoProto& o : g.output()) needed.insert(o.name());
  std::vector<char> dead(std::size_t(g.node_size()), 1);
  int gone = 0;
  // Readers first: a node is live where a live node, a subgraph of one or the graph reads it.
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    onnx::NodeProto& n = *g.mutable_node(*it);
    if (std::none_of(n.output().begin(), n.output().end(),
                     [&](const std::string& o) { return !o.empty() && needed.contains(o); })) {
      ++removed[n.op_type()];
      continue;
    }
    dead[std::size_t(*it)] = 0;
    needed.insert(n.input().begin(), n.input().end());
    for (onnx::GraphProto* body : bodies(n)) {
      gone += remove_dead(*body, removed);
      names_read(*body, needed);
    }
  }
  std::unordered_set<std::string_view> inputs;
  for (const onnx::ValueInfoProto& in : g.input()) inputs.insert(in.name());
  auto& initializers = *g.mutable_initializer();
  const auto kept = std::remove_if(initializers.begin(), initializers.end(), [&](const auto& t) {
    return !needed.contains(t.name()) && !inputs.contains(t.name());
  });
  gone += int(initializers.end() - kept);
  initializers.erase(kept, initializers.end());
  // The declared types of values no node writes any more go with them.
  std::unordered_set<std::string_view> written;
  for (int i = 0; i < g.node_size(); ++i)
    if (!dead[std::size_t(i)]) written.insert(g.node(i).output().begin(), g.node(i).output().end());
  auto& declared = *g.mutable_value_info();
  declared.erase(std::remove_if(declared.begin(), declared.end(),
                                [&](const auto& v) { return !written.contains(v.name()); }),
                 declared.end());
  erase_marked(g, dead);
  return gone;
}

int remove_uncalled_functions(onnx::ModelProto& m) {
  // The calls the graph makes, and those each called function's body makes in turn.
  std::set<std::pair<std::string, std::string>> called;
  std::vector<const onnx::NodeProto*> open;
  std::function<void(const onnx::NodeProto&)> reach = [&](const onnx::NodeProto& n) {
    open.push_back(&n);
    for (const onnx::AttributeProto& a : n.attribute()) {
      if (a.has_g())
        for (const onnx::NodeProto& inner : a.g().node()) reach(inner);
      for (const onnx::GraphProto& body : a.graphs())
        for (const onnx::NodeProto& inner : body.node()) reach(inner);
    }
  };
  for (const onnx::NodeProto& n : m.graph().node()) reach(n);
  while (!open.empty()) {
    const onnx::NodeProto& n = *open.back();
    open.pop_back();
    if (!called.emplace(n.domain(), n.op_type()).second) continue;
    for (const onnx::FunctionProto& f : m.functions())
      if (f.domain() == n.domain() && f.name() == n.op_type())
        for (const onnx::NodeProto& inner : f.node()) reach(inner);
  }
  auto& functions = *m.mutable_functions();
  const auto kept = std::remove_if(functions.begin(), functions.end(), [&](const auto& f) {
    return !called.contains({f.domain(), f.name()});
  });
  const int gone = int(functions.end() - kept);
  functions.erase(kept, functions.end());
  return gone;
}

namespace {

// The nodes of g and of its subgraphs that hold a subgraph.
int subgraph_holders(const onnx::GraphProto& g) {
  int n = 0;
  for (const onnx::NodeProto& node : g.node())
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.has_g()) n += 1 + subgraph_holders(a.g());
      for (const onnx::GraphProto& body : a.graphs()) n += 1 + subgraph_holders(body);
    }
  return n;
}

}  // namespace

bool sweep(model& m, const rewrite::options& run, rewrite::report& out, const graph* as_is) {
  onnx::GraphProto& g = *m.proto.mutable_graph();
  const auto removed_by = [&](std::string_view name) -> removed_ops& {
    if (std::find(out.rules.begin(), out.rules.end(), name) == out.rules.end())
      out.rules.emplace_back(name);
    return out.cleaned[std::string(name)];
  };
  const auto count = [](const removed_ops& r, bool nodes_only = false) {
    int n = 0;
    for (const auto& [op, k] : r) n += nodes_only && op == "initializer" ? 0 : k;
    return n;
  };
  bool changed = false;
  // A node that holds a subgraph keeps alive the names its subgraph reads, which no merge takes;
  // and two nodes merged as alike may be where the facts name a dim nothing else gives (NonZero's
  // count, a view of a computed shape), which the values read from each of them then share (not
  // two initializers: the facts hold their elements, equal already). Where either happened, the
  // sweeps run again, so that a sweep after them finds nothing.
  for (const graph* index = as_is;; index = nullptr) {
    const int holders = subgraph_holders(g);
    int before = 0, after = 0, alike = 0;
    if (run.runs(duplicate_elimination)) {
      removed_ops& removed = removed_by(duplicate_elimination);
      before += count(removed);
      merge_proven_equal(m, removed, index);
      const int proven = count(removed, true);
      merge_duplicates(g, removed, m.directory());
      after += count(removed);
      alike = count(removed, true) - proven;
    }
    if (run.runs(dead_node_elimination)) {
      removed_ops& removed = removed_by(dead_node_elimination);
      before += count(removed);
      if (const int initializers = remove_dead(g, removed); initializers > 0)
        removed["initializer"] += initializers;
      if (const int functions = remove_uncalled_functions(m.proto); functions > 0)
        removed["function"] += functions;
      after += count(removed);
    }
    changed = changed || after > before;
    if (after == before || (alike == 0 && subgraph_holders(g) == holders)) return changed;
  }
}

}  // namespace fusekit::rules
