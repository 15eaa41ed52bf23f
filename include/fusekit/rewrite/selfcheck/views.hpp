// The views whose shapes or axes a pattern leaves open (Reshape, Expand, Unsqueeze, Slice …):
// the candidates derived from what they regroup, and the search among them.
#pragma once

#include "fusekit/rewrite/selfcheck/instance_writer.hpp"

namespace fusekit::selfcheck::detail {

// ---- views whose shape or axes the pattern leaves open

// The view an open input of an op is, by its slot: a Slice's four (its starts, ends, axes and
// steps), one of the other views'; "" where it is none.
inline std::string_view view_of(std::string_view op, std::size_t slot, std::int64_t opset) {
  static constexpr std::string_view slice[] = {"", "Slice starts", "Slice ends", "Slice axes",
                                               "Slice steps"};
  if (op == "Slice") return slot < std::size(slice) ? slice[slot] : "";
  if (slot != 1) return "";
  if (op == "Reshape" || op == "Expand" || op == "Tile") return op;
  if (op == "Gather") return "Gather indices";
  if (op == "Split") return opset >= 13 ? "Split split" : "";
  return (op == "Unsqueeze" || op == "Squeeze") && opset >= 13 ? op : "";
}
template <class T>
inline constexpr bool is_open = false;
template <>
inline constexpr bool is_open<pattern::any_t> = true;
template <>
inline constexpr bool is_open<pattern::maybe_t<pattern::any_t>> = true;

template <class Pred>
inline constexpr bool is_code = false;
template <class F>
inline constexpr bool is_code<pattern::node_check<pattern::node_where<F>>> = true;
template <class Preds>
inline constexpr bool states_code = false;
template <class... Ps>
inline constexpr bool states_code<pattern::pack<Ps...>> = (is_code<Ps> || ...);

// What a view of dims `d` is tried with, likeliest first: a Reshape merges two or three adjacent
// dims or splits one in two (into sizes the instance has first), an Expand broadcasts a 1 and a
// Tile repeats an axis to one of them, an Unsqueeze inserts an axis, a Squeeze drops a 1, a Split
// halves an axis, a Gather takes one of the first two of its axis, an axis attribute is any axis
// from the last.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::vector<std::vector<std::int64_t>> view_candidates(
    std::string_view op, const std::vector<std::int64_t>& d,
    const std::vector<std::int64_t>& sizes) {
  std::vector<std::vector<std::int64_t>> out;
  const auto add = [&](std::vector<std::int64_t> c) {
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(std::move(c));
  };
  const auto known = [&](std::int64_t x) {
    return std::find(sizes.begin(), sizes.end(), x) != sizes.end();
  };
  const std::size_t r = d.size();
  if (op == "Reshape") {
    for (const std::size_t width : {2u, 3u})
      for (std::size_t i = 0; i + width <= r; ++i) {
        std::vector<std::int64_t> c(d.begin(), d.begin() + std::ptrdiff_t(i));
        std::int64_t product = 1;
        for (std::size_t k = i; k < i + width; ++k) product *= d[k];
        c.push_back(product);
        c.insert(c.end(), d.begin() + std::ptrdiff_t(i + width), d.end());
        add(std::move(c));
      }
    for (const bool both_known : {true, false})
      for (std::size_t i = 0; i < r; ++i)
        for (const std::int64_t a : sizes) {
          if (a <= 1 || a >= d[i] || d[i] % a != 0 || known(d[i] / a) != both_known) continue;
          std::vector<std::int64_t> c(d.begin(), d.begin() + std::ptrdiff_t(i));
          c.push_back(a);
          c.push_back(d[i] / a);
          c.insert(c.end(), d.begin() + std::ptrdiff_t(i + 1), d.end());
          add(std::move(c));
        }
    add(d);
  } else if (op == "Expand" || op == "Tile") {
    const bool tile = op == "Tile";
    const std::vector<std::int64_t> same = tile ? std::vector<std::int64_t>(r, 1) : d;
    add(same);
    for (std::size_t i = 0; i < r; ++i)
      for (const std::int64_t v : sizes)
        if (v > 1 && (tile || d[i] == 1)) {
          std::vector<std::int64_t> c = same;
          c[i] = v;
          add(std::move(c));
        }
  } else if (op == "Unsqueeze") {
    for (std::size_t k = 0; k <= r; ++k) add({std::int64_t(k)});
  } else if (op == "Squeeze") {
    for (std::size_t k = 0; k < r; ++k)
      if (d[k] == 1) add({std::int64_t(k)});
  } else if (op.ends_with(" axis")) {
    for (std::size_t k = 1; k <= r; ++k) add({-std::int64_t(k)});
  } else if (op == "Split split" || op == "Split pieces") {
    for (std::size_t k = r; k-- > 0;)
      if (d[k] % 2 == 0) add({d[k] / 2, d[k] / 2});
    // Read at its first output alone, a Split may be of one piece, the whole of an axis: what
    // an exporter writes for a chunk of one, and what a rule that removes it asks for.
    if (op == "Split pieces")
      for (std::size_t k = r; k-- > 0;) add({d[k]});
  } else if (op == "Gather indices") {
    add({0});
    add({1});
  } else if (op.starts_with("Slice") && r > 0 && d.back() % 2 == 0) {
    // A half of the last axis (rotate_half's, a pair's): [0, h) or [h, L) of axis -1, which a
    // Slice of three inputs (axis 0) does not name.
    const std::int64_t h = d.back() / 2;
    if (op == "Slice starts") {
      add({0});
      add({h});
    } else if (op == "Slice ends") {
      add({h});
      add({d.back()});
    } else if (op == "Slice axes") {
      add({-1});
    } else if (op == "Slice steps") {
      add({1});
    }
  }
  return out;
}

FUSEKIT_ENGINE_INLINE std::optional<std::vector<std::int64_t>> static_dims(const graph& g,
                                                                           std::string_view name) {
  const auto id = g.find_value(name);
  const facts& f = facts_of(g);
  const auto rank = id ? f.rank(*id) : std::nullopt;
  if (!rank) return std::nullopt;
  std::vector<std::int64_t> dims;
  for (std::size_t i = 0; i < *rank; ++i) {
    const auto size = f.dim_of(*id, int(i))->constant();
    if (!size) return std::nullopt;
    dims.push_back(*size);
  }
  return dims;
}

// The dims the facts prove for `name` in what is written so far. They are read from the nodes it
// is computed from alone, as the facts derive a value from what it reads: a view's candidates do
// not change with what is below it, which the search of the views below varies, and each such
// graph is judged once for the whole search, whose instances write the same upstreams again and
// again (the search of views asks millions of times; rebuilding the whole model each time was
// most of a check's time). A graph with subgraphs, which read values by name from within, is
// judged whole.
FUSEKIT_ENGINE_INLINE std::optional<std::vector<std::int64_t>> written_dims(state& s,
                                                                            std::string_view name) {
  const onnx::GraphProto& all = s.b.proto();
  const auto nests = [](const onnx::NodeProto& n) {
    return std::any_of(n.attribute().begin(), n.attribute().end(),
                       [](const auto& a) { return a.has_g() || a.graphs_size() > 0; });
  };
  if (std::any_of(all.node().begin(), all.node().end(), nests)) {
    const onnx::ModelProto m = s.b.build();
    return static_dims(graph(m), name);
  }
  std::unordered_map<std::string_view, int> producer;
  for (int i = 0; i < all.node_size(); ++i)
    for (const std::string& out : all.node(i).output()) producer.emplace(out, i);
  std::vector<char> keep(std::size_t(all.node_size()), 0);
  std::unordered_set<std::string_view> read{name};
  for (std::vector<std::string_view> work{name}; !work.empty();) {
    const auto it = producer.find(work.back());
    work.pop_back();
    if (it == producer.end() || keep[std::size_t(it->second)]) continue;
    keep[std::size_t(it->second)] = 1;
    for (const std::string& in : all.node(it->second).input())
      if (!in.empty() && read.insert(in).second) work.push_back(in);
  }
  onnx::ModelProto m = s.b.build_without_graph();
  onnx::GraphProto& upstream = *m.mutable_graph();
  upstream.set_name(all.name());
  for (int i = 0; i < all.node_size(); ++i)
    if (keep[std::size_t(i)]) *upstream.add_node() = all.node(i);
  for (const auto& t : all.initializer())
    if (read.contains(t.name())) *upstream.add_initializer() = t;
  for (const auto& info : all.input())
    if (read.contains(info.name())) *upstream.add_input() = info;
  for (const auto& info : all.value_info())
    if (read.contains(info.name())) *upstream.add_value_info() = info;
  std::string key(name);
  key += '\0';
  key += m.SerializeAsString();
  auto& known = s.plan.proven_dims;
  if (const auto seen = known.find(key); seen != known.end()) return seen->second;
  auto dims = static_dims(graph(m), name);
  known.emplace(std::move(key), dims);
  return dims;
}

FUSEKIT_ENGINE_INLINE std::vector<std::vector<std::int64_t>> candidates_of(state& s,
                                                                           const view& v) {
  const auto dims = written_dims(s, v.data);
  return dims ? view_candidates(v.op, *dims, s.o.shape) : std::vector<std::vector<std::int64_t>>{};
}

FUSEKIT_ENGINE_INLINE std::optional<std::vector<std::int64_t>> writer::dims(
    std::string_view capture) const {
  const auto bound = s_.bound.find(capture);
  if (bound == s_.bound.end())
    throw error("selfcheck: a written source reads the dims of '" + std::string(capture) +
                "', which is not written before it");
  return written_dims(s_, bound->second.name);
}

FUSEKIT_ENGINE_INLINE std::optional<std::int64_t> writer::proven_dim(std::string_view capture,
                                                                     int axis) const {
  if (!written(capture))
    throw error("selfcheck: a written source reads dim " + std::to_string(axis) + " of '" +
                std::string(capture) + "', which is not written before it");
  const auto all = dims(capture);
  const std::int64_t rank = all ? std::int64_t(all->size()) : 0;
  const std::int64_t at = axis < 0 ? rank + axis : axis;
  if (at < 0 || at >= rank) return std::nullopt;
  return (*all)[std::size_t(at)];
}

FUSEKIT_ENGINE_INLINE std::int64_t writer::dim(std::string_view capture, int axis) const {
  if (const auto size = proven_dim(capture, axis)) return *size;
  throw error("selfcheck: a written source reads dim " + std::to_string(axis) + " of '" +
              std::string(capture) + "', which has no such dim proven a number");
}

FUSEKIT_ENGINE_INLINE double writer::scalar(std::string_view capture) const {
  const auto bound = s_.bound.find(capture);
  const onnx::ModelProto m = s_.b.build();
  const graph g(m);
  const auto v = bound == s_.bound.end() ? std::nullopt : g.find_value(bound->second.name);
  const std::optional<double> x = v ? facts_of(g).real_scalar(*v) : std::nullopt;
  if (!x)
    throw error("selfcheck: a written source reads the number '" + std::string(capture) +
                "' holds, " +
                (bound == s_.bound.end() ? std::string("which is not written before it")
                                         : "which is no constant scalar"));
  return *x;
}

FUSEKIT_ENGINE_INLINE void hold(state& s, const view& v, const std::vector<std::int64_t>& values) {
  if (v.op.ends_with(" axis")) {
    for (onnx::AttributeProto& a : *s.b.proto().mutable_node(v.holder)->mutable_attribute())
      if (a.name() == "axis") a.set_i(values.at(0));
    return;
  }
  // A Gather of a 0-d index drops the axis, as the patterns that take one element read it.
  const std::vector<std::int64_t> dims =
      v.op == "Gather indices" ? std::vector<std::int64_t>{}
                               : std::vector<std::int64_t>{std::int64_t(values.size())};
  onnx::TensorProto& t = *s.b.proto().mutable_initializer(v.holder);
  t = build::make_tensor(t.name(), dtype::int64, dims,
                         std::vector<double>(values.begin(), values.end()));
  // A Split has an output for each piece (none is read past the first: pieces_of_split).
  if (v.op == "Split pieces")
    for (onnx::NodeProto& n : *s.b.proto().mutable_node())
      if (n.op_type() == "Split" && n.input_size() > 1 && n.input(1) == t.name()) {
        while (n.output_size() > int(values.size())) n.mutable_output()->RemoveLast();
        while (n.output_size() < int(values.size()))
          n.add_output(n.name() + "_" + std::to_string(n.output_size()));
      }
}
#else
std::vector<std::vector<std::int64_t>> view_candidates(std::string_view op,
                                                       const std::vector<std::int64_t>& d,
                                                       const std::vector<std::int64_t>& sizes);
std::optional<std::vector<std::int64_t>> static_dims(const graph& g, std::string_view name);
std::optional<std::vector<std::int64_t>> written_dims(state& s, std::string_view name);
std::vector<std::vector<std::int64_t>> candidates_of(state& s, const view& v);
void hold(state& s, const view& v, const std::vector<std::int64_t>& values);
#endif

// A view's shape or axes: an initializer holding its first candidate, or, replayed, the one the
// instance took.
inline void choose_view(state& s, view v) {
  if (s.views.size() < s.view_replay.size()) v.choice = s.view_replay[s.views.size()];
  if (const auto candidates = candidates_of(s, v); !candidates.empty()) {
    v.choice = std::min(v.choice, int(candidates.size()) - 1);
    hold(s, v, candidates[std::size_t(v.choice)]);
  }
  s.views.push_back(v);
}
// A Split's sizes, opened as halves before the Split was written, searched as its pieces once it
// is (views_from: the first view its own inputs opened): where the pattern reads its first output
// alone and binds it nowhere else, whose other outputs then nothing reads.
inline void pieces_of_split(state& s, std::size_t views_from, const std::string& sizes) {
  for (std::size_t k = views_from; k < s.views.size(); ++k) {
    view& v = s.views[k];
    if (v.op != "Split split" || s.b.proto().initializer(v.holder).name() != sizes) continue;
    v.op = "Split pieces";
    if (k < s.view_replay.size()) v.choice = s.view_replay[k];
    if (const auto candidates = candidates_of(s, v); !candidates.empty()) {
      v.choice = std::min(v.choice, int(candidates.size()) - 1);
      hold(s, v, candidates[std::size_t(v.choice)]);
    }
  }
}
inline build::value open_view(state& s, std::string_view op, const build::value& data) {
  const view v{.op = std::string(op), .data = data.name, .holder = s.b.proto().initializer_size()};
  const std::size_t space = op.find(' ');
  const std::string_view part = space != std::string_view::npos        ? op.substr(space + 1)
                                : op == "Unsqueeze" || op == "Squeeze" ? "axes"
                                                                       : "shape";
  const build::value held = s.b.initializer(s.fresh(part), dtype::int64, {0}, {});
  choose_view(s, v);
  return held;
}

// Which node reads a view's initializer (an axis view: the node that holds it).
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::string reader_of(state& s, const view& v) {
  const onnx::GraphProto& g = s.b.proto();
  if (v.op.ends_with(" axis")) return g.node(v.holder).name();
  const std::string& held = g.initializer(v.holder).name();
  for (const onnx::NodeProto& n : g.node())
    for (const std::string& in : n.input())
      if (in == held) return n.name();
  return {};
}
// The nodes `node` reads from (`down`: that read it), itself included, by name: what its check
// can depend on, its own inputs or the walk from the root down to it.
FUSEKIT_ENGINE_INLINE std::set<std::string> reach_of(state& s, const std::string& node, bool down) {
  const onnx::GraphProto& g = s.b.proto();
  std::multimap<std::string, const onnx::NodeProto*> next;  // by the value between them
  for (const onnx::NodeProto& n : g.node())
    for (const std::string& v : down ? n.input() : n.output()) next.emplace(v, &n);
  std::set<std::string> seen;
  std::vector<const onnx::NodeProto*> frontier;
  for (const onnx::NodeProto& n : g.node())
    if (n.name() == node) frontier.push_back(&n);
  while (!frontier.empty()) {
    const onnx::NodeProto* n = frontier.back();
    frontier.pop_back();
    if (!seen.insert(n->name()).second) continue;
    for (const std::string& v : down ? n->output() : n->input())
      for (auto [at, end] = next.equal_range(v); at != end; ++at) frontier.push_back(at->second);
  }
  return seen;
}
#else
std::string reader_of(state& s, const view& v);
std::set<std::string> reach_of(state& s, const std::string& node, bool down);
#endif

// The views from `first` on that nothing settled yet, tried together until `judge` accepts the
// graph (it returns the refusal, nullopt where it accepts): the combinations of their candidates
// by the sum of the candidates' ranks, likeliest first (repeat_kv's Unsqueeze, Expand and
// Reshape under the dynamo detour's two Reshapes need the third, first, fifth and sixth), at most
// view_tries graphs, for a dozen views at most; then, from their first candidates, one view at a
// time where the refusal points (repair_views); settled either way, where nothing was found on
// their first candidates. The judge is a function object of one type, so that the search is
// compiled once for every rule (in fusekit::engine, where a program links it).
inline constexpr int view_tries = 256;
using view_judge = std::function<std::optional<refusal>()>;

// A dozen views at once (an interleaved rotation's pairs, their Squeeze and Unsqueeze axes, the
// halves' bounds) are far past the ranks' sums: the refusal names the node whose check failed,
// and only the views it reads (itself, then what is upstream of it) can mend it. Each candidate
// of its views is tried alone and beside each of another of its own views' (a Slice's start and
// end; its bounds, of the dims the Reshape above it makes; of a node without views, those above
// it: an Unsqueeze's axis and the Reshape after it); a change is kept where the refusal moves to
// a node it never named (one it named again is a check the change broke anew), until the graph
// is accepted, no change moves it, or `budget` graphs are spent.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE bool repair_views(state& s, const std::vector<std::size_t>& open,
                                        const view_judge& judge, int& budget) {
  std::vector<std::vector<std::int64_t>> held(open.size());
  for (std::size_t k = 0; k < open.size(); ++k) {
    view& v = s.views[open[k]];
    if (const auto candidates = candidates_of(s, v); !candidates.empty()) {
      hold(s, v, candidates.front());
      v.choice = 0;
      held[k] = candidates.front();
    }
  }
  if (budget-- <= 0) return false;
  std::optional<refusal> why = judge();
  // The graph's nodes stay as they are while views change: who reads each view, once.
  std::vector<std::string> readers;
  for (const std::size_t k : open) readers.push_back(reader_of(s, s.views[k]));
  std::set<std::string> blamed;
  while (why && budget > 0) {
    blamed.insert(why->node);
    // Its own views, then those upstream of it, then those below it (a walk the guard ends at a
    // node passed through them); the others cannot mend its check.
    const std::set<std::string> upstream = reach_of(s, why->node, false),
                                downstream = reach_of(s, why->node, true);
    std::vector<std::size_t> order, own;
    for (const int rank : {0, 1, 2})
      for (std::size_t k = 0; k < open.size(); ++k) {
        const std::string& reader = readers[k];
        const int r = reader == why->node           ? 0
                      : upstream.contains(reader)   ? 1
                      : downstream.contains(reader) ? 2
                                                    : 3;
        if (r == rank) order.push_back(k);
        if (rank == 0 && r == 0) own.push_back(k);
      }
    // A node of no views of its own (a Cos of angles a Reshape made) is mended by two above it.
    if (own.empty())
      for (const std::size_t k : order)
        if (upstream.contains(readers[k])) own.push_back(k);
    bool moved = false;
    // Holds candidate c of view k; kept, with what it changed, where the refusal moved.
    const auto move = [&](std::size_t k, std::size_t c, const std::vector<std::int64_t>& to) {
      hold(s, s.views[open[k]], to);
      --budget;
      std::optional<refusal> next = judge();
      if (next && blamed.contains(next->node)) return false;
      s.views[open[k]].choice = int(c);
      held[k] = to;
      why = std::move(next);
      return moved = true;
    };
    for (std::size_t i = 0; !moved && i < order.size() && budget > 0; ++i) {
      const std::size_t k = order[i];
      const auto candidates = candidates_of(s, s.views[open[k]]);
      for (std::size_t c = 0; !moved && c < candidates.size() && budget > 0; ++c) {
        if (candidates[c] == held[k] || move(k, c, candidates[c])) continue;
        const std::vector<std::int64_t> was = held[k];
        held[k] = candidates[c];
        for (std::size_t j = 0; !moved && j < own.size() && budget > 0; ++j) {
          if (own[j] == k) continue;
          const auto theirs = candidates_of(s, s.views[open[own[j]]]);
          for (std::size_t d = 0; !moved && d < theirs.size() && budget > 0; ++d)
            if (theirs[d] != held[own[j]] && !move(own[j], d, theirs[d]))
              hold(s, s.views[open[own[j]]], held[own[j]]);
        }
        if (moved) {
          s.views[open[k]].choice = int(c);
        } else {
          held[k] = was;
          hold(s, s.views[open[k]], was);
        }
      }
      if (!moved && !candidates.empty()) hold(s, s.views[open[k]], held[k]);
    }
    if (!moved) return false;
  }
  return !why;
}

FUSEKIT_ENGINE_INLINE bool settle_views(state& s, std::size_t first, const view_judge& judge) {
  std::vector<std::size_t> open;
  for (std::size_t k = first; k < s.views.size(); ++k)
    if (!s.views[k].settled) open.push_back(k);
  if (open.empty()) return false;
  const auto left = [&] {
    return s.view_graphs_left == nullptr
               ? view_tries
               : int(std::min<std::size_t>(view_tries, *s.view_graphs_left));
  };
  const auto spend = [&](int given, int budget) {
    if (s.view_graphs_left != nullptr)
      *s.view_graphs_left -=
          std::min<std::size_t>(*s.view_graphs_left, std::size_t(given - std::max(budget, 0)));
  };
  const int given = left();
  int budget = given;
  bool reached = false;  // whether a combination of this sum exists
  // A view's candidates follow from the views before it alone (what it views was written before
  // them, and only they change here), so each is derived once for the choices taken above it,
  // not again for every sum and every combination below it.
  std::map<std::vector<int>, std::vector<std::vector<std::int64_t>>> derived;
  std::vector<int> taken;
  const auto search = [&](const auto& self, std::size_t k, std::size_t rest) -> bool {
    if (k == open.size()) {
      if (rest != 0) return false;
      reached = true;
      return budget-- > 0 && !judge();
    }
    view& v = s.views[open[k]];
    auto [at, fresh] = derived.try_emplace(taken);
    if (fresh) at->second = candidates_of(s, v);
    const std::vector<std::vector<std::int64_t>>& candidates = at->second;
    if (candidates.empty()) {
      taken.push_back(-1);
      const bool found = self(self, k + 1, rest);
      taken.pop_back();
      return found;
    }
    for (std::size_t c = 0; c < candidates.size() && c <= rest && budget > 0; ++c) {
      hold(s, v, candidates[c]);
      v.choice = int(c);
      taken.push_back(int(c));
      const bool found = self(self, k + 1, rest - c);
      taken.pop_back();
      if (found) return true;
    }
    return false;
  };
  // Past a dozen views the sums reach two changed views at most within view_tries (364
  // combinations of 12 sum to 3): the repair reaches farther, for fewer graphs.
  bool found = false;
  for (std::size_t sum = 0; !found && budget > 0 && open.size() <= 12; ++sum) {
    reached = false;
    found = search(search, 0, sum);
    if (!reached) break;
  }
  spend(given, budget);
  if (!found) {
    const int again = left();
    budget = again;
    found = repair_views(s, open, judge, budget);
    spend(again, budget);
  }
  for (const std::size_t k : open) {
    view& v = s.views[k];
    if (!found)
      if (const auto candidates = candidates_of(s, v); !candidates.empty()) {
        hold(s, v, candidates.front());
        v.choice = 0;
      }
    v.settled = true;
  }
  return found;
}
#else
bool repair_views(state& s, const std::vector<std::size_t>& open, const view_judge& judge,
                  int& budget);
bool settle_views(state& s, std::size_t first, const view_judge& judge);
#endif

// What an op reads, in two passes: first the inputs that are ops, then its leaves and views,
// which take their shapes from those (a view's from what it regroups, a broadcasting op's leaf
// first the shape of the op it sits beside: a mask as large as the scores it is added to).
template <class Spec, std::size_t Slot = 0, class Inputs>
void inputs(const Inputs& in, state& s, want w, std::vector<build::value>& out, bool leaves) {
  if constexpr (!std::is_same_v<Inputs, pattern::pack<>>) {
    using head = std::remove_cvref_t<decltype(in.head)>;
    if ((is_leaf<head> || is_open<head>) == leaves) {
      if (const std::string_view view = view_of(Spec::name, Slot, s.opset);
          is_open<head> && !view.empty() && !out.front().name.empty()) {
        out[Slot] = open_view(s, view, out.front());
      } else {
        want slot = w;
        if (!follows_output_type(Spec::name, Spec::domain, s.opset, Slot))
          slot.type = dtype::undefined;
        if (const dtype t = only_type(Spec::name, Spec::domain, s.opset, Slot);
            t != dtype::undefined)
          slot.type = t;
        out[Slot] = detail::make(in.head, s, slot);
      }
    }
    inputs<Spec, Slot + 1>(in.tail, s, w, out, leaves);
  }
}

inline bool broadcasts(std::string_view op) {
  static constexpr std::string_view ops[] = {
      "Add", "Sub", "Mul",   "Div",  "Pow",     "Where",          "Max",         "Min",
      "And", "Or",  "Equal", "Less", "Greater", "GreaterOrEqual", "LessOrEqual", "Mod"};
  return std::find(std::begin(ops), std::end(ops), op) != std::end(ops);
}

template <class Spec, class Inputs>
void inputs(const Inputs& in, state& s, want w, std::vector<build::value>& out) {
  out.assign(pattern::pack_traits<Inputs>::size, build::value{""});
  inputs<Spec>(in, s, w, out, false);
  const std::optional<std::vector<std::int64_t>> outer = s.sibling;
  s.sibling.reset();
  // The largest of them: a scalar beside a leaf (a constant factor) says nothing of its shape.
  if (broadcasts(Spec::name)) {
    const onnx::ModelProto m = s.b.build();
    const graph g(m);
    for (const build::value& v : out)
      if (!v.name.empty())
        if (auto dims = static_dims(g, v.name);
            dims && !dims->empty() && (!s.sibling || dims->size() > s.sibling->size()))
          s.sibling = std::move(dims);
  }
  inputs<Spec>(in, s, w, out, true);
  s.sibling = outer;
}

// Where a Reduce op takes its axes: an input from ReduceSum 13 and the others 18 on.
inline bool axes_as_input(std::string_view op, std::int64_t opset) {
  return opset >= (op == "ReduceSum" ? 13 : 18);
}

// The name an op's pattern binds its node to, "" where it binds none.
template <class Pred>
inline constexpr std::string_view node_bound_as{};
template <pattern::fixed_string Name>
inline constexpr std::string_view node_bound_as<pattern::bind_node<Name>> = Name.view();
template <class Preds>
inline constexpr std::string_view bound_name{};
template <class... Ps>
inline constexpr std::string_view bound_name<pattern::pack<Ps...>> = [] {
  std::string_view name;
  ((name = name.empty() ? node_bound_as<Ps> : name), ...);
  return name;
}();

// Output `slot` of the node bound to `name` where one of that op is written already (a Split
// whose two outputs two places read), with as many outputs as that takes.
inline std::optional<build::value> bound_output(state& s, std::string_view name,
                                                std::string_view op, std::string_view domain,
                                                std::uint32_t slot) {
  const auto at = s.bound_nodes.find(name);
  if (at == s.bound_nodes.end()) return std::nullopt;
  onnx::NodeProto& node = *s.b.proto().mutable_node(at->second);
  if (node.op_type() != op || node.domain() != domain) return std::nullopt;
  while (std::uint32_t(node.output_size()) <= slot)
    node.add_output(node.name() + "_" + std::to_string(node.output_size()));
  return build::value{node.output(int(slot))};
}

template <class Spec, class Inputs, class Preds, bool Commute>
struct gen<pattern::op_pattern<Spec, Inputs, Preds, Commute>> {
  using P = pattern::op_pattern<Spec, Inputs, Preds, Commute>;
  static build::value make(const P& p, state& s, want w) {
    if constexpr (!bound_name<Preds>.empty())
      if (auto out = bound_output(s, bound_name<Preds>, Spec::name, Spec::domain, p.slot))
        return *out;
    const bool root = s.depth++ == 0;
    const dtype outer = s.type;
    const std::size_t views_from = s.views.size();
    node_parts parts;
    predicates<Spec>(p.preds, s, parts);
    // What an op reads is of its output's type, but for a Cast, which makes that type.
    want in;
    in.type = Spec::name == "Cast" ? dtype::undefined : w.type;
    std::vector<build::value> args;
    if constexpr (P::variadic) {
      // A Concat's inputs have an axis to join along: a leaf of no declared rank is a vector.
      want each = in;
      if (Spec::name == "Concat" && each.rank < 0) each.rank = 1;
      const auto& head = p.inputs.head;
      // A list's elements from the list's source, where the rule gives one (each written as a
      // leaf that names the list: gen<any_t> asks the source).
      const auto element_of = [&](std::string_view list, const auto& element) {
        s.naming.emplace_back(std::string(list), s.depth);
        const build::value v = detail::make(element, s, each);
        s.naming.pop_back();
        return v;
      };
      using Head = std::remove_cvref_t<decltype(head)>;
      if constexpr (pattern::is_around<Head>) {
        // around<>'s input first, between two others, or last.
        static constexpr pattern::any_t other{};
        const int at = s.plan.choose(head, 3, " first | between two inputs | last");
        if (at > 0) args.push_back(element_of(Head::before, other));
        args.push_back(detail::make(head.element, s, each));
        if (at < 2) args.push_back(element_of(Head::after, other));
      } else {
        args.push_back(element_of(Head::name, head.element));
        args.push_back(element_of(Head::name, head.element));
      }
    } else {
      inputs<Spec>(p.inputs, s, in, args);
    }
    if constexpr (Commute) {
      if (s.plan.choose(p, 2, " operands as written | swapped") == 1) std::swap(args[0], args[1]);
    }
    while (!args.empty() && args.back().name.empty()) args.pop_back();
    if (parts.has_axes) {
      // Input 1 is the axes' own, whatever the pattern wrote there (maybe(any()), as the pattern
      // README asks): the attribute before the op's opset took them as an input, that input after.
      args.resize(1);
      if (axes_as_input(Spec::name, s.opset)) {
        args.push_back(s.b.initializer(s.fresh("axes"), dtype::int64,
                                       {std::int64_t(parts.axes.size())},
                                       std::vector<double>(parts.axes.begin(), parts.axes.end())));
      } else {
        parts.attrs.emplace_back("axes", parts.axes);
      }
    }
    const auto named = [&](std::string_view a) {
      for (const build::attr& x : parts.attrs)
        if (x.proto.name() == a) return true;
      return false;
    };
    // Attributes ONNX requires and no predicate gave.
    if (Spec::name == "Cast" && !named("to"))
      parts.attrs.emplace_back("to", w.type == dtype::undefined ? outer : w.type);
    // A Constant's tensor: ones, of the leaves' shape.
    if (Spec::name == "Constant" && !named("value")) {
      std::size_t count = 1;
      for (std::int64_t d : s.o.shape) count *= std::size_t(d);
      parts.attrs.emplace_back(
          "value", build::make_tensor("", w.type == dtype::undefined ? outer : w.type, s.o.shape,
                                      std::vector<double>(count, 1.0)));
    }
    // A pool's window: 3 along each spatial axis of what it reads, as many as the facts prove
    // it has (those of the leaves' shape where they prove none).
    if ((Spec::name == "MaxPool" || Spec::name == "AveragePool") && !named("kernel_shape") &&
        !args.empty()) {
      const onnx::ModelProto m = s.b.build();
      const graph g(m);
      const auto id = g.find_value(args.front().name);
      const auto rank = id ? facts_of(g).rank(*id) : std::nullopt;
      const std::size_t spatial = rank.value_or(s.o.shape.size());
      parts.attrs.emplace_back("kernel_shape",
                               std::vector<std::int64_t>(spatial > 2 ? spatial - 2 : 1, 3));
    }
    // An axis the pattern leaves to code is searched as a view's shape is: the sequence axis of a
    // cache's Concat, the last of a pair's halves, the pair's axis a Split or Gather takes apart.
    constexpr bool axis_searched =
        Spec::name == "Concat" || Spec::name == "Split" || Spec::name == "Gather";
    const bool axis_open = axis_searched && !named("axis");
    if (axis_open) parts.attrs.emplace_back("axis", std::int64_t(-1));
    // A Split of one output is none: two at least.
    const int outputs = int(p.slot) + 1 + (Spec::name == "Split" && p.slot == 0);
    const auto outs =
        s.b.ops(Spec::name, args, {}, {.domain = std::string(Spec::domain), .outputs = outputs});
    const int index = s.b.proto().node_size() - 1;
    auto& node = *s.b.proto().mutable_node(index);
    for (const build::attr& a : parts.attrs) *node.add_attribute() = a.proto;
    if constexpr (Spec::name == "Split" && bound_name<Preds>.empty())
      if (p.slot == 0 && args.size() > 1) pieces_of_split(s, views_from, args[1].name);
    if constexpr (!bound_name<Preds>.empty()) s.bound_nodes.emplace(bound_name<Preds>, index);
    if (axis_open && !args.empty())
      choose_view(
          s, {.op = std::string(Spec::name) + " axis", .data = args.front().name, .holder = index});
    // An op whose predicate is code settles the views below it: its own pattern is their judge
    // (the root's is the rule, in build()).
    if constexpr (states_code<Preds>)
      if (!root)
        settle_views(s, views_from, [&]() -> std::optional<refusal> {
          const onnx::ModelProto m = s.b.build();
          const graph g(m);
          const auto id = g.find_value(outs[p.slot].name);
          pattern::explanation why;
          if (id && pattern::match(p, g, g.producer(*id), &why)) return std::nullopt;
          return refusal{why.message, why.failing_node == no_id ? first_named(why.message)
                                                                : g.node(why.failing_node).name()};
        });
    s.type = outer;
    --s.depth;
    const build::value out = outs[p.slot];
    if (!root && p.policy == pattern::use_policy::contained &&
        s.breaks([&] { return "a reader outside the pattern of " + text_of(p); },
                 "is also read by"))
      s.read_outside.push_back(out);
    return out;
  }
};

}  // namespace fusekit::selfcheck::detail
