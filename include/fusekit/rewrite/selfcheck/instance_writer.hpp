// Writing one instance of a pattern: the leaves, constants and attributes its predicates ask,
// each op node with its inputs, and the mutation site a mutant breaks.
#pragma once

#include "fusekit/rewrite/selfcheck/planner.hpp"

namespace fusekit::selfcheck::detail {

// ---- building one instance

// What a value's predicates ask of the leaf that stands for it.
// A dim a constant takes from a leaf or constant written before it (same_dim<I, "other", J>): one
// more where a mutant breaks it.
struct dim_link {
  int dim;
  std::string other;
  int other_dim;
  bool off = false;
};

struct want {
  dtype type = dtype::undefined;
  int rank = -1;
  bool constant = false;  // a value the facts must know (proven_value): an initializer
  std::vector<dim_link> links;
};

// A leaf's shape, of those searched: the options' shape, its last dim alone, a scalar, and the
// options' shape with the two dims before its last exchanged (the other of the layouts
// [batch, heads, sequence, head size] and [batch, sequence, heads, head size]).
enum class leaf_form : std::uint8_t { full, last_dim, scalar, exchanged };
inline constexpr int leaf_forms = 4;

struct site {
  std::string breaks;
  std::string expect;
};

// A view whose shape or axes the pattern leaves open: the initializer that holds them (a
// Concat's axis: the node, whose attribute holds it), the value whose dims decide them, and the
// candidate it holds.
struct view {
  std::string op;
  std::string data;
  int holder = 0;  // the initializer's index; a Concat's: its node's
  int choice = 0;
  bool settled = false;  // an op's predicate, or a replay, decided it
};

// Why a graph was refused, and the node the reason is about ("" where it names none).
struct refusal {
  std::string reason;
  std::string node;
  bool by_options = false;  // verdict::no_with_these_options
};
// The first node a guard's reason names ('Slice_5'): the check that failed is about it.
inline std::string first_named(const std::string& reason) {
  const std::size_t open = reason.find('\'');
  const std::size_t close = open == std::string::npos ? open : reason.find('\'', open + 1);
  return close == std::string::npos ? std::string() : reason.substr(open + 1, close - open - 1);
}

struct state {
  build::model_builder b;
  planner& plan;
  const options& o;
  dtype type;
  std::int64_t opset;
  std::map<std::string, build::value, std::less<>> bound;
  // The nodes the pattern binds by name (.bind<"split">()), by index: a name bound twice is one
  // node, each place reading the output its pattern names.
  std::map<std::string, int, std::less<>> bound_nodes;
  // The names an optional op present or an any_of binds: with the two above, what an example
  // asks of the instance (pattern::example).
  std::set<std::string, std::less<>> named;
  std::vector<leaf_form> forms;  // of the free leaves, in order; missing ones: full
  std::size_t free_leaves = 0;
  // The dims written for each named leaf and constant, which a later one's same_dim reads.
  std::map<std::string, std::vector<std::int64_t>, std::less<>> leaf_dims;
  int mutate = -1;  // the mutation site to break, -1: none
  int sites = 0;
  site broken{};
  // What the mutant gives a reader outside the pattern, once the whole graph is written (the ops
  // above it settle their views by their own patterns, which that reader would fail), and the
  // readers' outputs.
  std::vector<build::value> read_outside, extra_outputs;
  // forwardable() on the root: its output is read by a node, which writes the graph output.
  bool read_root = false;
  std::size_t names = 0;
  int depth = 0;  // of the op being built: 0 is the root
  std::vector<view> views;
  std::vector<int> view_replay;  // each view's candidate, as an instance took it (a mutant's)
  std::size_t* view_graphs_left = nullptr;           // of the instance's options::view_graphs
  std::optional<std::vector<std::int64_t>> sibling;  // the dims a broadcasting op's leaf takes
  // The rule's sources (pattern/sources.hpp): writes a capture's value from its own, or nothing
  // where it has none. `sourcing`: the captures being written so, each written as a leaf inside
  // its own source. `naming`: the captures whose patterns are being written, each with the depth
  // at which a leaf is the captured value itself (capture<"v">(any_of(…, any()))).
  std::function<std::optional<build::value>(std::string_view, want)> source{};
  std::vector<std::string> sourcing;
  std::vector<std::pair<std::string, int>> naming;

  state(planner& p, const options& o, dtype t, std::int64_t opset)
      : b(opset), plan(p), o(o), type(t), opset(opset) {}

  // Whether the next mutation site is the one to break; records what breaking it must say.
  // A source's predicates are no sites: what refuses a graph without them is the guard.
  // `what`: the predicate's text, or what writes it (only the mutated site's is read).
  template <class What>
  bool breaks(const What& what, std::string expect) {
    if (!sourcing.empty() || sites++ != mutate) return false;
    if constexpr (std::is_invocable_v<const What&>)
      broken = {what(), std::move(expect)};
    else
      broken = {std::string(what), std::move(expect)};
    return true;
  }

  std::vector<std::int64_t> shape_for(const want& w) {
    std::vector<std::int64_t> dims = free_shape(w);
    for (const dim_link& l : w.links) {
      const auto other = leaf_dims.find(l.other);
      if (other == leaf_dims.end()) continue;
      const auto at = [](const std::vector<std::int64_t>& d, int i) {
        return i < 0 ? std::int64_t(d.size()) + i : std::int64_t(i);
      };
      const std::int64_t i = at(dims, l.dim), j = at(other->second, l.other_dim);
      if (i >= 0 && i < std::int64_t(dims.size()) && j >= 0 &&
          j < std::int64_t(other->second.size()))
        dims[std::size_t(i)] = other->second[std::size_t(j)] + (l.off ? 1 : 0);
    }
    return dims;
  }

  // A leaf's dims from options::shape and its form in the search; a declared rank of 0 or 1 has
  // one form only, and takes no place in the search.
  std::vector<std::int64_t> free_shape(const want& w) {
    const std::vector<std::int64_t>& full = o.shape;
    if (w.rank >= 0) {
      std::vector<std::int64_t> dims(std::size_t(w.rank), 1);
      for (int i = 0; i < w.rank && i < int(full.size()); ++i)
        dims[std::size_t(w.rank - 1 - i)] = full[full.size() - 1 - std::size_t(i)];
      if (w.rank < 2) return dims;
      const std::size_t index = free_leaves++;
      switch (index < forms.size() ? forms[index] : leaf_form::full) {
        case leaf_form::last_dim:  // a square of the last dim
          std::fill(dims.begin(), dims.end(), full.back());
          break;
        case leaf_form::scalar:  // one row
          std::fill(dims.begin(), dims.end() - 1, 1);
          break;
        case leaf_form::exchanged:
          std::swap(dims[dims.size() - 2], dims[dims.size() - 1]);
          break;
        case leaf_form::full:
          break;
      }
      return dims;
    }
    const std::size_t index = free_leaves++;
    switch (index < forms.size() ? forms[index] : leaf_form::full) {
      case leaf_form::last_dim:
        return {full.back()};
      case leaf_form::scalar:
        return {};
      case leaf_form::exchanged:
        if (full.size() >= 3) {
          std::vector<std::int64_t> dims = full;
          std::swap(dims[dims.size() - 3], dims[dims.size() - 2]);
          return dims;
        }
        break;
      case leaf_form::full:
        break;
    }
    return sibling ? *sibling : full;
  }

  build::value leaf(std::string_view name, want w);

  // The capture `name` written from its source, where the rule gives it one.
  std::optional<build::value> sourced(const std::string& name, want w) {
    if (!source || std::find(sourcing.begin(), sourcing.end(), name) != sourcing.end())
      return std::nullopt;
    sourcing.push_back(name);
    std::optional<build::value> v = source(name, w);
    sourcing.pop_back();
    return v;
  }

  std::string fresh(std::string_view name) {
    std::string clean;
    for (char c : name) clean += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return (clean.empty() ? std::string("in") : clean) + "_" + std::to_string(names++);
  }
};

#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE build::value state::leaf(std::string_view name, want w) {
  const dtype t = w.type == dtype::undefined ? type : w.type;
  // A value the facts must know is a number the rule reads (a scale, a cap): a scalar.
  const std::vector<std::int64_t> dims =
      w.constant && w.rank < 0 ? std::vector<std::int64_t>{} : shape_for(w);
  if (w.constant) {
    std::int64_t count = 1;
    for (std::int64_t d : dims) count *= d;
    return b.initializer(fresh(name), t, dims, std::vector<double>(std::size_t(count), 0.5));
  }
  leaf_dims[std::string(name)] = dims;
  std::vector<build::dim_spec> shape(dims.begin(), dims.end());
  return b.input(fresh(name), t, shape);
}
#endif

// What a written source (pattern/sources.hpp) writes with: the value it stands for, of the type
// its reader wants (the instance's float type where the reader admits several).
class writer {
 public:
  writer(state& s, want w) : s_(s), w_(w) {}
  dtype type() const { return w_.type == dtype::undefined ? s_.type : w_.type; }
  // Dim `axis` (negative: from the last) of a capture already written, as the facts prove it;
  // an error where it is not written yet or not a number.
  std::int64_t dim(std::string_view capture, int axis) const;
  // The same, nullopt where the capture, written, has no such dim proven a number (a leaf the
  // shape search made a scalar): a source that can do without writes something else then.
  std::optional<std::int64_t> proven_dim(std::string_view capture, int axis) const;
  // Every dim of a capture already written, nullopt where one is not proven a number; an error
  // where it is not written yet.
  std::optional<std::vector<std::int64_t>> dims(std::string_view capture) const;
  // The shape the leaf search gives this value as it would a leaf of the pattern's (options::
  // shape, its last dim, a scalar …): a source whose shape follows no capture written before it
  // takes part in the search so.
  std::vector<std::int64_t> leaf_shape() { return s_.shape_for(w_); }
  // Whether a capture is written already (which of two branches the instance took).
  bool written(std::string_view capture) const { return s_.bound.contains(capture); }
  // The number a capture already written holds; an error where it is not written yet or holds
  // no constant scalar.
  double scalar(std::string_view capture) const;
  // A graph input: the parity run feeds a float one normal samples, an integer one 0s and 1s.
  build::value input(dtype t, std::vector<std::int64_t> dims) {
    return s_.b.input(s_.fresh("written"), t,
                      std::vector<build::dim_spec>(dims.begin(), dims.end()));
  }
  build::value initializer(dtype t, std::vector<std::int64_t> dims,
                           const std::vector<double>& values) {
    return s_.b.initializer(s_.fresh("written"), t, std::move(dims), values);
  }

 private:
  state& s_;
  want w_;
};

template <class P>
struct gen;

template <class P>
build::value make(const P& p, state& s, want w = {}) {
  return gen<P>::make(p, s, w);
}

// A choice point or a predicate as the report names it: the pattern's own text, cut short.
template <class P>
std::string text_of(const P& p) {
  return shortened(pattern::describe(p));
}

// A value other than v's: where a mutant breaks a number.
inline double off(double v, double tolerance) {
  if (std::isinf(v)) return v < 0 ? -1e4 : 1e4;
  return v + 0.5 + std::abs(v) * 0.5 + tolerance * 10;
}

// The largest finite number of a float type (of any other, of double).
constexpr double largest_finite(dtype t) {
  switch (t) {
    case dtype::float16:
      return 65504;
    case dtype::bfloat16:
      return bfloat16_to_float(0x7f7f);
    case dtype::float32:
      return std::numeric_limits<float>::max();
    default:
      return std::numeric_limits<double>::max();
  }
}

template <>
struct gen<pattern::any_t> {
  static build::value make(const pattern::any_t&, state& s, want w) {
    if (!s.naming.empty() && s.naming.back().second == s.depth)
      if (const auto v = s.sourced(s.naming.back().first, w)) return *v;
    return s.leaf("any", w);
  }
};

template <class W>
struct gen<pattern::written_t<W>> {
  static build::value make(const pattern::written_t<W>&, state& s, want w) {
    writer out(s, w);
    return W::write(out);
  }
};

template <pattern::fixed_string Name>
struct gen<pattern::capture_t<Name>> {
  static build::value make(const pattern::capture_t<Name>&, state& s, want w) {
    const std::string name(Name.view());
    if (const auto found = s.bound.find(name); found != s.bound.end()) {
      if (!s.breaks("'" + name + "' twice", "'" + name + "' must be the same value twice"))
        return found->second;
      return s.leaf(name, w);
    }
    if (const auto v = s.sourced(name, w)) return s.bound[name] = *v;
    return s.bound[name] = s.leaf(name, w);
  }
};

template <pattern::fixed_string Name, class Inner>
struct gen<pattern::captured<Name, Inner>> {
  static build::value make(const pattern::captured<Name, Inner>& p, state& s, want w) {
    const std::string name(Name.view());
    if (const auto found = s.bound.find(name); found != s.bound.end()) return found->second;
    s.naming.emplace_back(name, s.depth);
    const build::value v = detail::make(p.inner, s, w);
    s.naming.pop_back();
    return s.bound[name] = v;
  }
};

template <pattern::fixed_string Name>
struct gen<pattern::constant_scalar_t<Name>> {
  static build::value make(const pattern::constant_scalar_t<Name>& p, state& s, want w) {
    const std::string name(Name.view());
    if (const auto v = s.sourced(name, w)) return *v;
    const dtype t = w.type == dtype::undefined ? s.type : w.type;
    // Inside the bounds as the type holds them: float16 writes a bound of 1e6 as inf.
    const double least = std::max(p.least, -largest_finite(t));
    const double most = std::min(p.most, largest_finite(t));
    double v = p.has_expected ? p.expected
               : p.has_least  ? least + 0.5
               : p.has_most   ? most - 0.5
                              : 0.5;
    if (p.has_least && p.has_most) v = (least + most) / 2;
    const bool bounded = p.has_expected || p.has_least || p.has_most;
    if (bounded && s.breaks("constant scalar '" + name + "'", "constant scalar '" + name + "'"))
      v = p.has_expected ? off(p.expected, p.tolerance) : p.has_most ? p.most + 1 : p.least - 1;
    // An initializer or a Constant node: both are constants to the pattern.
    if (s.plan.choose(p, 2, "constant scalar '" + name + "'", " as an initializer | a Constant") ==
        0)
      return s.b.initializer(s.fresh(name), t, {}, {v});
    return s.b.constant_scalar(t, v);
  }
};

template <pattern::fixed_string Name>
struct gen<pattern::constant_t<Name>> {
  static build::value make(const pattern::constant_t<Name>& p, state& s, want w) {
    using pattern::tensor_rule;
    // The rule's word on its values (a divisor of 2, not of ones, whose fold is no identity).
    if (const auto v = s.sourced(std::string(Name.view()), w)) return *v;
    const dtype t = w.type == dtype::undefined ? s.type : w.type;
    const std::int64_t n = s.o.shape.back();
    if (p.rule == tensor_rule::none || p.rule == tensor_rule::all_equal ||
        p.rule == tensor_rule::all_ones) {
      // A leaf like any other, of ones: its rank and dims searched, or as its predicates ask.
      const std::vector<std::int64_t> dims = s.shape_for(w);
      s.leaf_dims[std::string(Name.view())] = dims;
      std::int64_t count = 1;
      for (std::int64_t d : dims) count *= d;
      return s.b.initializer(s.fresh(Name.view()), t, dims,
                             std::vector<double>(std::size_t(count), 1));
    }
    std::vector<double> square(std::size_t(n * n));
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n; ++j)
        square[std::size_t(i * n + j)] =
            p.rule == tensor_rule::lower_triangular_ones ? j <= i : j > i;
    const std::string name(Name.view());
    if (s.breaks("constant '" + name + "' " + pattern::detail::tensor_rule_text(p.rule),
                 "constant '" + name + "'"))
      square[std::size_t(n - 1)] = 1 - square[std::size_t(n - 1)];
    return s.b.initializer(s.fresh(name), t, {n, n}, square);
  }
};

template <pattern::fixed_string Name, std::size_t N>
struct gen<pattern::checked<pattern::constant_t<Name>, pattern::elements_are<Name, N>>> {
  using P = pattern::checked<pattern::constant_t<Name>, pattern::elements_are<Name, N>>;
  static build::value make(const P& p, state& s, want w) {
    std::vector<double> values(p.pred.values.begin(), p.pred.values.end());
    const std::string name(Name.view());
    if (s.breaks("constant '" + name + "' values", "constant '" + name + "'"))
      values[0] = off(values[0], p.pred.tolerance);
    const dtype t = w.type == dtype::undefined ? s.type : w.type;
    return s.b.initializer(s.fresh(name), t, {std::int64_t(N)}, values);
  }
};

template <class T>
inline constexpr bool is_leaf = false;
// A constant<> tensor: written with the ops (not a leaf), but of a type and rank its predicates
// ask, as a leaf is, and broken by the mutants as one.
template <class T>
inline constexpr bool is_constant_tensor = false;
template <pattern::fixed_string Name>
inline constexpr bool is_constant_tensor<pattern::constant_t<Name>> = true;
template <class Inner, class Pred>
inline constexpr bool is_constant_tensor<pattern::checked<Inner, Pred>> = is_constant_tensor<Inner>;
template <>
inline constexpr bool is_leaf<pattern::any_t> = true;
template <pattern::fixed_string Name>
inline constexpr bool is_leaf<pattern::capture_t<Name>> = true;
template <class Inner, class Pred>
inline constexpr bool is_leaf<pattern::checked<Inner, Pred>> = is_leaf<Inner>;

// A dtype that none of Types is: where a mutant breaks a dtype predicate.
template <dtype... Types>
constexpr dtype other_than() {
  for (dtype t : {dtype::float64, dtype::int32, dtype::float32, dtype::float16})
    if (((t != Types) && ...)) return t;
  return dtype::int64;
}

// The type a dtype predicate gives what it checks: `current` where the predicate holds it, else
// its first type; at the mutation site, a type none of its types is.
template <dtype... Types>
dtype type_for(const pattern::dtype_is<Types...>& pred, state& s, dtype current) {
  std::string text;
  pred.describe(text);
  constexpr dtype wrong = other_than<Types...>();
  if (s.breaks(text, "has dtype " + std::string(dtype_name(wrong)))) return wrong;
  return ((current == Types) || ...) ? current : std::get<0>(std::tuple{Types...});
}

template <class Inner, class Pred>
struct gen<pattern::checked<Inner, Pred>> {
  static build::value make(const pattern::checked<Inner, Pred>& p, state& s, want w) {
    refine(p.pred, s, w);
    return detail::make(p.inner, s, w);
  }

 private:
  template <dtype... Types>
  static void refine(const pattern::dtype_is<Types...>& pred, state& s, want& w) {
    // Only a leaf can be written of another type; an op's output has its inputs' type.
    if constexpr (is_leaf<Inner> || is_constant_tensor<Inner>)
      w.type = type_for(pred, s, s.type);
    else
      w.type = ((s.type == Types) || ...) ? s.type : std::get<0>(std::tuple{Types...});
  }
  template <std::size_t Rank>
  static void refine(const pattern::rank_is<Rank>&, state& s, want& w) {
    rank(Rank, s, w);
  }
  template <std::size_t Rank>
  static void refine(const pattern::proven_rank_is<Rank>&, state& s, want& w) {
    rank(Rank, s, w);
  }
  template <class F>
  static void refine(const pattern::proven_value_is<F>&, state&, want& w) {
    w.constant = true;
  }
  // A constant's dims, which no op above settles, are written from those it names, and a mutant
  // breaks them. A leaf's are left to the search: its shape is its readers' to settle too.
  template <int I, pattern::fixed_string Other, int J>
  static void refine(const pattern::same_dim_as<I, Other, J>& pred, state& s, want& w) {
    if constexpr (is_constant_tensor<Inner>) {
      std::string text;
      pred.describe(text);
      const bool off = s.breaks(text, "is not equal to dim " + std::to_string(J));
      w.links.push_back({I, std::string(Other.view()), J, off});
    }
  }
  template <class Other>
  static void refine(const Other&, state&, want&) {}

  static void rank(std::size_t r, state& s, want& w) {
    w.rank = int(r);
    if constexpr (is_leaf<Inner> || is_constant_tensor<Inner>)
      if (s.breaks("rank " + std::to_string(r), "rank")) w.rank = int(r) + 1;
  }
};

template <class P, bool AnyCasts>
struct gen<pattern::transparent_t<P, AnyCasts>> {
  static build::value make(const pattern::transparent_t<P, AnyCasts>& p, state& s, want w) {
    const build::value v = detail::make(p.inner, s, w);
    if (s.plan.choose(p, 2,
                      AnyCasts ? " without | with a Cast to its own type"
                               : " without | with an Identity") == 0)
      return v;
    if constexpr (AnyCasts)
      return s.b.op("Cast", {v}, {{"to", w.type == dtype::undefined ? s.type : w.type}});
    else
      return s.b.op("Identity", {v});
  }
};

// The first alternative that binds the most of what the example asks for (pattern::steered).
template <class... Binds>
int preferred(const planner& plan) {
  const pattern::example* e = plan.steering();
  if (e == nullptr) return 0;
  const std::array scores{pattern::steered<Binds>(*e)...};
  return int(std::max_element(scores.begin(), scores.end()) - scores.begin());
}

template <class P>
struct gen<pattern::maybe_t<P>> {
  static build::value make(const pattern::maybe_t<P>& p, state& s, want w) {
    const int steer =
        preferred<typename pattern::captures_of<P>::type, pattern::decl_list<>>(s.plan);
    if (s.plan.choose(p, 2, " given | omitted", steer) == 1) return {""};
    return detail::make(p.inner, s, w);
  }
};

template <class Op, pattern::fixed_string Bind>
struct gen<pattern::optional_t<Op, Bind>> {
  static build::value make(const pattern::optional_t<Op, Bind>& p, state& s, want w) {
    // Absent first: the first instance is the pattern at its plainest, the one most likely to
    // fuse before any alternative has, and the base the others are each tried beside.
    using absent = typename pattern::captures_of<decltype(p.inner.inputs.head)>::type;
    const int steer = preferred<absent, typename pattern::optional_t<Op, Bind>::captures>(s.plan);
    if (s.plan.choose(p, 2, " absent | present", steer) == 0)
      return detail::make(p.inner.inputs.head, s, w);
    if constexpr (pattern::optional_t<Op, Bind>::binds) s.named.emplace(Bind.view());
    return detail::make(p.inner, s, w);
  }
};

template <pattern::fixed_string Bind, class... Alts>
struct gen<pattern::any_of_t<Bind, Alts...>> {
  static build::value make(const pattern::any_of_t<Bind, Alts...>& p, state& s, want w) {
    const int k = s.plan.choose(p, sizeof...(Alts), " branch",
                                preferred<typename pattern::captures_of<Alts>::type...>(s.plan));
    if constexpr (pattern::any_of_t<Bind, Alts...>::binds) s.named.emplace(Bind.view());
    return pick(p.alts, k, s, w);
  }

 private:
  template <class Pack>
  static build::value pick(const Pack& alts, int k, state& s, want w) {
    if constexpr (std::is_same_v<Pack, pattern::pack<>>)
      return {""};
    else if (k == 0)
      return detail::make(alts.head, s, w);
    else
      return pick(alts.tail, k - 1, s, w);
  }
};

// ---- an op node: its predicates first (an attribute, the axes, a dtype that retypes what it
// reads), then its inputs

struct node_parts {
  std::vector<build::attr> attrs;
  bool has_axes = false;
  std::vector<std::int64_t> axes;
};

inline std::optional<std::int64_t> attribute_value(const pattern::int_is& m, bool broken, state&) {
  return broken ? m.value + 1 : m.value;
}
template <std::size_t N>
std::optional<std::int64_t> attribute_value(const pattern::int_in<N>& m, bool broken, state& s) {
  std::int64_t v = m.values[0];
  // The instance's own type where the attribute is a type (a Cast's `to`).
  for (std::int64_t x : m.values)
    if (x == std::int64_t(s.type)) v = x;
  if (broken)
    for (v = 0; std::find(m.values.begin(), m.values.end(), v) != m.values.end();) ++v;
  return v;
}

template <pattern::fixed_string Attr, class Matcher>
void attribute(const Matcher& m, state& s, node_parts& parts) {
  const std::string name(Attr.view());
  std::string text;
  m.describe(text);
  const auto breaks = [&] { return s.breaks(name + "=" + text, name + " = "); };
  if constexpr (std::is_same_v<Matcher, pattern::last_axis_t>) {
    parts.attrs.emplace_back(name, std::int64_t(breaks() ? 0 : -1));
  } else if constexpr (std::is_same_v<Matcher, pattern::float_near>) {
    parts.attrs.emplace_back(name, breaks() ? off(m.value, m.tolerance) : m.value);
  } else if constexpr (std::is_same_v<Matcher, pattern::string_is>) {
    parts.attrs.emplace_back(name, std::string(m.value) + (breaks() ? "_other" : ""));
  } else if constexpr (requires {
                         m.on_axes(std::declval<const graph&>(), node_id{},
                                   std::declval<const pattern::int_list&>());
                       }) {
    std::vector<std::int64_t> v(m.values.begin(), m.values.end());
    // A permutation broken is another permutation, which a graph can hold: its last two swapped.
    if (breaks()) {
      if (name == "perm" && v.size() >= 2)
        std::swap(v[v.size() - 2], v.back());
      else
        v.push_back(v.empty() ? 0 : v.back() + 1);
    }
    parts.attrs.emplace_back(name, v);
  } else if constexpr (requires { attribute_value(m, false, s); }) {
    parts.attrs.emplace_back(name, *attribute_value(m, breaks(), s));
  }
  // satisfies(text, fn): a predicate in code, which nothing here can write; the match judges it.
}

template <class Pred>
void predicate(const Pred&, state&, node_parts&) {}
template <pattern::fixed_string Attr, class Matcher>
void predicate(const pattern::node_check<pattern::attribute_is<Attr, Matcher>>& p, state& s,
               node_parts& parts) {
  attribute<Attr>(p.matcher, s, parts);
}
template <class Matcher>
void predicate(const pattern::axes_are<Matcher>& p, state& s, node_parts& parts) {
  std::string text;
  p.describe(text);
  const bool broken = s.breaks(text, "axes");
  parts.has_axes = true;
  if constexpr (std::is_same_v<Matcher, pattern::last_axis_t>) {
    parts.axes = {broken ? 0 : -1};
  } else {
    parts.axes.assign(p.matcher.values.begin(), p.matcher.values.end());
    if (broken) parts.axes.push_back(parts.axes.empty() ? 0 : parts.axes.back() + 1);
  }
}
// A dtype of the op's output: the instance's type where it is one of them; broken, a type none
// is, for every value the op reads.
template <dtype... Types>
void predicate(const pattern::dtype_is<Types...>& p, state& s, node_parts&) {
  s.type = type_for(p, s, s.type);
}
// The root's output read by a node, not the graph output its name would have to stay; broken,
// the graph output. An inner node's output is read by the node above it already.
inline void predicate(const pattern::node_check<pattern::forwardable_output>&, state& s,
                      node_parts&) {
  if (s.depth == 1 && !s.breaks("forwardable: the root writes a graph output", "graph output"))
    s.read_root = true;
}

// An attribute the op does not have at the instance's opset (is_test after BatchNormalization-6):
// the pattern holds it of the node as written, and a node that states it is no model.
template <class Spec, class Pred>
bool not_at_opset(const Pred&, const state&) {
  return false;
}
template <class Spec, pattern::fixed_string Attr, class Matcher>
bool not_at_opset(const pattern::node_check<pattern::attribute_is<Attr, Matcher>>&,
                  const state& s) {
  if (!Spec::domain.empty()) return false;
  const onnx::OpSchema* schema =
      schemas().GetSchema(std::string(Spec::name), int(s.opset), std::string(Spec::domain));
  return schema != nullptr && !schema->attributes().contains(std::string(Attr.view()));
}

template <class Spec, class Preds>
void predicates(const Preds& preds, state& s, node_parts& parts) {
  if constexpr (!std::is_same_v<Preds, pattern::pack<>>) {
    if (!not_at_opset<Spec>(preds.head, s)) predicate(preds.head, s, parts);
    predicates<Spec>(preds.tail, s, parts);
  }
}

// An op's schema at an opset: onnx's, or ONNX Runtime's for a contributed op; null if neither.
inline const onnx::OpSchema* schema_of(std::string_view op, std::string_view domain,
                                       std::int64_t opset) {
  return schemas().GetSchema(std::string(op), int(opset),
                             domain.empty() ? onnx::ONNX_DOMAIN : std::string(domain));
}

// The one element type an op's input admits where its schema (onnx's, or ONNX Runtime's for a
// contributed op) allows only one (a Where's condition is bool, a Reshape's shape int64, a
// RotaryEmbedding's positions int64); undefined where it allows several, or is unknown.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE dtype only_type(std::string_view op, std::string_view domain,
                                      std::int64_t opset, std::size_t slot) {
  const onnx::OpSchema* schema = schema_of(op, domain, opset);
  if (schema == nullptr || schema->inputs().empty()) return dtype::undefined;
  const auto& formal = schema->inputs()[std::min(slot, schema->inputs().size() - 1)];
  std::vector<std::string> allowed{formal.GetTypeStr()};
  for (const auto& c : schema->typeConstraintParams())
    if (c.type_param_str == formal.GetTypeStr()) allowed = c.allowed_type_strs;
  if (allowed.size() != 1 || !allowed[0].starts_with("tensor(")) return dtype::undefined;
  const onnx::TypeProto t =
      onnx::Utils::DataTypeUtils::ToTypeProto(onnx::Utils::DataTypeUtils::ToType(allowed[0]));
  return dtype(t.tensor_type().elem_type());
}
#else
dtype only_type(std::string_view op, std::string_view domain, std::int64_t opset, std::size_t slot);
#endif

// Why a written graph is no model: an ai.onnx op it holds came after the opset it imports (a
// pattern's branch of an opset-23 op, written into an instance of 17). "" where none did.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::string too_new_op(const onnx::ModelProto& m) {
  int opset = 0;
  for (const onnx::OperatorSetIdProto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = int(o.version());
  for (const onnx::NodeProto& n : m.graph().node()) {
    if (!n.domain().empty() && n.domain() != "ai.onnx") continue;
    if (onnx::OpSchemaRegistry::Schema(n.op_type(), opset, onnx::ONNX_DOMAIN)) continue;
    const onnx::OpSchema* latest = onnx::OpSchemaRegistry::Schema(
        n.op_type(), std::numeric_limits<int>::max(), onnx::ONNX_DOMAIN);
    if (latest == nullptr) continue;
    int first = opset + 1;
    while (!onnx::OpSchemaRegistry::Schema(n.op_type(), first, onnx::ONNX_DOMAIN)) ++first;
    return "the instance holds " + n.op_type() + ", which came in ai.onnx opset " +
           std::to_string(first) + ", and imports " + std::to_string(opset) +
           ": no model, not judged";
  }
  return "";
}
#else
std::string too_new_op(const onnx::ModelProto& m);
#endif

// Why a written graph is no model: an ai.onnx node reads a type its op does not admit at the
// opset the graph imports (a bfloat16 Softmax before opset 13, which options::types and
// options::opsets may combine). "" where every node's does.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::string type_not_admitted(const graph& g) {
  const int opset = int(g.opset(""));
  for (node_id n = 0; n < g.node_count(); ++n) {
    if (!g.domain(n).empty() && g.domain(n) != "ai.onnx") continue;
    const onnx::OpSchema* schema =
        onnx::OpSchemaRegistry::Schema(std::string(g.op_type(n)), opset, onnx::ONNX_DOMAIN);
    if (schema == nullptr || schema->inputs().empty()) continue;
    const auto& formals = schema->inputs();
    for (std::size_t slot = 0; slot < g.inputs(n).size(); ++slot) {
      const value_id v = g.input(n, slot);
      const bool variadic =
          formals.back().GetOption() == onnx::OpSchema::FormalParameterOption::Variadic;
      if (v == no_id || g.type(v) == dtype::undefined || (slot >= formals.size() && !variadic))
        continue;
      const std::string& param = formals[std::min(slot, formals.size() - 1)].GetTypeStr();
      const auto& constraints = schema->typeConstraintParams();
      const auto c = std::find_if(constraints.begin(), constraints.end(),
                                  [&](const auto& p) { return p.type_param_str == param; });
      std::string type = onnx::TensorProto::DataType_Name(int(g.type(v)));
      for (char& ch : type) ch = char(std::tolower(static_cast<unsigned char>(ch)));
      if (c == constraints.end() ||
          std::find(c->allowed_type_strs.begin(), c->allowed_type_strs.end(),
                    "tensor(" + type + ")") != c->allowed_type_strs.end())
        continue;
      return g.describe(n) + " reads " + std::string(dtype_name(g.type(v))) + " at input " +
             std::to_string(slot) + ", which ai.onnx opset " + std::to_string(opset) +
             " does not admit there: no model, not judged";
    }
  }
  return "";
}
#else
std::string type_not_admitted(const graph& g);
#endif

// Why a written graph is no model: an op too new for its opset (too_new_op), a type an op does
// not admit (type_not_admitted), or a node the facts prove cannot run (q's heads merged into the
// batch axis and kᵀ's not: batch dims that do not broadcast). "" where it is one. `g` is m's
// graph.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::string no_model(const onnx::ModelProto& m, const graph& g) {
  if (std::string why = too_new_op(m); !why.empty()) return why;
  if (std::string why = type_not_admitted(g); !why.empty()) return why;
  if (const auto stuck = facts_of(g).cannot_run(); !stuck.empty())
    return g.describe(stuck.front()) + " cannot run on what it reads: no model, not judged";
  return "";
}
#else
std::string no_model(const onnx::ModelProto& m, const graph& g);
#endif

// How far a written graph is from a model: each dim of a node's output the facts cannot give as
// a number (an output of unknown rank counts four), and a thousand for an op too new for its
// opset. The leaves are of fixed shapes, so a graph whose ops all run has every dim a number.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::size_t unsettled(const onnx::ModelProto& m, const graph& g) {
  if (!too_new_op(m).empty()) return 1000;
  const facts& f = facts_of(g);
  std::size_t out = 0;
  for (node_id n = 0; n < g.node_count(); ++n)
    for (value_id v : g.outputs(n)) {
      if (v == no_id) continue;
      const shape_fact& s = f.shape(v);
      if (!s.known) {
        out += 4;
        continue;
      }
      for (const sym& d : s.dims) out += !d.constant();
    }
  return out;
}
#else
std::size_t unsettled(const onnx::ModelProto& m, const graph& g);
#endif

// Whether input `slot` of `op` is written of the type its output has: not a Where's condition,
// not what IsNaN or a comparison reads. Unknown schemas: yes.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE bool follows_output_type(std::string_view op, std::string_view domain,
                                               std::int64_t opset, std::size_t slot) {
  const onnx::OpSchema* schema = schema_of(op, domain, opset);
  if (schema == nullptr || schema->inputs().empty() || schema->outputs().empty()) return true;
  const auto& formal = schema->inputs()[std::min(slot, schema->inputs().size() - 1)];
  return formal.GetTypeStr() == schema->outputs()[0].GetTypeStr();
}
#else
bool follows_output_type(std::string_view op, std::string_view domain, std::int64_t opset,
                         std::size_t slot);
#endif

}  // namespace fusekit::selfcheck::detail
