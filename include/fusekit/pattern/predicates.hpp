// Predicates: small structs that can both check and describe themselves. Value predicates look at
// a value (dtype, rank, shape); node predicates at the node producing it (attributes, opset).
// Each check reports its own failure reason to the context, so explanations name the culprit.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "fusekit/engine.hpp"
#include "fusekit/graph/facts.hpp"
#include "fusekit/graph/graph.hpp"
#include "fusekit/graph/sym.hpp"
#include "fusekit/graph/tensor.hpp"
#include "fusekit/pattern/captures.hpp"
#include "fusekit/pattern/context.hpp"
#include "fusekit/pattern/fixed_string.hpp"

namespace fusekit::pattern {

// ---- value predicates: check(context, where, value)

template <dtype... Types>
struct dtype_is {
  static_assert(sizeof...(Types) > 0, "fusekit: dtype<> needs at least one element type");
  void describe(std::string& out) const {
    out += "dtype ";
    std::size_t i = 0;
    ((out += (i++ ? "|" : ""), out += dtype_name(Types)), ...);
  }
  template <class C>
  bool check(C& c, const site* where, value_id v) const {
    const dtype t = c.g.type(v);
    if (((t == Types) || ...)) return true;
    c.fail(where, c.g.producer(v), [&](std::string& m) {
      m += describe_value(c.g, v) + " has dtype " + std::string(dtype_name(t)) + ", expected ";
      std::string expected;
      describe(expected);
      m += expected.substr(6);
    });
    return false;
  }
};

template <std::size_t Rank>
struct rank_is {
  void describe(std::string& out) const { out += "rank " + std::to_string(Rank); }
  template <class C>
  bool check(C& c, const site* where, value_id v) const {
    const auto& shape = c.g.shape(v);
    if (shape.known && shape.rank() == Rank) return true;
    c.fail(where, c.g.producer(v), [&](std::string& m) {
      m += describe_value(c.g, v) +
           (shape.known ? " has rank " + std::to_string(shape.rank()) : " has unknown rank") +
           ", expected " + std::to_string(Rank);
    });
    return false;
  }
};

// One dimension of a shape predicate: a static size, a symbol (dim_param) or anything.
struct dim_is {
  constexpr dim_is(std::int64_t size) : size(size) {}
  constexpr dim_is(int size) : size(size) {}
  constexpr dim_is(const char* symbol) : symbol(symbol) {}
  std::int64_t size = -1;
  const char* symbol = nullptr;

  bool accepts(const dim& d) const {
    if (symbol != nullptr) return d.symbol == symbol;
    if (size >= 0) return d.size == size;
    return true;
  }
  std::string text() const { return symbol ? symbol : size >= 0 ? std::to_string(size) : "*"; }
};

inline constexpr dim_is any_dim{std::int64_t(-1)};

template <std::size_t Rank>
struct shape_is {
  std::array<dim_is, Rank> dims;

  void describe(std::string& out) const {
    out += "shape [";
    for (std::size_t i = 0; i < Rank; ++i) out += (i ? ", " : "") + dims[i].text();
    out += "]";
  }
  template <class C>
  bool check(C& c, const site* where, value_id v) const {
    const auto& shape = c.g.shape(v);
    bool ok = shape.known && shape.rank() == Rank;
    for (std::size_t i = 0; ok && i < Rank; ++i) ok = dims[i].accepts(shape.dims[i]);
    if (ok) return true;
    c.fail(where, c.g.producer(v), [&](std::string& m) {
      m += describe_value(c.g, v) + " has shape ";
      if (!shape.known) {
        m += "unknown";
      } else {
        m += "[";
        for (std::size_t i = 0; i < shape.rank(); ++i) {
          const dim& d = shape.dims[i];
          m += (i ? ", " : "") + (d.is_static()     ? std::to_string(d.size)
                                  : d.is_symbolic() ? std::string(d.symbol)
                                                    : std::string("?"));
        }
        m += "]";
      }
      std::string expected;
      describe(expected);
      m += ", expected " + expected.substr(6);
    });
    return false;
  }
};

// ---- attribute value matchers: accepts(graph, node, attribute)

namespace detail {

inline std::string attribute_text(const onnx::AttributeProto& a) {
  using A = onnx::AttributeProto;
  switch (a.type()) {
    case A::INT:
      return std::to_string(a.i());
    case A::FLOAT:
      return number_text(a.f(), true);
    case A::STRING:
      return "\"" + a.s() + "\"";
    case A::INTS: {
      std::string text = "[";
      for (int i = 0; i < a.ints_size(); ++i) text += (i ? ", " : "") + std::to_string(a.ints(i));
      return text + "]";
    }
    default:
      return "(a " + A::AttributeType_Name(a.type()) + " attribute)";
  }
}

}  // namespace detail

// Integers read where they are stored: an INTS attribute, or an integer tensor (a Reduce op's
// axes moved from the attribute to a constant input at opset 18, ReduceSum's at 13).
class int_list {
 public:
  explicit int_list(const onnx::AttributeProto& a) : ints_(a.ints().data(), a.ints_size()) {}
  explicit int_list(const tensor_values& values) : values_(&values) {}

  std::size_t size() const { return values_ ? std::size_t(values_->size()) : ints_.size(); }
  std::int64_t operator[](std::size_t i) const {
    return values_ ? values_->as_int64(std::int64_t(i)) : ints_[i];
  }
  std::string text() const {
    std::string out = "[";
    for (std::size_t i = 0; i < size(); ++i) out += (i ? ", " : "") + std::to_string((*this)[i]);
    return out + "]";
  }

 private:
  std::span<const std::int64_t> ints_;
  const tensor_values* values_ = nullptr;
};

namespace detail {
// "; 'x' has unknown rank: …": an axis that only a proven rank could make the last one is refused
// ("unknown" is never "equal"), with where the proof of the rank broke.
[[gnu::cold]] inline void rank_not_proven(std::string& m, const graph& g, node_id n) {
  const value_id x = g.input(n, 0);
  m += x == no_id ? "; input 0 is omitted" : "; " + facts_of(g).why_unknown(x);
}
}  // namespace detail

struct int_is {
  std::int64_t value;
  void describe(std::string& out) const { out += std::to_string(value); }
  bool accepts(const graph&, node_id, const onnx::AttributeProto& a) const {
    return a.type() == onnx::AttributeProto::INT && a.i() == value;
  }
};

template <std::size_t N>
struct int_in {
  std::array<std::int64_t, N> values;
  void describe(std::string& out) const {
    out += "one of {";
    for (std::size_t i = 0; i < N; ++i) out += (i ? ", " : "") + std::to_string(values[i]);
    out += "}";
  }
  bool accepts(const graph&, node_id, const onnx::AttributeProto& a) const {
    if (a.type() != onnx::AttributeProto::INT) return false;
    for (auto v : values)
      if (a.i() == v) return true;
    return false;
  }
};

// .attr<"to">(one_of(1, 10))
template <class... Ts>
constexpr int_in<sizeof...(Ts)> one_of(Ts... values) {
  return {{std::int64_t(values)...}};
}
template <dtype... Types>
constexpr int_in<sizeof...(Types)> one_of_dtypes() {
  return {{std::int64_t(Types)...}};
}

template <std::size_t N>
struct ints_are {
  std::array<std::int64_t, N> values;
  void describe(std::string& out) const {
    out += "[";
    for (std::size_t i = 0; i < N; ++i) out += (i ? ", " : "") + std::to_string(values[i]);
    out += "]";
  }
  bool accepts(const graph&, node_id, const onnx::AttributeProto& a) const {
    if (a.type() != onnx::AttributeProto::INTS || a.ints_size() != int(N)) return false;
    for (std::size_t i = 0; i < N; ++i)
      if (a.ints(int(i)) != values[i]) return false;
    return true;
  }
  // For .axes(): exactly these, in this order; "none given" is not a list of them.
  truth on_axes(const graph&, node_id, const int_list& axes) const {
    if (axes.size() != N) return truth::no;
    for (std::size_t i = 0; i < N; ++i)
      if (axes[i] != values[i]) return truth::no;
    return truth::yes;
  }
  truth on_every_axis(const graph&, node_id) const { return truth::no; }
};

// .attr<"perm">(ints(0, 2, 1, 3))
template <class... Ts>
constexpr ints_are<sizeof...(Ts)> ints(Ts... values) {
  return {{std::int64_t(values)...}};
}

struct float_near {
  double value;
  double tolerance;
  void describe(std::string& out) const { out += number_text(value); }
  bool accepts(const graph&, node_id, const onnx::AttributeProto& a) const {
    return a.type() == onnx::AttributeProto::FLOAT && std::abs(a.f() - value) <= tolerance;
  }
};

struct string_is {
  const char* value;
  void describe(std::string& out) const { out += "\"" + std::string(value) + "\""; }
  bool accepts(const graph&, node_id, const onnx::AttributeProto& a) const {
    return a.type() == onnx::AttributeProto::STRING && a.s() == value;
  }
};

// The last axis of the node's first input: -1, or rank-1 when the rank is declared or proven by
// the ops that made the input (fusekit::facts_of). Before opset 13 Softmax flattens to 2-D at
// `axis`, which equals a last-axis softmax exactly when axis is last. A list (a Reduce op's axes)
// must hold that one axis: reducing over more than the last axis is another computation.
struct last_axis_t {
  void describe(std::string& out) const { out += "the last axis"; }

  truth is_last(const graph& g, node_id n, std::int64_t axis) const {
    if (axis == -1) return truth::yes;
    const auto rank = facts_of(g).rank(g.input(n, 0));
    if (!rank) return truth::unknown;
    return axis == std::int64_t(*rank) - 1 ? truth::yes : truth::no;
  }
  // For .axes(): the axes given, or none given (a Reduce op then reduces every axis).
  truth on_axes(const graph& g, node_id n, const int_list& axes) const {
    return axes.size() == 1 ? is_last(g, n, axes[0]) : truth::no;
  }
  truth on_every_axis(const graph& g, node_id n) const {
    const auto rank = facts_of(g).rank(g.input(n, 0));
    if (!rank) return truth::unknown;
    return *rank == 1 ? truth::yes : truth::no;
  }
  // What "expected the last axis" leaves unsaid: a list of several axes is refused as a list.
  void explain_axes(const graph& g, node_id n, std::size_t count, truth verdict,
                    std::string& out) const {
    if (count > 1) out += " alone";
    if (verdict == truth::unknown) detail::rank_not_proven(out, g, n);
  }

  bool accepts(const graph& g, node_id n, const onnx::AttributeProto& a) const {
    return verdict(g, n, a) == truth::yes;
  }
  void explain(const graph& g, node_id n, const onnx::AttributeProto& a, std::string& out) const {
    if (a.type() == onnx::AttributeProto::INTS)
      explain_axes(g, n, std::size_t(a.ints_size()), verdict(g, n, a), out);
    else if (verdict(g, n, a) == truth::unknown)
      detail::rank_not_proven(out, g, n);
  }

 private:
  truth verdict(const graph& g, node_id n, const onnx::AttributeProto& a) const {
    if (a.type() == onnx::AttributeProto::INT) return is_last(g, n, a.i());
    if (a.type() == onnx::AttributeProto::INTS) return on_axes(g, n, int_list(a));
    return truth::no;
  }
};
inline constexpr last_axis_t last_axis{};

// A user predicate on the attribute, with its description.
template <class F>
struct attribute_where {
  const char* text;
  F fn;
  void describe(std::string& out) const { out += text; }
  bool accepts(const graph&, node_id, const onnx::AttributeProto& a) const { return fn(a); }
};

// .attr<"mode">(satisfies("a known mode", [](const onnx::AttributeProto& a) { … }))
template <class F>
constexpr attribute_where<F> satisfies(const char* text, F fn) {
  return {text, fn};
}

template <class V>
constexpr auto attribute_matcher(V v) {
  if constexpr (std::is_integral_v<V> || std::is_enum_v<V>)
    return int_is{std::int64_t(v)};
  else if constexpr (std::is_floating_point_v<V>)
    return float_near{double(v), 1e-6 * (1.0 + std::abs(double(v)))};
  else if constexpr (std::is_convertible_v<V, const char*>)
    return string_is{v};
  else
    return v;
}

// ---- node predicates: check(context, where, node)

template <fixed_string Name, class Matcher>
struct attribute_is {
  Matcher matcher;
  void describe(std::string& out) const {
    out += Name.view();
    out += "=";
    matcher.describe(out);
  }
  template <class C>
  bool check(C& c, const site* where, node_id n) const {
    const attribute_lookup found = c.g.attribute(n, Name.view());
    if (found && matcher.accepts(c.g, n, *found.attribute)) return true;
    // An attribute the op does not have at the model's opset: the node does what the attribute
    // would ask of a later one (BatchNormalization-9 is in inference mode, with no training_mode).
    if (!found && c.g.attribute_not_in_opset(n, Name.view())) return true;
    c.fail(where, n, [&](std::string& m) {
      m += c.g.describe(n) + ": ";
      if (!found) {
        m += "has no attribute " + std::string(Name.view());
      } else {
        m += std::string(Name.view()) + " = " + detail::attribute_text(*found.attribute);
        if (found.is_default) {
          const std::string domain(c.g.domain(n));
          m += " (" + (domain.empty() ? "" : domain + " ") + "opset " +
               std::to_string(c.g.opset(domain)) + " default)";
        }
      }
      m += ", expected ";
      matcher.describe(m);
      if constexpr (requires { matcher.explain(c.g, n, *found.attribute, m); })
        if (found) matcher.explain(c.g, n, *found.attribute, m);
    });
    return false;
  }
};

namespace detail {

// Where a Reduce op's axes come from, as explanations name it.
[[gnu::cold]] inline void axes_subject(std::string& m, const graph& g, node_id n, bool input) {
  m += g.describe(n) + ": axes";
  if (input) m += " (input 1)";
}

#if FUSEKIT_ENGINE_DEFINITIONS
[[gnu::cold]] FUSEKIT_ENGINE_INLINE void axes_not_constant(std::string& m, const graph& g,
                                                           node_id n, value_id axes) {
  axes_subject(m, g, n, true);
  m += " come from " + describe_value(g, axes);
  m += g.is_initializer(axes) && g.is_graph_input(axes)
           ? ", which is also a graph input, so it can be overridden at run time"
           : ", not a constant";
}
#else
void axes_not_constant(std::string& m, const graph& g, node_id n, value_id axes);
#endif

}  // namespace detail

// .axes(last_axis), .axes(ints(…)) on a Reduce op: the axes it reduces, read from the `axes`
// attribute or, where the opset moved them there (ReduceSum 13, the others 18), from a constant
// input 1. None given (or an empty list) means every axis, or none with noop_with_empty_axes.
template <class Matcher>
struct axes_are {
  static constexpr bool on_node = true;
  Matcher matcher;

  void describe(std::string& out) const {
    out += "axes=";
    matcher.describe(out);
  }

  template <class C>
  bool check(C& c, const site* where, node_id n) const {
    const value_id input = c.g.input(n, 1);
    if (input == no_id) {
      const attribute_lookup found = c.g.attribute(n, "axes");
      if (found && found.attribute->type() == onnx::AttributeProto::INTS &&
          found.attribute->ints_size() > 0)
        return judge(c, where, n, false, int_list(*found.attribute));
      if (found && found.attribute->type() != onnx::AttributeProto::INTS) {
        c.fail(where, n, [&](std::string& m) {
          detail::axes_subject(m, c.g, n, false);
          m += " = " + detail::attribute_text(*found.attribute) + ", expected ";
          matcher.describe(m);
        });
        return false;
      }
      return judge_every_axis(c, where, n, false);
    }
    const onnx::TensorProto* t = c.g.constant_tensor(input);
    if (t == nullptr) {
      c.fail(where, n, [&](std::string& m) {
        detail::axes_not_constant(m, c.g, n, input);
        m += ", expected ";
        matcher.describe(m);
      });
      return false;
    }
    // Read in place: no allocation for a tensor stored inline.
    std::optional<tensor_values> values;
    try {
      values.emplace(*t, c.g.directory());
    } catch (const std::exception& e) {
      c.fail(where, n, [&](std::string& m) {
        m += c.g.describe(n) + ": axes (input 1, " + describe_value(c.g, input) +
             ") cannot be read: " + e.what();
      });
      return false;
    }
    if (!is_integer(values->type())) {
      c.fail(where, n, [&](std::string& m) {
        m += c.g.describe(n) + ": axes (input 1, " + describe_value(c.g, input) + ") hold " +
             std::string(dtype_name(values->type())) + ", not integers";
      });
      return false;
    }
    if (values->size() == 0) return judge_every_axis(c, where, n, true);
    return judge(c, where, n, true, int_list(*values));
  }

 private:
  template <class C>
  bool judge(C& c, const site* where, node_id n, bool input, const int_list& axes) const {
    const truth verdict = matcher.on_axes(c.g, n, axes);
    if (verdict == truth::yes) return true;
    c.fail(where, n, [&](std::string& m) {
      detail::axes_subject(m, c.g, n, input);
      m += " = " + axes.text() + ", expected ";
      matcher.describe(m);
      if constexpr (requires { matcher.explain_axes(c.g, n, axes.size(), verdict, m); })
        matcher.explain_axes(c.g, n, axes.size(), verdict, m);
    });
    return false;
  }

  // No axes, or an empty list: every axis, unless noop_with_empty_axes makes it none.
  template <class C>
  bool judge_every_axis(C& c, const site* where, node_id n, bool input) const {
    const bool none = c.g.attribute_int(n, "noop_with_empty_axes").value_or(0) != 0;
    const truth verdict = none ? truth::no : matcher.on_every_axis(c.g, n);
    if (verdict == truth::yes) return true;
    c.fail(where, n, [&](std::string& m) {
      if (input) {
        detail::axes_subject(m, c.g, n, true);
        m += " = []";
      } else {
        m += c.g.describe(n) + ": axes not given";
      }
      m += none ? " and noop_with_empty_axes = 1 (no axis)" : " (every axis)";
      m += ", expected ";
      matcher.describe(m);
      if constexpr (requires { matcher.explain_axes(c.g, n, std::size_t(0), verdict, m); })
        matcher.explain_axes(c.g, n, 0, verdict, m);
    });
    return false;
  }
};

template <std::int64_t Min, std::int64_t Max>
struct opset_in {
  void describe(std::string& out) const {
    out += "opset " + std::to_string(Min) + (Max == INT64_MAX ? "+" : ".." + std::to_string(Max));
  }
  template <class C>
  bool check(C& c, const site* where, node_id n) const {
    const std::int64_t version = c.g.opset(c.g.domain(n));
    if (version >= Min && version <= Max) return true;
    c.fail(where, n, [&](std::string& m) {
      m += c.g.describe(n) + ": the model imports opset " + std::to_string(version) +
           " of its domain, expected ";
      describe(m);
    });
    return false;
  }
};

// forwardable(): the node's first output may lose its name, its readers reading another value
// instead, as an elimination forwards them. Not a graph output, the model's interface, nor a
// value a subgraph reads by name, which only that name reaches.
struct forwardable_output {
  void describe(std::string& out) const { out += "forwardable"; }
  template <class C>
  bool check(C& c, const site* where, node_id n) const {
    const value_id v = c.g.output(n, 0);
    const char* why = nullptr;
    if (v == no_id) {
      why = "has no first output";
    } else if (c.g.is_graph_output(v)) {
      why = "writes a graph output, whose name must live on";
    } else if (c.g.read_by_name_in_subgraph(v)) {
      why = "writes a value a subgraph reads by name, which must live on";
    }
    if (why == nullptr) return true;
    c.fail(where, n, [&](std::string& m) { m += c.g.describe(n) + ": " + why; });
    return false;
  }
};

// where("scale is finite", [](const graph& g, node_id n) { … })
template <class F>
struct node_where {
  const char* text;
  F fn;
  void describe(std::string& out) const { out += text; }
  template <class C>
  bool check(C& c, const site* where, node_id n) const {
    if (fn(c.g, n)) return true;
    c.fail(where, n, [&](std::string& m) { message::not_satisfied(m, c.g.describe(n), text); });
    return false;
  }
};

template <class F>
struct value_where {
  const char* text;
  F fn;
  void describe(std::string& out) const { out += text; }
  template <class C>
  bool check(C& c, const site* where, value_id v) const {
    if (fn(c.g, v)) return true;
    c.fail(where, c.g.producer(v),
           [&](std::string& m) { message::not_satisfied(m, describe_value(c.g, v), text); });
    return false;
  }
};

// ---- value predicates that ask the facts oracle (fusekit::facts_of) or see the captures bound so
// far. The facts are built on the graph's first use of them, which allocates once.

// .proven_rank<4>(): the rank the ops prove (or the model declares), not only what is declared.
template <std::size_t Rank>
struct proven_rank_is {
  void describe(std::string& out) const { out += "proven rank " + std::to_string(Rank); }
  template <class C>
  bool check(C& c, const site* where, value_id v) const {
    const facts& f = facts_of(c.g);
    if (f.rank(v) == Rank) return true;
    c.fail(where, c.g.producer(v), [&](std::string& m) {
      m += describe_value(c.g, v) + " is not proven rank " + std::to_string(Rank) + ": it is " +
           f.shape_text(v);
    });
    return false;
  }
};

namespace message {
inline void not_bound_yet(std::string& m, const std::string& subject, std::string_view what,
                          std::string_view name) {
  m += subject + ": " + std::string(what) + " needs ";
  m += quoted(name);
  m += ", which is not bound yet at this point of the match";
}
}  // namespace message

// The value (or constant) bound to capture K earlier in the match, which a predicate named `what`
// compares with; no_id, the failure recorded, where it is not bound yet (a commutative op's
// operands tried the other way round).
template <std::size_t K, class C>
value_id bound_earlier(C& c, const site* where, value_id v, std::string_view what,
                       std::string_view other) {
  static_assert(
      C::captures::kinds[K] == capture_kind::value || C::captures::kinds[K] == capture_kind::tensor,
      "fusekit: same_dim<> and broadcasts_to<>: the other capture must be a value "
      "(capture<>) or a constant (constant<>)");
  if (c.slots[K].bound) return c.slots[K].id;
  c.fail(where, c.g.producer(v),
         [&](std::string& m) { message::not_bound_yet(m, describe_value(c.g, v), what, other); });
  return no_id;
}

// .same_dim<-1, "q", -1>(): dim I of this value is proven equal to dim J of the value bound to
// capture "q" (negative indices count from the end). "q" must be bound earlier in the match.
template <int I, fixed_string Other, int J>
struct same_dim_as {
  void describe(std::string& out) const {
    out += "dim " + std::to_string(I) + " = dim " + std::to_string(J) + " of ";
    out += quoted(Other.view());
  }
  template <class C>
  bool check(C& c, const site* where, value_id v) const {
    constexpr std::size_t k = index_of<typename C::captures>(Other.view());
    static_assert(k != npos, "fusekit: same_dim<>: the pattern has no capture of this name");
    if constexpr (k != npos) {
      const value_id other = bound_earlier<k>(c, where, v, "same_dim", Other.view());
      if (other == no_id) return false;
      const facts& f = facts_of(c.g);
      const truth t = f.same_dim(v, I, other, J);
      if (t == truth::yes) return true;
      c.fail(where, c.g.producer(v), [&](std::string& m) {
        m += describe_value(c.g, v) + ": dim " + std::to_string(I) +
             (t == truth::no ? " is not equal to dim " : " is not proven equal to dim ") +
             std::to_string(J) + " of ";
        m += quoted(Other.view());
        m += ": " + f.shape_text(v) + " vs " + f.shape_text(other);
      });
    }
    return false;
  }
};

// .broadcasts_to<"y">(): the value can stand beside y in an element-wise op without changing y's
// shape (ONNX's unidirectional broadcasting, as Gemm's C and PRelu's slope take it): rank at
// most y's, and each dim, aligned from the last, proven 1 or proven equal to y's.
template <fixed_string Other>
struct broadcasts_to_bound {
  void describe(std::string& out) const {
    out += "broadcasts to ";
    out += quoted(Other.view());
  }
  template <class C>
  bool check(C& c, const site* where, value_id v) const {
    constexpr std::size_t k = index_of<typename C::captures>(Other.view());
    static_assert(k != npos, "fusekit: broadcasts_to<>: the pattern has no capture of this name");
    if constexpr (k != npos) {
      const value_id other = bound_earlier<k>(c, where, v, "broadcasts_to", Other.view());
      if (other == no_id) return false;
      const facts& f = facts_of(c.g);
      const auto rank = f.rank(v), to = f.rank(other);
      int broken = -1;  // the first dim, from the last, not proven to broadcast
      truth t = rank && to ? (*rank <= *to ? truth::yes : truth::no) : truth::unknown;
      for (int i = 1; t == truth::yes && i <= int(*rank); ++i) {
        const sym* d = f.dim_of(v, -i);
        if (d != nullptr && d->is_constant(1)) continue;
        t = f.same_dim(v, -i, other, -i);
        if (t != truth::yes) broken = int(*rank) - i;
      }
      if (t == truth::yes) return true;
      c.fail(where, c.g.producer(v), [&](std::string& m) {
        m += describe_value(c.g, v) + " is " + f.shape_text(v) +
             (t == truth::no ? ", which does not broadcast to " : ", not proven to broadcast to ");
        m += quoted(Other.view());
        m += " " + f.shape_text(other);
        const std::string why = broken >= 0 ? f.why_unknown(v, broken) : f.why_unknown(v);
        if (t == truth::unknown && !why.empty()) m += "; " + why;
      });
    }
    return false;
  }
};

// .where_bound("why", [](const graph& g, value_id v, const auto& bound) { … }): bound.template
// get<"q">() and has<"q">() read the captures bound so far.
template <class F>
struct value_where_bound {
  const char* text;
  F fn;
  void describe(std::string& out) const { out += text; }
  template <class C>
  bool check(C& c, const site* where, value_id v) const {
    if (fn(c.g, v, bound_captures<typename C::captures>{c.slots.data()})) return true;
    c.fail(where, c.g.producer(v),
           [&](std::string& m) { message::not_satisfied(m, describe_value(c.g, v), text); });
    return false;
  }
};

// .proven_value("1/√64", [](const facts& f, value_id v) { … return truth::yes; }): only a proof
// passes; "not proven" and "it is not" are told apart in the explanation.
template <class F>
struct proven_value_is {
  const char* text;
  F fn;
  void describe(std::string& out) const { out += text; }
  template <class C>
  bool check(C& c, const site* where, value_id v) const {
    const facts& f = facts_of(c.g);
    static_assert(std::is_same_v<decltype(fn(f, v)), truth>,
                  "fusekit: proven_value(): the function must return fusekit::truth");
    const truth t = fn(f, v);
    if (t == truth::yes) return true;
    c.fail(where, c.g.producer(v), [&](std::string& m) {
      m += describe_value(c.g, v) + (t == truth::no ? ": it is not " : ": not proven ") + text;
    });
    return false;
  }
};

// ---- the elements of a constant: constant<"w">.values({1, 0, 0.5})

namespace detail {

// "[1, 0]": a row-major element position as an index per dim.
inline std::string element_index_text(const onnx::TensorProto& t, std::int64_t flat) {
  std::string text = "]";
  for (int d = t.dims_size() - 1; d >= 0; --d) {
    const std::int64_t size = t.dims(d) > 0 ? t.dims(d) : 1;
    text.insert(0, std::to_string(flat % size) + (d + 1 < t.dims_size() ? ", " : ""));
    flat /= size;
  }
  return "[" + text;
}

// "constant 'w' (initializer 'w')": the subject of a constant's near miss.
[[gnu::cold]] inline void constant_subject(std::string& m, const graph& g, std::string_view name,
                                           value_id v) {
  m += "constant ";
  m += quoted(name);
  m += " (" + describe_value(g, v) + ")";
}

}  // namespace detail

// Exactly these elements, in row-major order, as many as listed; each within the tolerance (an
// infinity equals only itself). Any numeric dtype, read as double: the values a rule names (0.5,
// √2) are what the model holds, whatever precision holds them.
template <fixed_string Name, std::size_t N>
struct elements_are {
  std::array<double, N> values;
  double tolerance;

  void describe(std::string& out) const {
    out += "values ";
    list_text(out);
  }

  template <class C>
  bool check(C& c, const site* where, value_id v) const {
    const onnx::TensorProto* t = c.g.constant_tensor(v);
    if (t == nullptr) return false;  // only constant<>, which checked it, offers .values()
    enum class kind : std::uint8_t { not_numeric, count, element };
    kind what = kind::element;
    std::int64_t at = 0;
    double found = 0;
    try {
      // Read in place: no allocation for a tensor stored inline.
      const tensor_values elements(*t, c.g.directory());
      if (!elements.is_numeric()) {
        what = kind::not_numeric;
      } else if (elements.size() != std::int64_t(N)) {
        what = kind::count;
        at = elements.size();
      } else {
        for (; at < std::int64_t(N); ++at) {
          found = elements.as_double(at);
          const double want = values[std::size_t(at)];
          if (!(found == want || std::abs(found - want) <= tolerance)) break;
        }
        if (at == std::int64_t(N)) return true;
      }
    } catch (const std::exception& e) {
      c.fail(where, c.g.producer(v), [&](std::string& m) {
        detail::constant_subject(m, c.g, Name.view(), v);
        m += " cannot be read: ";
        m += e.what();
      });
      return false;
    }
    c.fail(where, c.g.producer(v), [&](std::string& m) {
      detail::constant_subject(m, c.g, Name.view(), v);
      const dtype type = dtype(t->data_type());
      if (what == kind::not_numeric) {
        m += " holds " + std::string(dtype_name(type)) + ", not numbers";
        return;
      }
      m += " is not ";
      list_text(m);
      if (what == kind::count) {
        m += ": it has " + std::to_string(at) + " elements";
      } else {
        const bool single = is_float(type) && type != dtype::float64;
        m += ": element " + detail::element_index_text(*t, at) + " is " +
             number_text(found, single) + ", expected " + number_text(values[std::size_t(at)]);
      }
    });
    return false;
  }

 private:
  void list_text(std::string& out) const {
    out += "[";
    for (std::size_t i = 0; i < N; ++i) out += (i ? ", " : "") + number_text(values[i]);
    out += "]";
  }
};

}  // namespace fusekit::pattern
