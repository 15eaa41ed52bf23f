// Predicates: small structs that can both check and describe themselves. Value predicates look at
// a value (dtype, rank, shape); node predicates at the node producing it (attributes, opset).
// Each check reports its own failure reason to the context, so explanations name the culprit.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>

#include "fusekit/graph/facts.hpp"
#include "fusekit/graph/graph.hpp"
#include "fusekit/graph/sym.hpp"
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
// `axis`, which equals a last-axis softmax exactly when axis is last.
struct last_axis_t {
  void describe(std::string& out) const { out += "the last axis"; }
  bool accepts(const graph& g, node_id n, const onnx::AttributeProto& a) const {
    if (a.type() != onnx::AttributeProto::INT) return false;
    if (a.i() == -1) return true;
    const auto rank = facts_of(g).rank(g.input(n, 0));
    return rank && a.i() == std::int64_t(*rank) - 1;
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
      static_assert(C::captures::kinds[k] == capture_kind::value,
                    "fusekit: same_dim<>: the other capture must be a value (capture<>)");
      const slot& other = c.slots[k];
      if (!other.bound) {
        c.fail(where, c.g.producer(v), [&](std::string& m) {
          message::not_bound_yet(m, describe_value(c.g, v), "same_dim", Other.view());
        });
        return false;
      }
      const facts& f = facts_of(c.g);
      const truth t = f.same_dim(v, I, other.id, J);
      if (t == truth::yes) return true;
      c.fail(where, c.g.producer(v), [&](std::string& m) {
        m += describe_value(c.g, v) + ": dim " + std::to_string(I) +
             (t == truth::no ? " is not equal to dim " : " is not proven equal to dim ") +
             std::to_string(J) + " of ";
        m += quoted(Other.view());
        m += ": " + f.shape_text(v) + " vs " + f.shape_text(other.id);
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

}  // namespace fusekit::pattern
