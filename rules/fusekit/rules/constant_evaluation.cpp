#include "constant_evaluation.hpp"

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "all.hpp"
#include "constant_folding.hpp"
#include "fusekit/graph/permutation.hpp"

namespace fusekit::rules {

rewrite::any_rule constant_evaluation_rule(const fusion_options& options) {
  return rewrite::any_rule::of<constant_evaluation>(options);
}

namespace evaluation {

namespace {

// Past 2^53 a double no longer holds every integer.
constexpr double exact_integers = 0x1p53;

bool is_number_type(dtype t) { return is_float(t) || is_integer(t) || t == dtype::boolean; }

std::int64_t width_of(dtype t) { return t == dtype::boolean ? 1 : std::int64_t(dtype_bits(t) / 8); }

// A bound or an index read as an integer: an INT64_MAX slice end is as good as 2^62.
std::int64_t whole(double x) { return std::int64_t(std::clamp(x, -0x1p62, 0x1p62)); }

std::int64_t normalized_axis(std::int64_t axis, std::size_t rank) {
  return axis < 0 ? axis + std::int64_t(rank) : axis;
}

// The elements of a value the chain reads as it is: what the facts hold, or a constant's tensor.
std::optional<array> leaf(const graph& g, value_id v) {
  const facts& f = facts_of(g);
  const content_fact& c = f.content(v);
  if (c.known) {
    const auto dims = folding::static_dims(f, v);
    if (!dims || !is_number_type(g.type(v))) return std::nullopt;
    std::vector<double> values = c.reals;
    if (!c.real)
      for (const sym& e : c.ints) {
        const auto k = e.constant();
        if (!k) return std::nullopt;
        values.push_back(double(*k));
      }
    std::int64_t count = 1;
    for (std::int64_t d : *dims) count *= d;
    if (std::int64_t(values.size()) != count) return std::nullopt;
    return array(g.type(v), *dims, std::move(values));
  }
  const onnx::TensorProto* t = g.constant_tensor(v);
  if (t == nullptr || !is_number_type(dtype(t->data_type()))) return std::nullopt;
  return array(g, t);
}

// The inputs whose elements n reads: CastLike reads its second for its type alone.
std::span<const value_id> elements_read(const graph& g, node_id n) {
  const auto ins = g.inputs(n);
  return g.op_type(n) == "CastLike" ? ins.first(std::min<std::size_t>(ins.size(), 1)) : ins;
}

const onnx::AttributeProto* attribute_named(const graph& g, node_id n, std::string_view name) {
  for (const onnx::AttributeProto& a : g.node(n).attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

// The elements of output 0 of n from its inputs' (null for an omitted one), in the output's
// dims as the facts prove them; none where the node is no form the evaluator computes.
std::optional<array> computed(const graph& g, node_id n, const std::vector<const array*>& in,
                              const std::vector<std::int64_t>& dims) {
  const std::string_view op = g.op_type(n);
  const dtype type = g.type(g.output(n, 0));
  const auto input = [&](std::size_t i) -> const array* { return i < in.size() ? in[i] : nullptr; };
  const array* x = input(0);
  if (op == "ConstantOfShape") {
    const onnx::AttributeProto* value = attribute_named(g, n, "value");
    const double v = value == nullptr ? 0.0 : array(g, &value->t())[0];
    std::int64_t count = 1;
    for (std::int64_t d : dims) count *= d;
    return array(type, dims, std::vector<double>(std::size_t(count), v));
  }
  if (op == "Range") {
    if (!x || !input(2) || dims.size() != 1) return std::nullopt;
    std::vector<double> values(static_cast<std::size_t>(dims[0]));
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = (*x)[0] + double(i) * (*in[2])[0];
    return array(type, dims, std::move(values));
  }
  if (x == nullptr) return std::nullopt;
  if (op == "Identity") return *x;
  if (op == "Cast" || op == "CastLike") return x->as(type);
  if (op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" || op == "Flatten")
    return x->reshape(dims);
  if (op == "Expand") return x->broadcast_to(dims);
  if (op == "Transpose") {
    const auto perm = transpose_perm(g, n);
    if (!perm) return std::nullopt;
    return x->transpose({perm->begin(), perm->end()});
  }
  if (op == "Neg") return x->map([](double v) { return -v; });
  if (op == "Abs") return x->map([](double v) { return std::fabs(v); });
  if (op == "Not") return x->map([](double v) { return v == 0 ? 1.0 : 0.0; });
  if (op == "Concat") {
    std::vector<array> parts;
    for (const array* p : in) parts.push_back(*p);
    const auto axis = normalized_axis(g.attribute_int(n, "axis").value_or(0), x->rank());
    return array::concat(parts, std::size_t(axis));
  }
  if (op == "Gather") {
    const auto axis = normalized_axis(g.attribute_int(n, "axis").value_or(0), x->rank());
    return input(1) ? std::optional(x->take(*in[1], std::size_t(axis))) : std::nullopt;
  }
  if (op == "ScatterND") {
    const auto reduction = g.attribute_string(n, "reduction");
    if ((reduction && *reduction != "none") || !input(1) || !input(2)) return std::nullopt;
    return x->scatter_nd(*in[1], *in[2]);
  }
  if (op == "Slice") {
    if (!input(1) || !input(2) || dims.size() != x->rank()) return std::nullopt;
    std::vector<std::int64_t> start(x->rank(), 0), step(x->rank(), 1);
    for (std::int64_t k = 0; k < in[1]->size(); ++k) {
      const auto axis = input(3) ? normalized_axis(whole((*in[3])[k]), x->rank()) : k;
      if (axis < 0 || axis >= std::int64_t(x->rank())) return std::nullopt;
      const std::int64_t d = x->dims()[std::size_t(axis)], by = input(4) ? whole((*in[4])[k]) : 1;
      std::int64_t s = whole((*in[1])[k]);
      if (s < 0) s += d;
      s = by > 0 ? std::clamp<std::int64_t>(s, 0, d) : std::clamp<std::int64_t>(s, 0, d - 1);
      const std::int64_t count = dims[std::size_t(axis)];
      if (by == 0 || (count > 0 && (s + (count - 1) * by < 0 || s + (count - 1) * by >= d)))
        return std::nullopt;
      start[std::size_t(axis)] = s;
      step[std::size_t(axis)] = by;
    }
    return x->strided(start, step, dims);
  }
  const array* y = input(1);
  if (y == nullptr) return std::nullopt;
  if (op == "Where") return input(2) ? std::optional(array::where(*x, *y, *in[2])) : std::nullopt;
  if (op == "Add") return *x + *y;
  if (op == "Sub") return *x - *y;
  if (op == "Mul") return *x * *y;
  if (op == "Div") return *x / *y;
  using cmp = bool (*)(double, double);
  static constexpr std::pair<std::string_view, cmp> booleans[] = {
      {"Equal", [](double a, double b) { return a == b; }},
      {"Less", [](double a, double b) { return a < b; }},
      {"LessOrEqual", [](double a, double b) { return a <= b; }},
      {"Greater", [](double a, double b) { return a > b; }},
      {"GreaterOrEqual", [](double a, double b) { return a >= b; }},
      {"And", [](double a, double b) { return a != 0 && b != 0; }},
      {"Or", [](double a, double b) { return a != 0 || b != 0; }},
      {"Xor", [](double a, double b) { return (a != 0) != (b != 0); }}};
  for (const auto& each : booleans)
    if (op == each.first) {
      const cmp f = each.second;
      return array::zip(
          *x, *y, dtype::boolean, [f](double a, double b) { return double(f(a, b)); },
          each.first.data());
    }
  return std::nullopt;
}

}  // namespace

bool evaluates(std::string_view op) {
  static constexpr std::string_view ops[] = {"Identity",    "Cast",    "CastLike",
                                             "Reshape",     "Squeeze", "Unsqueeze",
                                             "Flatten",     "Expand",  "Transpose",
                                             "Concat",      "Slice",   "Gather",
                                             "ScatterND",   "Where",   "ConstantOfShape",
                                             "Range",       "Neg",     "Abs",
                                             "Not",         "Equal",   "Less",
                                             "LessOrEqual", "Greater", "GreaterOrEqual",
                                             "And",         "Or",      "Xor",
                                             "Add",         "Sub",     "Mul",
                                             "Div"};
  return std::find(std::begin(ops), std::end(ops), op) != std::end(ops);
}

bool ends_a_fixed_chain(const graph& g, node_id n) {
  // A view of one constant is constant-view-folding's, which copies its bytes.
  const std::string_view op = g.op_type(n);
  if ((op == "Transpose" || op == "Reshape" || op == "Unsqueeze" || op == "Flatten") &&
      folding::views_a_constant(g, n))
    return false;
  const facts& f = facts_of(g);
  const value_id out = g.output(n, 0);
  if (out == no_id || g.outputs(n).size() != 1 || !f.fixed(out) || f.content(out).known ||
      !is_number_type(g.type(out)))
    return false;
  // A reader whose elements the facts hold needs none of these; one evaluated with them is
  // their chain's, not its end, unless its output's name must live on (a graph output), which
  // keeps it a node.
  const bool read_on =
      std::any_of(g.consumers(out).begin(), g.consumers(out).end(), [&](const use& u) {
        const value_id read = g.output(u.node, 0);
        if (read != no_id && f.content(read).known) return false;
        if (read != no_id && (g.is_graph_output(read) || g.read_by_name_in_subgraph(read)))
          return true;
        return !(read != no_id && f.fixed(read) && g.domain(u.node).empty() &&
                 evaluates(g.op_type(u.node)));
      });
  return read_on && evaluated(g, out).has_value();
}

std::int64_t bytes_of(const graph& g, value_id v) {
  std::int64_t bytes = width_of(g.type(v));
  for (std::int64_t d : folding::static_dims(facts_of(g), v).value_or(std::vector<std::int64_t>{}))
    bytes *= d;
  return bytes;
}

std::optional<array> evaluated(const graph& g, value_id v) {
  const facts& f = facts_of(g);
  // First the chain's shape, read from the graph alone: its values in an order that computes
  // each after its inputs, and the nodes inside it. Nothing is read or computed for a chain that
  // is refused on sight.
  std::vector<value_id> order;
  std::unordered_set<value_id> planned;
  std::unordered_set<node_id> inside;
  std::vector<std::pair<value_id, bool>> work{{v, false}};
  while (!work.empty()) {
    const auto [at, inputs_planned] = work.back();
    work.pop_back();
    if (planned.contains(at)) continue;
    const node_id p = g.producer(at);
    const bool is_leaf = p == no_id || f.content(at).known || g.constant_tensor(at) != nullptr;
    if (!is_leaf && !inputs_planned) {
      if (!f.fixed(at) || !g.domain(p).empty() || !evaluates(g.op_type(p)) ||
          g.output(p, 0) != at || !is_number_type(g.type(at)) || !folding::static_dims(f, at))
        return std::nullopt;
      inside.insert(p);
      work.push_back({at, true});
      for (value_id in : elements_read(g, p))
        if (in != no_id && !planned.contains(in)) work.push_back({in, false});
      continue;
    }
    planned.insert(at);
    order.push_back(at);
  }
  for (value_id at : order) {
    const onnx::TensorProto* t = g.constant_tensor(at);
    if (t == nullptr || f.content(at).known ||
        element_count(*t) <= std::int64_t(facts::max_elements))
      continue;
    // Read by a computation on the inputs, it stays however this chain folds. A reader that
    // computes from constants only is another chain's, which folds too (relative position biases
    // index one table from every block).
    const auto readers = g.consumers(at);
    if (g.is_graph_output(at) || std::any_of(readers.begin(), readers.end(), [&](const use& u) {
          const value_id out = g.output(u.node, 0);
          return !inside.contains(u.node) && !(out != no_id && f.fixed(out));
        }))
      return std::nullopt;
  }
  std::unordered_map<value_id, array> done;
  for (value_id at : order) {
    const node_id p = g.producer(at);
    if (p == no_id || !inside.contains(p)) {
      std::optional<array> read = leaf(g, at);
      if (!read) return std::nullopt;
      done.emplace(at, std::move(*read));
      continue;
    }
    const std::vector<std::int64_t> dims = *folding::static_dims(f, at);
    std::vector<const array*> in;
    for (value_id i : elements_read(g, p)) in.push_back(i == no_id ? nullptr : &done.at(i));
    std::optional<array> result;
    try {
      result = computed(g, p, in, dims);
    } catch (const error&) {  // inputs no run of the model would accept: left to the runtime
      return std::nullopt;
    }
    if (!result || result->dims() != dims) return std::nullopt;
    // An integer division by zero has no value to write: left to the runtime, as one too large.
    if (is_integer(result->type()) &&
        std::any_of(result->values().begin(), result->values().end(),
                    [](double x) { return !(std::fabs(x) <= exact_integers); }))
      return std::nullopt;
    done.emplace(at, std::move(*result));
  }
  return std::move(done.at(v));
}

}  // namespace evaluation

}  // namespace fusekit::rules
