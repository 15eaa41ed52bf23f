// Judging an instance: the model built, the rule run on it, how near a refused one came, and
// ONNX Runtime's parity of what it replaced.
#pragma once

#include "fusekit/rewrite/selfcheck/views.hpp"

namespace fusekit::selfcheck::detail {

// ---- judging an instance

struct built {
  onnx::ModelProto model;
  std::string root;  // the root node's output
  site broken;
  int sites = 0;
  std::vector<int> sequence;
  std::string choices;
  std::size_t free_leaves = 0;
  std::vector<int> views;  // each open view's candidate
  // The captures it writes and the nodes it binds, where written for an example.
  std::set<std::string, std::less<>> names;
};

// Why the rule's pattern does not match at `root`'s producer or its guard refuses; nullopt where
// it accepts. The rule as any_rule erases it: its matcher and guard are compiled where it was
// erased (for the bundled rules, once, in the rule library), not again in each check.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::optional<refusal> refused(const rewrite::any_rule& rule, const graph& g,
                                                     const std::string& root) {
  const node_id at = g.producer(*g.find_value(root));
  if (at == no_id) return refusal{"no node gives the root", ""};
  pattern::explanation why;
  const rewrite::probe_result p = rule.probe(g, at, &why);
  if (!p.matched)
    return refusal{why.message, why.failing_node == no_id ? first_named(why.message)
                                                          : g.node(why.failing_node).name()};
  if (!p.guard) return refusal{p.guard.reason, first_named(p.guard.reason), p.guard.by_options};
  return std::nullopt;
}
#else
std::optional<refusal> refused(const rewrite::any_rule& rule, const graph& g,
                               const std::string& root);
#endif

// How near a written graph is to one the rule accepts, nearest least: first how far it is from
// a model (unsettled), then accepted before refused by the guard before unmatched, an unmatched
// one by how far its match got (pattern/context.hpp's progress, then the values it held).
struct closeness {
  std::size_t unsettled = 0;
  int verdict = 0;  // 0 accepted, 1 refused by the guard, 2 unmatched
  std::size_t short_of = 0, unheld = 0;
  auto operator<=>(const closeness&) const = default;
  static constexpr closeness farthest() {
    constexpr std::size_t far = std::numeric_limits<std::size_t>::max();
    return {far, 2, far, far};
  }
};
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE closeness closeness_of(const rewrite::any_rule& rule,
                                             const onnx::ModelProto& model,
                                             const std::string& root) {
  constexpr std::size_t far = std::numeric_limits<std::size_t>::max();
  const graph g(model);
  closeness c{.unsettled = unsettled(model, g)};
  if (c.unsettled > 0) return {c.unsettled, 2, far, far};
  const node_id at = g.producer(*g.find_value(root));
  if (at == no_id) return {c.unsettled, 2, far, far};
  pattern::explanation why;
  const rewrite::probe_result p = rule.probe(g, at, &why);
  if (!p.matched) return {c.unsettled, 2, far - why.progress, far - why.held};
  c.verdict = p.guard ? 0 : 1;
  return c;
}
#else
closeness closeness_of(const rewrite::any_rule& rule, const onnx::ModelProto& model,
                       const std::string& root);
#endif

// The value of the capture `name` written from its source in `all`, if it has one.
template <class... S>
std::optional<build::value> from_sources(const pattern::sources_t<S...>& all, std::string_view name,
                                         state& s, want w) {
  std::optional<build::value> out;
  std::apply(
      [&](const auto&... each) {
        ((out || each.name != name ? void() : void(out = make(each.pattern, s, w))), ...);
      },
      all.each);
  return out;
}

// The value of the capture `name` written from the source refusal `k` of `all` gives it, if any.
template <class... R>
std::optional<build::value> from_refusal(const pattern::refusals_t<R...>& all, int k,
                                         std::string_view name, state& s, want w) {
  std::optional<build::value> out;
  int i = 0;
  std::apply(
      [&](const auto&... each) {
        ((i++ == k ? void(out = from_sources(each.sources, name, s, w)) : void()), ...);
      },
      all.each);
  return out;
}

// The texts of R's refusals (pattern/sources.hpp), in the order it declares them.
template <class R>
std::vector<std::string_view> refusal_texts() {
  if constexpr (rewrite::rule_detail::declares_refusals<R>)
    return std::apply(
        [](const auto&... each) { return std::vector<std::string_view>{each.text...}; },
        R::refusals.each);
  else
    return {};
}

// `refusal`: the index of R's refusal whose sources write what they name, R's own sources the
// rest (-1: none).
template <class R>
built build(planner& plan, const options& o, const rewrite::any_rule& rule,
            const std::vector<leaf_form>& forms, int mutate, std::vector<int> views = {},
            std::size_t* view_graphs_left = nullptr, int refusal = -1) {
  std::string types = "float type", opsets = "opset";
  for (dtype t : o.types) types += (types.size() == 10 ? " " : "|") + std::string(dtype_name(t));
  for (std::int64_t v : o.opsets) opsets += (opsets.size() == 5 ? " " : "|") + std::to_string(v);
  const dtype t = o.types[std::size_t(plan.choose(o.types, o.types.size(), types, ""))];
  const std::int64_t opset =
      o.opsets[std::size_t(plan.choose(o.opsets, o.opsets.size(), opsets, ""))];
  state s(plan, o, t, opset);
  s.forms = forms;
  s.mutate = mutate;
  s.view_replay = std::move(views);
  s.view_graphs_left = view_graphs_left;
  if constexpr (rewrite::rule_detail::declares_sources<R>)
    s.source = [&s](std::string_view name, want w) { return from_sources(R::sources, name, s, w); };
  if constexpr (rewrite::rule_detail::declares_refusals<R>)
    if (refusal >= 0)
      s.source = [&s, refusal, own = std::move(s.source)](std::string_view name, want w) {
        if (auto v = from_refusal(R::refusals, refusal, name, s, w)) return v;
        return own ? own(name, w) : std::nullopt;
      };
  s.b.opset_import("com.microsoft", 1);
  const build::value root = make(R::pattern, s);
  const build::value output = s.read_root ? s.b.op("Identity", {root}) : root;
  for (const build::value& v : s.read_outside) s.extra_outputs.push_back(s.b.op("Identity", {v}));
  // The views no predicate below the root settled: the rule is their judge. A mutant keeps its
  // instance's (the rule must refuse it); one an op's predicate settles is derived again, from
  // what the broken predicate made of what it regroups.
  if (s.view_replay.empty())
    settle_views(s, 0, [&] {
      onnx::ModelProto m = s.b.build();
      m.mutable_graph()->add_output()->set_name(output.name);
      for (const build::value& v : s.extra_outputs)
        m.mutable_graph()->add_output()->set_name(v.name);
      return refused(rule, graph(m), root.name);
    });
  built out;
  for (const view& v : s.views) out.views.push_back(v.choice);
  out.model = s.b.build();
  out.sites = s.sites;
  out.broken = s.broken;
  out.sequence = plan.sequence();
  out.choices = plan.describe_taken();
  out.free_leaves = s.free_leaves;
  if (plan.steering() != nullptr) {  // read only against an example
    out.names = std::move(s.named);
    for (const auto& [name, value] : s.bound) out.names.insert(name);
    for (const auto& [name, index] : s.bound_nodes) out.names.insert(name);
  }
  // The outputs, typed as the facts prove them: ONNX Runtime and the checker want their types.
  const graph g(out.model);
  const facts& f = facts_of(g);
  for (const build::value& v : [&] {
         std::vector<build::value> all{output};
         all.insert(all.end(), s.extra_outputs.begin(), s.extra_outputs.end());
         return all;
       }()) {
    const value_id id = *g.find_value(v.name);
    auto& info = *out.model.mutable_graph()->add_output();
    info.set_name(v.name);
    auto& tensor = *info.mutable_type()->mutable_tensor_type();
    tensor.set_elem_type(int(g.type(id)));
    if (const auto rank = f.rank(id)) {
      auto& shape = *tensor.mutable_shape();
      for (std::size_t i = 0; i < *rank; ++i) {
        const auto size = f.dim_of(id, int(i))->constant();
        if (size)
          shape.add_dim()->set_dim_value(*size);
        else
          shape.add_dim();
      }
    }
  }
  out.root = root.name;
  return out;
}

// The leaf forms to try, fewest changed leaves first.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::vector<std::vector<leaf_form>> leaf_searches(std::size_t leaves,
                                                                        std::size_t most) {
  std::vector<std::vector<leaf_form>> all;
  for (std::size_t changed = 0; changed <= leaves && all.size() < most; ++changed) {
    std::vector<int> digits(leaves, 0);
    for (;;) {
      std::size_t nonzero = 0;
      for (int d : digits) nonzero += d != 0;
      if (nonzero == changed) {
        std::vector<leaf_form> forms;
        for (int d : digits) forms.push_back(leaf_form(d));
        all.push_back(std::move(forms));
        if (all.size() >= most) break;
      }
      std::size_t i = 0;
      while (i < leaves && ++digits[i] == leaf_forms) digits[i++] = 0;
      if (i == leaves) break;
    }
  }
  return all;
}
#else
std::vector<std::vector<leaf_form>> leaf_searches(std::size_t leaves, std::size_t most);
#endif

// The rule run as the driver runs it, every anchor explained.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE rewrite::report run(const rewrite::any_rule& rule, onnx::ModelProto& m) {
  fusekit::model whole{.proto = m, .path = {}};
  rewrite::report r = rewrite::fuse(whole, std::span(&rule, 1), {.explain = true});
  m = std::move(whole.proto);
  return r;
}
#else
rewrite::report run(const rewrite::any_rule& rule, onnx::ModelProto& m);
#endif

inline std::string reason_at(const rewrite::report& r, const std::string& root_text) {
  for (const rewrite::near_miss& n : r.near_misses)
    if (n.anchor == root_text) return n.reason;
  return r.near_misses.empty() ? std::string("no near miss") : r.near_misses.front().reason;
}

// The original as ONNX Runtime runs it: a Cast to the type its input has is an Identity, which
// its CPU provider fails to load in float16 (the float32 Casts it inserts around the node meet
// the node's own type). nullopt where the original has no such Cast.
FUSEKIT_ENGINE_INLINE std::optional<onnx::ModelProto> without_own_type_casts(
    const onnx::ModelProto& m);

// Runs each original and its fused form in ONNX Runtime on the same random inputs.
inline constexpr std::string_view parity_script =
    R"(import sys, pathlib, numpy as np, onnxruntime as ort
root = pathlib.Path(sys.argv[1])
tolerance = {np.float32: 1e-4, np.float16: 2e-2, np.float64: 1e-9}
def run(path, feeds):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]).run(None, feeds)
for line in (root / "pairs.txt").read_text().splitlines():
    name, fused, runs = line.split("\t")
    try:
        rng = np.random.default_rng(0)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(str(root / runs), options, providers=["CPUExecutionProvider"])
        feeds = {}
        for i in session.get_inputs():
            shape = [d if isinstance(d, int) else 2 for d in i.shape]
            kind = i.type[len("tensor("):-1]
            dtype = {"float": np.float32, "float16": np.float16, "double": np.float64, "int64": np.int64,
                     "int32": np.int32, "bool": np.bool_}[kind]
            feeds[i.name] = (rng.integers(0, 2, shape) if dtype in (np.int64, np.int32, np.bool_)
                             else rng.standard_normal(shape)).astype(dtype)
        expected = run(root / runs, feeds)
    except Exception as e:
        print(name + "\tnot run: ONNX Runtime cannot run the original: " + str(e).splitlines()[0][:200])
        continue
    try:
        got = run(root / fused, feeds)
    except Exception as e:
        print(name + "\tfailed: ONNX Runtime cannot run the fused model: " + str(e).splitlines()[0][:200])
        continue
    worst = ""
    for k, (a, b) in enumerate(zip(expected, got)):
        t = tolerance.get(a.dtype.type, 1e-4)
        if a.shape != b.shape:
            worst = "output %d has shape %s, expected %s" % (k, b.shape, a.shape)
        elif not np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=t, atol=t, equal_nan=True):
            worst = "output %d differs by up to %g" % (k, float(np.nanmax(np.abs(a.astype(np.float64) - b.astype(np.float64)))))
    print(name + "\t" + ("differs: " + worst if worst else "ok"))
)";

#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::optional<onnx::ModelProto> without_own_type_casts(
    const onnx::ModelProto& m) {
  const graph g(m);
  std::set<std::string, std::less<>> identities;
  for (node_id n = 0; n < g.node_count(); ++n)
    if (g.op_type(n) == "Cast" && g.passes_input_at_inference(n))
      identities.insert(std::string(g.name(g.output(n, 0))));
  if (identities.empty()) return std::nullopt;
  onnx::ModelProto out = m;
  for (onnx::NodeProto& node : *out.mutable_graph()->mutable_node())
    if (node.op_type() == "Cast" && identities.contains(node.output(0))) {
      node.set_op_type("Identity");
      node.clear_attribute();
    }
  return out;
}

FUSEKIT_ENGINE_INLINE std::map<std::string, std::string> run_parity(
    const options& o, const std::vector<std::string>& pairs) {
  {
    std::ofstream script(o.write_to / "parity.py");
    script << parity_script;
    std::ofstream list(o.write_to / "pairs.txt");
    for (const std::string& p : pairs) list << p << "\n";
  }
  const std::filesystem::path log = o.write_to / "parity.txt";
  const std::string command = "\"" + o.python + "\" \"" + (o.write_to / "parity.py").string() +
                              "\" \"" + o.write_to.string() + "\" > \"" + log.string() + "\" 2>&1";
  std::map<std::string, std::string> verdicts;
  const int status = std::system(command.c_str());
  std::ifstream in(log);
  std::string line;
  while (std::getline(in, line))
    if (const auto tab = line.find('\t'); tab != std::string::npos)
      verdicts[line.substr(0, tab)] = line.substr(tab + 1);
  if (status != 0 || verdicts.size() != pairs.size()) {
    std::string first;
    std::ifstream again(log);
    std::getline(again, first);
    throw error("selfcheck: running ONNX Runtime with " + o.python + " failed: " + first);
  }
  return verdicts;
}
#else
std::map<std::string, std::string> run_parity(const options& o,
                                              const std::vector<std::string>& pairs);
#endif

}  // namespace fusekit::selfcheck::detail
