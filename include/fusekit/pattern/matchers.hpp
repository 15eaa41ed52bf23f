// The pattern vocabulary. Every pattern is a small constexpr struct with
//   using captures = decl_list<…>;          what it binds (checked at compile time)
//   static constexpr std::size_t nodes;     the most op nodes it can hold matched at once
//   match(context, where, value, rest)      continuation-passing: calls rest() after matching, and
//                                           undoes its bindings if rest() fails, so any_of,
//                                           optional and commutative backtrack for real
//   describe(out)                           readable text of the pattern
// Matching is template code over the pattern's types: no virtual calls, no std::function, no
// allocation; the continuation is one non-owning function pointer (see context.hpp).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "fusekit/engine.hpp"
#include "fusekit/graph/graph.hpp"
#include "fusekit/pattern/captures.hpp"
#include "fusekit/pattern/context.hpp"
#include "fusekit/pattern/fixed_string.hpp"
#include "fusekit/pattern/predicates.hpp"

namespace fusekit::pattern {

// ---- a minimal heterogeneous list (std::tuple costs measurable compile time)

template <class... Ts>
struct pack;

template <>
struct pack<> {};

template <class T, class... Ts>
struct pack<T, Ts...> {
  T head;
  pack<Ts...> tail;
};

constexpr pack<> make_pack() { return {}; }
template <class T, class... Ts>
constexpr pack<T, Ts...> make_pack(T t, Ts... ts) {
  return {t, make_pack(ts...)};
}

template <class U>
constexpr pack<U> append(const pack<>&, U u) {
  return {u, {}};
}
template <class T, class... Ts, class U>
constexpr pack<T, Ts..., U> append(const pack<T, Ts...>& p, U u) {
  return {p.head, append(p.tail, u)};
}

template <class T>
struct captures_of {
  using type = decl_list<>;
};
template <class T>
requires requires { typename T::captures; }
struct captures_of<T> {
  using type = typename T::captures;
};

// Op inputs that change the op's arity: maybe(p) (an input that may be omitted), all<"xs">
// (every input, as a list) and around<"before", "after">(p) (one input p, wherever it stands).
template <class P>
struct maybe_t;
template <fixed_string Name, class Element>
struct all_t;
template <fixed_string Before, fixed_string After, class Element>
struct around_t;

template <class T>
inline constexpr bool is_maybe = false;
template <class P>
inline constexpr bool is_maybe<maybe_t<P>> = true;
template <class T>
inline constexpr bool is_all = false;
template <fixed_string Name, class Element>
inline constexpr bool is_all<all_t<Name, Element>> = true;
template <class T>
inline constexpr bool is_around = false;
template <fixed_string Before, fixed_string After, class Element>
inline constexpr bool is_around<around_t<Before, After, Element>> = true;

template <class P>
struct pack_traits;
template <class... Ts>
struct pack_traits<pack<Ts...>> {
  using captures = merge_t<typename captures_of<Ts>::type...>;
  static constexpr std::size_t nodes = (std::size_t(0) + ... + Ts::nodes);
  static constexpr std::size_t size = sizeof...(Ts);
  // Inputs up to the last one that is not maybe(): fewer given inputs cannot match.
  static constexpr std::size_t required = [] {
    std::size_t r = 0, i = 0;
    ((++i, r = is_maybe<Ts> ? r : i), ...);
    return r;
  }();
  // Position of the first maybe() (size when there is none).
  static constexpr std::size_t first_maybe = [] {
    std::size_t f = sizeof...(Ts), i = 0;
    ((f = is_maybe<Ts> && f == sizeof...(Ts) ? i : f, ++i), ...);
    return f;
  }();
  static constexpr bool variadic = ((is_all<Ts> || is_around<Ts>) || ...);
};
template <>
struct pack_traits<pack<>> {
  using captures = decl_list<>;
  static constexpr std::size_t nodes = 0;
  static constexpr std::size_t size = 0;
  static constexpr std::size_t required = 0;
  static constexpr std::size_t first_maybe = 0;
  static constexpr bool variadic = false;
};

template <class... Ts>
struct pred_pack_traits;
template <class... Ts>
struct pred_pack_traits<pack<Ts...>> {
  using captures = merge_t<typename captures_of<Ts>::type...>;
};

template <class P>
void describe_list(const P& p, std::string& out, bool first = true) {
  if constexpr (!std::is_same_v<P, pack<>>) {
    if (!first) out += ", ";
    p.head.describe(out);
    describe_list(p.tail, out, false);
  }
}

// ---- predicates applied in continuation style, so binders and checks chain alike

template <class Pred>
concept node_predicate = requires {
  Pred::on_node;
};

template <class C>
bool apply_all(const pack<>&, C&, const site*, node_id, value_id, continuation rest) {
  return rest();
}
template <class T, class... Ts, class C>
bool apply_all(const pack<T, Ts...>& p, C& c, const site* where, node_id n, value_id v,
               continuation rest) {
  auto next = [&] { return apply_all(p.tail, c, where, n, v, rest); };
  if constexpr (requires { p.head.apply(c, where, n, v, next); })
    return p.head.apply(c, where, n, v, next);
  else if constexpr (node_predicate<T>)
    return p.head.check(c, where, n) && next();
  else
    return p.head.check(c, where, v) && next();
}

// ---- binders

template <fixed_string Name>
struct bind_node {
  using captures = decl_list<decl<Name, capture_kind::node>>;
  // Appended piece by piece: g++ 12 at -O3 misreads "@" + string as an overlapping copy
  // (-Wrestrict).
  void describe(std::string& out) const {
    out += '@';
    out += Name.view();
  }
  template <class C>
  bool apply(C& c, const site*, node_id n, value_id, continuation rest) const {
    constexpr std::size_t i = index_of<typename C::captures>(Name.view());
    return c.template bind<i>(slot{.id = n}, rest);
  }
};

template <fixed_string Attr, fixed_string Name>
struct bind_attribute {
  using captures = decl_list<decl<Name, capture_kind::attribute>>;
  void describe(std::string& out) const {
    out += std::string(Attr.view()) + "@" + std::string(Name.view());
  }
  template <class C>
  bool apply(C& c, const site*, node_id n, value_id, continuation rest) const {
    constexpr std::size_t i = index_of<typename C::captures>(Name.view());
    return c.template bind<i>(slot{.pointer = c.g.attribute(n, Attr.view()).attribute}, rest);
  }
};

template <std::uint32_t Slot, fusekit::dtype... Types>
struct input_dtype_is {
  static constexpr bool on_node = true;
  void describe(std::string& out) const {
    out += "input " + std::to_string(Slot) + " ";
    dtype_is<Types...>{}.describe(out);
  }
  template <class C>
  bool check(C& c, const site* where, node_id n) const {
    const value_id in = c.g.input(n, Slot);
    const fusekit::dtype t = in == no_id ? fusekit::dtype::undefined : c.g.type(in);
    if (((t == Types) || ...)) return true;
    c.fail(where, n, [&](std::string& m) {
      m += c.g.describe(n) + ": input " + std::to_string(Slot) + " has dtype " +
           std::string(dtype_name(t)) + ", expected ";
      std::string expected;
      dtype_is<Types...>{}.describe(expected);
      m += expected.substr(6);
    });
    return false;
  }
};

// Node predicates say so, to be handed the node rather than its output value.
template <class Pred>
struct node_check : Pred {
  static constexpr bool on_node = true;
};

// ---- value predicates shared by the value patterns (any, capture, constant_scalar, constant)

template <class Inner, class Pred>
struct checked;

template <class Self>
struct value_predicates {
  template <fusekit::dtype... Types>
  constexpr auto dtype() const {
    return checked<Self, dtype_is<Types...>>{self(), {}};
  }
  template <std::size_t Rank>
  constexpr auto rank() const {
    return checked<Self, rank_is<Rank>>{self(), {}};
  }
  template <class... Dims>
  constexpr auto shape(Dims... dims) const {
    return checked<Self, shape_is<sizeof...(Dims)>>{self(), {{dim_is(dims)...}}};
  }
  template <class F>
  constexpr auto where(const char* text, F fn) const {
    return checked<Self, value_where<F>>{self(), {text, fn}};
  }
  // Facts the ops prove (fusekit::facts_of), and checks that see the captures bound so far.
  template <std::size_t Rank>
  constexpr auto proven_rank() const {
    return checked<Self, proven_rank_is<Rank>>{self(), {}};
  }
  template <int I, fixed_string Other, int J>
  constexpr auto same_dim() const {
    return checked<Self, same_dim_as<I, Other, J>>{self(), {}};
  }
  template <fixed_string Other>
  constexpr auto broadcasts_to() const {
    return checked<Self, broadcasts_to_bound<Other>>{self(), {}};
  }
  template <class F>
  constexpr auto where_bound(const char* text, F fn) const {
    return checked<Self, value_where_bound<F>>{self(), {text, fn}};
  }
  template <class F>
  constexpr auto proven_value(const char* text, F fn) const {
    return checked<Self, proven_value_is<F>>{self(), {text, fn}};
  }

 private:
  constexpr const Self& self() const { return static_cast<const Self&>(*this); }
};

// The predicates that state what a value is (its dtype, rank, shape), as opposed to what the ops
// compute of it: a failure of one is told before another pattern refusing the value in its place
// (explanation::checking_predicate).
template <class Pred>
inline constexpr bool declares_property = false;
template <fusekit::dtype... Types>
inline constexpr bool declares_property<dtype_is<Types...>> = true;
template <std::size_t Rank>
inline constexpr bool declares_property<rank_is<Rank>> = true;
template <std::size_t Rank>
inline constexpr bool declares_property<proven_rank_is<Rank>> = true;
template <std::size_t N>
inline constexpr bool declares_property<shape_is<N>> = true;

template <class Inner, class Pred>
struct checked : value_predicates<checked<Inner, Pred>> {
  Inner inner;
  Pred pred;
  using captures = typename captures_of<Inner>::type;
  static constexpr std::size_t nodes = Inner::nodes;

  constexpr checked(Inner inner, Pred pred) : inner(inner), pred(pred) {}

  void describe(std::string& out) const {
    inner.describe(out);
    out += "{";
    pred.describe(out);
    out += "}";
  }
  // The value counts as held (context::hold) once its predicates pass, not before: a capture that
  // fails its dtype is as far as a constant of the wrong value in its place.
  template <class C>
  bool match(C& c, const site* where, value_id v, continuation rest) const {
    return inner.match(c, where, v, [&] {
      --c.held;
      bool ok;
      if (c.sink == nullptr || !declares_property<Pred>) {
        ok = pred.check(c, where, v);
      } else {
        const bool outer = std::exchange(c.sink->checking_predicate, true);
        ok = pred.check(c, where, v);
        c.sink->checking_predicate = outer;
      }
      ++c.held;
      return ok && rest();
    });
  }
};

// ---- any(): any value

struct any_t : value_predicates<any_t> {
  using captures = decl_list<>;
  static constexpr std::size_t nodes = 0;
  void describe(std::string& out) const { out += "_"; }
  template <class C>
  bool match(C& c, const site* where, value_id v, continuation rest) const {
    if (v != no_id) return c.hold(rest);
    c.fail(where, no_id, [](std::string& m) { message::omitted(m, {}); });
    return false;
  }
};
constexpr any_t any() { return {}; }

// ---- capture<"q">: binds a value; the same name twice means the same value

template <fixed_string Name, class Inner>
struct captured;

template <fixed_string Name>
struct capture_t : value_predicates<capture_t<Name>> {
  using captures = decl_list<decl<Name, capture_kind::value>>;
  static constexpr std::size_t nodes = 0;

  void describe(std::string& out) const { out += Name.view(); }

  template <class C>
  bool match(C& c, const site* where, value_id v, continuation rest) const {
    constexpr std::size_t i = index_of<typename C::captures>(Name.view());
    if (v == no_id) {
      c.fail(where, no_id, [](std::string& m) { message::omitted(m, Name.view()); });
      return false;
    }
    const slot& bound = c.slots[i];
    if (bound.bound && bound.id != v) {
      c.fail(where, c.g.producer(v),
             [&](std::string& m) { message::capture_conflict(m, c.g, Name.view(), bound.id, v); });
      return false;
    }
    return c.template bind<i>(slot{.id = v}, rest);
  }

  // capture<"x">(p): binds the value and requires it to match p.
  template <class P>
  constexpr captured<Name, P> operator()(P p) const {
    return {p};
  }
};

template <fixed_string Name>
inline constexpr capture_t<Name> capture{};

template <fixed_string Name, class Inner>
struct captured {
  Inner inner;
  using captures = merge_t<decl_list<decl<Name, capture_kind::value>>, typename Inner::captures>;
  static constexpr std::size_t nodes = Inner::nodes;

  void describe(std::string& out) const {
    out += std::string(Name.view()) + ":";
    inner.describe(out);
  }
  template <class C>
  bool match(C& c, const site* where, value_id v, continuation rest) const {
    return capture<Name>.match(c, where, v, [&] { return inner.match(c, where, v, rest); });
  }
  template <class C>
  bool match_root(C& c, node_id n, continuation rest) const {
    constexpr std::size_t i = index_of<typename C::captures>(Name.view());
    return c.template bind<i>(slot{.id = c.g.output(n, 0)},
                              [&] { return inner.match_root(c, n, rest); });
  }
};

// ---- constant_scalar<"scale">: a one-element numeric constant of any dtype, bound as double

namespace detail {
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE void not_constant(std::string& m, const graph& g, std::string_view what,
                                        std::string_view name, value_id v) {
  m += "expected " + std::string(what) + " '" + std::string(name) + "', ";
  if (v == no_id)
    m += "the input is omitted";
  else if (g.is_initializer(v) && g.is_graph_input(v))
    m += "initializer '" + std::string(g.name(v)) +
         "' is also a graph input, so it can be overridden at run time";
  else if (const onnx::TensorProto* t = g.constant_tensor(v))
    m += describe_value(g, v) + " has " + std::to_string(element_count(*t)) + " elements of " +
         std::string(dtype_name(dtype(t->data_type())));
  else
    m += describe_value(g, v) + " is not a constant";
}
#else
void not_constant(std::string& m, const graph& g, std::string_view what, std::string_view name,
                  value_id v);
#endif

// A float32 or half constant prints as the float it is (0.6, not 0.6000000238418579).
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE void wrong_scalar(std::string& m, std::string_view name, double found,
                                        double expected, dtype type,
                                        std::string_view relation = {}) {
  const bool single = type == dtype::float32 || type == dtype::float16 || type == dtype::bfloat16;
  m += "constant scalar '" + std::string(name) + "' is " + number_text(found, single) +
       ", expected " + std::string(relation) + number_text(expected);
}
#else
void wrong_scalar(std::string& m, std::string_view name, double found, double expected, dtype type,
                  std::string_view relation = {});
#endif
}  // namespace detail

template <fixed_string Name>
struct constant_scalar_t : value_predicates<constant_scalar_t<Name>> {
  using captures = decl_list<decl<Name, capture_kind::number>>;
  static constexpr std::size_t nodes = 0;
  bool has_expected = false;
  double expected = 0;
  double tolerance = 0;
  bool has_most = false;
  double most = 0;
  bool has_least = false;
  double least = 0;

  // constant_scalar<"one">.value(1.0): the constant must also equal 1 (within the tolerance, or
  // exactly the number its own type holds nearest, as a bfloat16 √(2/π) is 0.796875; an infinity
  // equals only itself).
  constexpr constant_scalar_t value(double want, double tol = 1e-6) const {
    constant_scalar_t copy = *this;
    copy.has_expected = true;
    copy.expected = want;
    copy.tolerance = tol;
    return copy;
  }
  // constant_scalar<"fill">.at_most(-1e4): inclusive bounds; -inf is at most anything.
  constexpr constant_scalar_t at_most(double bound) const {
    constant_scalar_t copy = *this;
    copy.has_most = true;
    copy.most = bound;
    return copy;
  }
  constexpr constant_scalar_t at_least(double bound) const {
    constant_scalar_t copy = *this;
    copy.has_least = true;
    copy.least = bound;
    return copy;
  }

  void describe(std::string& out) const {
    out += std::string(Name.view()) + ":constant scalar";
    if (has_expected) out += "=" + number_text(expected);
    if (has_least) out += ">=" + number_text(least);
    if (has_most) out += "<=" + number_text(most);
  }

  template <class C>
  bool match(C& c, const site* where, value_id v, continuation rest) const {
    const auto found = v == no_id ? std::nullopt : c.g.constant_scalar(v);
    if (!found) {
      c.fail(where, v == no_id ? no_id : c.g.producer(v), [&](std::string& m) {
        detail::not_constant(m, c.g, "constant scalar", Name.view(), v);
      });
      return false;
    }
    if (has_expected && !(*found == expected || *found == rounded_to(expected, c.g.type(v)) ||
                          std::abs(*found - expected) <= tolerance)) {
      c.fail(where, c.g.producer(v), [&](std::string& m) {
        detail::wrong_scalar(m, Name.view(), *found, expected, c.g.type(v));
      });
      return false;
    }
    if ((has_most && !(*found <= most)) || (has_least && !(*found >= least))) {
      c.fail(where, c.g.producer(v), [&](std::string& m) {
        const bool above = has_most && !(*found <= most);
        detail::wrong_scalar(m, Name.view(), *found, above ? most : least, c.g.type(v),
                             above ? "at most " : "at least ");
      });
      return false;
    }
    constexpr std::size_t i = index_of<typename C::captures>(Name.view());
    return c.template bind<i>(slot{.number = *found}, rest);
  }
};

template <fixed_string Name>
inline constexpr constant_scalar_t<Name> constant_scalar{};

// ---- constant<"mask">: any constant tensor (initializer or Constant node), bound as TensorProto

// What a constant's elements must be: .all_equal(), .all_ones(), .lower_triangular_ones(),
// .strictly_upper_triangular_ones().
enum class tensor_rule : std::uint8_t {
  none,
  all_equal,
  all_ones,
  lower_triangular_ones,
  strictly_upper_triangular_ones
};

namespace detail {

inline const char* tensor_rule_text(tensor_rule rule) {
  switch (rule) {
    case tensor_rule::all_equal:
      return "all equal";
    case tensor_rule::all_ones:
      return "all ones";
    case tensor_rule::lower_triangular_ones:
      return "lower-triangular ones";
    case tensor_rule::strictly_upper_triangular_ones:
      return "strictly upper-triangular ones";
    case tensor_rule::none:
      break;
  }
  return "";
}

// Why a tensor breaks its rule; `element` is the first offending one (row-major).
struct tensor_rule_failure {
  enum class kind : std::uint8_t { none, unreadable, not_numeric, low_rank, element };
  kind what = kind::none;
  std::int64_t element = 0;
  double found = 0;
  double expected = 0;  // all_equal: element 0
  std::string error;    // unreadable: the reader's message
};

// Checks every element; allocates nothing for tensors stored inline (raw_data or typed fields).
inline tensor_rule_failure check_tensor_rule(const graph& g, const onnx::TensorProto& t,
                                             tensor_rule rule) {
  using kind = tensor_rule_failure::kind;
  tensor_rule_failure f;
  const bool triangle = rule == tensor_rule::lower_triangular_ones ||
                        rule == tensor_rule::strictly_upper_triangular_ones;
  if (triangle && t.dims_size() < 2) {
    f.what = kind::low_rank;
    return f;
  }
  try {
    const tensor_values values(t, g.directory());
    if (!values.is_numeric()) {
      f.what = kind::not_numeric;
      return f;
    }
    const bool real = is_float(values.type());
    const std::int64_t rows = triangle ? t.dims(t.dims_size() - 2) : 1;
    const std::int64_t cols = triangle ? t.dims(t.dims_size() - 1) : 1;
    const double first = values.size() > 0 ? values.as_double(0) : 0;
    const std::int64_t first_int = values.size() > 0 && !real ? values.as_int64(0) : 0;
    for (std::int64_t i = 0; i < values.size(); ++i) {
      double want = 1;
      bool ok = true;
      if (rule == tensor_rule::all_equal) {
        want = first;
        ok = real ? values.as_double(i) == first : values.as_int64(i) == first_int;
      } else {
        if (triangle) {
          const std::int64_t within = cols * rows == 0 ? 0 : i % (rows * cols);
          const bool lower = within % cols <= within / cols;
          want = lower == (rule == tensor_rule::lower_triangular_ones) ? 1 : 0;
        }
        ok = values.as_double(i) == want;
      }
      if (!ok) {
        f.what = kind::element;
        f.element = i;
        f.found = values.as_double(i);
        f.expected = want;
        return f;
      }
    }
  } catch (const std::exception& e) {
    f.what = kind::unreadable;
    f.error = e.what();
  }
  return f;
}

[[gnu::cold]] inline void broken_tensor_rule(std::string& m, const graph& g, std::string_view name,
                                             value_id v, tensor_rule rule,
                                             const tensor_rule_failure& f) {
  using kind = tensor_rule_failure::kind;
  const onnx::TensorProto& t = *g.constant_tensor(v);
  m += "constant ";
  m += quoted(name);
  m += " (" + describe_value(g, v) + ")";
  const bool single = is_float(dtype(t.data_type())) && dtype(t.data_type()) != dtype::float64;
  switch (f.what) {
    case kind::unreadable:
      m += " cannot be read: " + f.error;
      return;
    case kind::not_numeric:
      m += " holds " + std::string(dtype_name(dtype(t.data_type()))) + ", not numbers";
      return;
    case kind::low_rank:
      m += " has rank " + std::to_string(t.dims_size()) + ", " + tensor_rule_text(rule) +
           " need at least 2";
      return;
    case kind::element:
      m += " is not " + std::string(tensor_rule_text(rule)) + ": element " +
           element_index_text(t, f.element) + " is " + number_text(f.found, single);
      if (rule == tensor_rule::all_equal)
        m += ", element " + element_index_text(t, 0) + " is " + number_text(f.expected, single);
      else if (rule != tensor_rule::all_ones)
        m += ", expected " + number_text(f.expected);
      return;
    case kind::none:
      return;
  }
}

}  // namespace detail

template <fixed_string Name>
struct constant_t : value_predicates<constant_t<Name>> {
  using captures = decl_list<decl<Name, capture_kind::tensor>>;
  static constexpr std::size_t nodes = 0;
  tensor_rule rule = tensor_rule::none;

  // Rules on the elements (any numeric dtype, bool included); each replaces the previous one.
  constexpr constant_t all_equal() const { return with_rule(tensor_rule::all_equal); }
  constexpr constant_t all_ones() const { return with_rule(tensor_rule::all_ones); }
  // Over the last two dims: ones on and below the diagonal, zeros above (a causal mask).
  constexpr constant_t lower_triangular_ones() const {
    return with_rule(tensor_rule::lower_triangular_ones);
  }
  // Zeros on and below the diagonal, ones above (what a causal mask hides).
  constexpr constant_t strictly_upper_triangular_ones() const {
    return with_rule(tensor_rule::strictly_upper_triangular_ones);
  }
  // .values({1, 0, 0.5}): these elements, row-major (elements_are); the braces keep the
  // tolerance apart from the elements, as in constant_scalar's .value(x, tol).
  template <std::size_t N>
  constexpr auto values(const double (&want)[N], double tol = 1e-6) const {
    return checked<constant_t, elements_are<Name, N>>{*this, {std::to_array(want), tol}};
  }

  void describe(std::string& out) const {
    out += std::string(Name.view()) + ":constant";
    if (rule != tensor_rule::none) {
      out += '{';  // piece by piece, as bind_node's describe
      out += detail::tensor_rule_text(rule);
      out += '}';
    }
  }

  template <class C>
  bool match(C& c, const site* where, value_id v, continuation rest) const {
    const onnx::TensorProto* t = v == no_id ? nullptr : c.g.constant_tensor(v);
    if (t == nullptr) {
      c.fail(where, v == no_id ? no_id : c.g.producer(v),
             [&](std::string& m) { detail::not_constant(m, c.g, "constant", Name.view(), v); });
      return false;
    }
    if (rule != tensor_rule::none) {
      const detail::tensor_rule_failure f = detail::check_tensor_rule(c.g, *t, rule);
      if (f.what != detail::tensor_rule_failure::kind::none) {
        c.fail(where, c.g.producer(v), [&](std::string& m) {
          detail::broken_tensor_rule(m, c.g, Name.view(), v, rule, f);
        });
        return false;
      }
    }
    constexpr std::size_t i = index_of<typename C::captures>(Name.view());
    return c.template bind<i>(slot{.id = v, .pointer = t}, rest);
  }

 private:
  constexpr constant_t with_rule(tensor_rule r) const {
    constant_t copy = *this;
    copy.rule = r;
    return copy;
  }
};

template <fixed_string Name>
inline constexpr constant_t<Name> constant{};

// ---- op<"Name">(inputs…): a node of that op type whose inputs match, in order

template <fixed_string Name, fixed_string Domain>
struct op_spec {
  static constexpr std::string_view name = Name.view();
  static constexpr std::string_view domain = canonical_domain(Domain.view());
  static constexpr bool known_domain = domain.empty() || domain == "com.microsoft";
  static constexpr std::optional<op_id> id = find_known_op(domain, name);

  static bool matches(const graph& g, node_id n) {
    if constexpr (id.has_value())
      return g.op(n) == *id;
    else
      return g.op_type(n) == name && g.domain(n) == domain;
  }
};

template <class Spec, class Inputs, class Preds, bool Commute = false>
struct op_pattern {
  Inputs inputs;
  Preds preds;
  use_policy policy = use_policy::contained;
  std::uint32_t slot = 0;

  using spec = Spec;
  using captures =
      merge_t<typename pack_traits<Inputs>::captures, typename pred_pack_traits<Preds>::captures>;
  static constexpr std::size_t nodes = 1 + pack_traits<Inputs>::nodes;
  // Input patterns; a node may omit the trailing maybe() ones, and all<> takes any number (1+).
  static constexpr std::size_t arity = pack_traits<Inputs>::size;
  static constexpr std::size_t required = pack_traits<Inputs>::required;
  static constexpr bool variadic = pack_traits<Inputs>::variadic;

  // ---- chaining: each returns a new pattern with one more predicate

  template <class P>
  constexpr auto with(P p) const {
    using next = op_pattern<Spec, Inputs, decltype(append(preds, p)), Commute>;
    return next{inputs, append(preds, p), policy, slot};
  }
  template <fixed_string Attr, class V>
  constexpr auto attr(V v) const {
    using matcher = decltype(attribute_matcher(v));
    return with(node_check<attribute_is<Attr, matcher>>{{attribute_matcher(v)}});
  }
  // A Reduce op's axes, from the attribute or the constant input 1 that replaced it (axes_are).
  template <class M>
  constexpr auto axes(M m) const {
    static_assert(Spec::domain.empty() && Spec::name.starts_with("Reduce"),
                  "fusekit: .axes() reads the axes of a Reduce op (attribute or input 1); other "
                  "ops: .attr<\"axes\">(…)");
    static_assert(
        requires(const M& k, const graph& g, const int_list& l) { k.on_axes(g, 0, l); },
        "fusekit: .axes() takes last_axis or ints(…)");
    return with(axes_are<M>{m});
  }
  template <fusekit::dtype... Types>
  constexpr auto dtype() const {
    return with(dtype_is<Types...>{});
  }
  template <std::size_t Rank>
  constexpr auto rank() const {
    return with(rank_is<Rank>{});
  }
  template <class... Dims>
  constexpr auto shape(Dims... dims) const {
    return with(shape_is<sizeof...(Dims)>{{dim_is(dims)...}});
  }
  template <std::int64_t Min, std::int64_t Max = INT64_MAX>
  constexpr auto opset() const {
    return with(node_check<opset_in<Min, Max>>{});
  }
  template <class F>
  constexpr auto where(const char* text, F fn) const {
    return with(node_check<node_where<F>>{{text, fn}});
  }
  constexpr auto forwardable() const { return with(node_check<forwardable_output>{}); }
  template <fixed_string BindName>
  constexpr auto bind() const {
    return with(bind_node<BindName>{});
  }
  template <fixed_string Attr, fixed_string BindName>
  constexpr auto bind_attr() const {
    return with(bind_attribute<Attr, BindName>{});
  }
  constexpr op_pattern with_policy(use_policy p) const {
    op_pattern copy = *this;
    copy.policy = p;
    return copy;
  }
  constexpr op_pattern multi_use() const { return with_policy(use_policy::any); }
  constexpr op_pattern one_user() const { return with_policy(use_policy::one_user); }
  constexpr op_pattern one_use() const { return with_policy(use_policy::one_use); }
  // Match output k of the node instead of output 0 (Split, TopK …).
  constexpr op_pattern output(std::uint32_t k) const {
    op_pattern copy = *this;
    copy.slot = k;
    return copy;
  }

  // ---- matching

  template <class C>
  bool match(C& c, const site* where, value_id v, continuation rest) const {
    const node_id n = v == no_id ? no_id : c.g.producer(v);
    if (n == no_id || !Spec::matches(c.g, n) || c.g.producer_slot(v) != slot) {
      c.fail(where, n, [&](std::string& m) { message::expected_op(m, c.g, Spec::name, slot, v); });
      return false;
    }
    return match_node(c, where, n, false, rest);
  }

  template <class C>
  bool match_root(C& c, node_id n, continuation rest) const {
    if (!Spec::matches(c.g, n)) {
      // Appended piece by piece: GCC 12 warns of a bound (wrongly) where temporaries are joined.
      c.fail(nullptr, n, [&](std::string& m) {
        m += "expected ";
        m += Spec::name;
        m += ", found ";
        m += c.g.describe(n);
      });
      return false;
    }
    return match_node(c, nullptr, n, true, rest);
  }

  template <class C>
  bool match_node(C& c, const site* where, node_id n, bool root, continuation rest) const {
    std::size_t given = c.g.inputs(n).size();
    while (given > 0 && c.g.input(n, given - 1) == no_id) --given;
    c.in_node = true;
    constexpr std::size_t least = variadic ? 1 : required;
    constexpr std::size_t most = variadic ? npos : arity;
    if (given < least || given > most) {
      c.fail(where, n,
             [&](std::string& m) { message::wrong_arity(m, c.g, n, given, least, most); });
      c.in_node = false;
      return false;
    }
    const value_id out = c.g.output(n, slot);
    const bool ok = apply_all(preds, c, where, n, out, [&] {
      c.in_node = false;
      c.push(n, policy, root);
      const bool inputs_ok = match_inputs(c, where, n, given, rest);
      c.pop();
      return inputs_ok;
    });
    c.in_node = false;
    return ok;
  }

  void describe(std::string& out) const {
    out += Spec::name;
    if (slot != 0) out += "#" + std::to_string(slot);
    if constexpr (!std::is_same_v<Preds, pack<>>) {
      out += "[";
      describe_list(preds, out);
      out += "]";
    }
    if (policy == use_policy::any) out += "{multi-use}";
    if (policy == use_policy::one_user) out += "{one user}";
    if (policy == use_policy::one_use) out += "{one use}";
    out += Commute ? "{commutative}(" : "(";
    describe_list(inputs, out);
    out += ")";
  }

 private:
  template <class C>
  bool match_inputs(C& c, const site* where, node_id n, std::size_t given,
                    continuation rest) const {
    if constexpr (variadic) {
      return inputs.head.match_all(c, where, n, given, rest);
    } else if constexpr (Commute) {
      return match_commuted(c, where, n, rest);
    } else {
      return match_in_order<0>(inputs, c, where, n, rest);
    }
  }

  template <std::uint32_t Slot, class P, class C>
  static bool match_in_order(const P& p, C& c, const site* where, node_id n, continuation rest) {
    if constexpr (std::is_same_v<P, pack<>>) {
      return rest();
    } else {
      const site here{n, Slot, where};
      return p.head.match(c, &here, c.g.input(n, Slot),
                          [&] { return match_in_order<Slot + 1>(p.tail, c, where, n, rest); });
    }
  }

  template <class C>
  bool match_commuted(C& c, const site* where, node_id n, continuation rest) const {
    if (match_pair(c, where, n, 0, 1, rest) || match_pair(c, where, n, 1, 0, rest)) return true;
    // Explaining, each operand order is also tried second operand first, so that the failures
    // the explanation chooses among are the same however the pattern lists the operands. Only
    // the failures count: what matches both ways has reached the rest already.
    if (c.sink != nullptr) {
      auto stop = [] { return false; };
      match_pair_reversed(c, where, n, 0, 1, stop);
      match_pair_reversed(c, where, n, 1, 0, stop);
    }
    return false;
  }

  template <class C>
  bool match_pair(C& c, const site* where, node_id n, std::uint32_t first, std::uint32_t second,
                  continuation rest) const {
    const site a{n, first, where};
    const site b{n, second, where};
    return inputs.head.match(c, &a, c.g.input(n, first), [&] {
      return inputs.tail.head.match(c, &b, c.g.input(n, second), rest);
    });
  }
  template <class C>
  bool match_pair_reversed(C& c, const site* where, node_id n, std::uint32_t first,
                           std::uint32_t second, continuation rest) const {
    const site a{n, first, where};
    const site b{n, second, where};
    return inputs.tail.head.match(c, &b, c.g.input(n, second), [&] {
      return inputs.head.match(c, &a, c.g.input(n, first), rest);
    });
  }
};

template <class T>
struct is_op_pattern : std::false_type {};
template <class S, class I, class P, bool C>
struct is_op_pattern<op_pattern<S, I, P, C>> : std::true_type {};

template <fixed_string Name, fixed_string Domain = "">
struct op_factory {
  using spec = op_spec<Name, Domain>;
  static_assert(!spec::known_domain || spec::id.has_value(),
                "fusekit: unknown op name: neither an ai.onnx op (through opset 24) nor a known "
                "com.microsoft op; check the spelling, or name a custom domain: "
                "op<\"Name\", \"my.domain\">");

  template <class... Inputs>
  constexpr auto operator()(Inputs... inputs) const {
    using traits = pack_traits<pack<Inputs...>>;
    static_assert(!traits::variadic || sizeof...(Inputs) == 1,
                  "fusekit: all<> stands for every input of the op, so it must be the op's only "
                  "input (around<> too)");
    if constexpr (spec::id.has_value()) {
      constexpr op_info info = known_ops[*spec::id];
      if constexpr (traits::variadic) {
        static_assert(info.max_inputs == variadic,
                      "fusekit: all<> needs an op with any number of inputs (Concat, Sum, Max …; "
                      "around<> too)");
      } else {
        static_assert(
            int(sizeof...(Inputs)) >= info.min_inputs && int(sizeof...(Inputs)) <= info.max_inputs,
            "fusekit: wrong number of inputs for this op (see fusekit::known_ops for "
            "each op's input count)");
        static_assert(int(traits::first_maybe) >= info.min_inputs,
                      "fusekit: maybe() of an input the op requires (see fusekit::known_ops for "
                      "each op's input count)");
      }
    }
    return op_pattern<spec, pack<Inputs...>, pack<>>{make_pack(inputs...), {}};
  }
};

template <fixed_string Name, fixed_string Domain = "">
inline constexpr op_factory<Name, Domain> op{};

// ---- commutative(op<…>(a, b)): tries both operand orders, without a second copy of the rule

// Binary ops whose operands may be swapped. Sub, Div, Pow or MatMul may not: a swapped match
// would fuse a different computation.
inline constexpr std::string_view commutative_ops[] = {
    "Add",  "And", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Equal", "Max",
    "Mean", "Min", "Mul",        "Or",        "Sum",        "Xor"};

constexpr bool is_commutative(std::string_view domain, std::string_view name) {
  if (!domain.empty()) return true;  // custom ops: the rule author knows
  for (std::string_view op_name : commutative_ops)
    if (op_name == name) return true;
  return false;
}

template <class S, class I, class P>
constexpr auto commutative(const op_pattern<S, I, P, false>& p) {
  static_assert(pack_traits<I>::size == 2, "fusekit: commutative() needs an op with two inputs");
  static_assert(is_commutative(S::domain, S::name),
                "fusekit: commutative() of an op whose operands may not be swapped (Sub, Div, "
                "MatMul …): a swapped match would compute something else");
  return op_pattern<S, I, P, true>{p.inputs, p.preds, p.policy, p.slot};
}

// ---- optional<"Cast">(p): Cast(p) or p itself; .bind<"name">() records which (no_id: absent)
// ---- optional_op(op<"Add">(p, q)): the op, or where it is absent its first input's pattern p at
// the value: one copy of p, where any_of(op(p, …), p) would hold and instantiate two

template <class Op, fixed_string BindName = "">
struct optional_t {
  static_assert(Op::arity >= 1, "fusekit: optional<> wraps an op with inputs");
  Op inner;

  static constexpr bool binds = !BindName.view().empty();
  using captures = merge_t<
      typename Op::captures,
      std::conditional_t<binds, decl_list<decl<BindName, capture_kind::node>>, decl_list<>>>;
  static constexpr std::size_t nodes = Op::nodes;

  template <fixed_string Name>
  constexpr optional_t<Op, Name> bind() const {
    return {inner};
  }
  template <fusekit::dtype... Types>
  constexpr auto to() const {
    return rewrap(inner.template attr<"to">(one_of_dtypes<Types...>()));
  }
  template <fusekit::dtype... Types>
  constexpr auto from() const {
    return rewrap(inner.with(input_dtype_is<0, Types...>{}));
  }
  template <fixed_string Attr, class V>
  constexpr auto attr(V v) const {
    return rewrap(inner.template attr<Attr>(v));
  }

  void describe(std::string& out) const {
    std::string text;
    inner.describe(text);
    out += Op::spec::name;
    out += "?";
    out.append(text, Op::spec::name.size());
    if constexpr (binds) {
      out += '@';  // piece by piece, as bind_node's describe
      out += BindName.view();
    }
  }

  template <class C>
  bool match(C& c, const site* where, value_id v, continuation rest) const {
    const node_id present = v == no_id ? no_id : c.g.producer(v);
    if (inner.match(c, where, v, [&] { return record(c, present, rest); })) return true;
    return inner.inputs.head.match(c, where, v, [&] { return record(c, no_id, rest); });
  }

 private:
  template <class NewOp>
  constexpr optional_t<NewOp, BindName> rewrap(NewOp op) const {
    return {op};
  }
  template <class C>
  bool record(C& c, node_id n, continuation rest) const {
    if constexpr (binds) {
      constexpr std::size_t i = index_of<typename C::captures>(BindName.view());
      return c.template bind<i>(slot{.id = n}, rest);
    } else {
      return rest();
    }
  }
};

template <fixed_string Name, fixed_string Domain = "">
struct optional_factory {
  template <class... P>
  constexpr auto operator()(P... p) const {
    static_assert(sizeof...(P) == 1, "fusekit: optional<> wraps a one-input op");
    using Op = decltype(op<Name, Domain>(p...));
    return optional_t<Op>{op<Name, Domain>(p...)};
  }
};

template <fixed_string Name, fixed_string Domain = "">
inline constexpr optional_factory<Name, Domain> optional{};

template <class S, class I, class P, bool Commute>
constexpr optional_t<op_pattern<S, I, P, Commute>> optional_op(op_pattern<S, I, P, Commute> op) {
  return {op};
}

// ---- any_of(a, b, …): the first alternative that lets the whole match succeed

template <fixed_string BindName, class... Alts>
struct any_of_t {
  static_assert(sizeof...(Alts) >= 2, "fusekit: any_of() needs at least two alternatives");
  pack<Alts...> alts;

  static constexpr bool binds = !BindName.view().empty();
  using captures = merge_t<
      typename captures_of<Alts>::type...,
      std::conditional_t<binds, decl_list<decl<BindName, capture_kind::branch>>, decl_list<>>>;
  static constexpr std::size_t nodes = std::max({Alts::nodes...});

  template <fixed_string Name>
  constexpr any_of_t<Name, Alts...> bind() const {
    return {alts};
  }

  void describe(std::string& out) const {
    out += "any_of(";
    describe_list(alts, out);
    out += ")";
    if constexpr (binds) {
      out += '@';  // piece by piece, as bind_node's describe
      out += BindName.view();
    }
  }

  template <class C>
  bool match(C& c, const site* where, value_id v, continuation rest) const {
    return match_each(c, rest,
                      [&](const auto& alt, auto&& next) { return alt.match(c, where, v, next); });
  }
  template <class C>
  bool match_root(C& c, node_id n, continuation rest) const {
    return match_each(c, rest,
                      [&](const auto& alt, auto&& next) { return alt.match_root(c, n, next); });
  }

 private:
  template <class C, class Try>
  bool match_each(C& c, continuation rest, Try&& attempt) const {
    if (c.sink == nullptr) return try_each<0>(alts, c, rest, attempt);
    // Explaining: each alternative is tried from the same explanation, and the one kept is chosen
    // among them by explains_more, whatever their order. An alternative that failed here while
    // another matched here and handed on explains nothing (k through repeat_kv, where k is a plain
    // input): the choice is among those that matched here, if any did.
    const explanation before = *c.sink;
    explanation best = before;
    bool best_reached = false;
    if (explain_each<0>(alts, c, rest, attempt, before, best, best_reached)) return true;
    *c.sink = std::move(best);
    return false;
  }

  // What an alternative that matched here hands on to: the branch's binding, then the rest.
  template <std::size_t I, class C>
  static bool hand_on(C& c, continuation rest) {
    if constexpr (binds) {
      constexpr std::size_t i = index_of<typename C::captures>(BindName.view());
      return c.template bind<i>(slot{.id = std::uint32_t(I)}, rest);
    } else {
      return rest();
    }
  }

  template <std::size_t I, class P, class C, class Try>
  static bool try_each(const P& p, C& c, continuation rest, Try&& attempt) {
    if constexpr (std::is_same_v<P, pack<>>) {
      return false;
    } else {
      auto next = [&] { return hand_on<I>(c, rest); };
      return attempt(p.head, next) || try_each<I + 1>(p.tail, c, rest, attempt);
    }
  }

  template <std::size_t I, class P, class C, class Try>
  static bool explain_each(const P& p, C& c, continuation rest, Try&& attempt,
                           const explanation& before, explanation& best, bool& best_reached) {
    if constexpr (std::is_same_v<P, pack<>>) {
      return false;
    } else {
      bool here = false;
      auto next = [&] {
        here = true;
        return hand_on<I>(c, rest);
      };
      *c.sink = before;
      if (attempt(p.head, next)) return true;
      if (here != best_reached ? here : explains_more(*c.sink, best)) {
        best = *c.sink;
        best_reached = here;
      }
      return explain_each<I + 1>(p.tail, c, rest, attempt, before, best, best_reached);
    }
  }
};

template <class... Alts>
constexpr any_of_t<"", Alts...> any_of(Alts... alts) {
  return {make_pack(alts...)};
}

// ---- maybe(p): an op input that may be omitted ("" or past the end), or else matches p

template <class P>
struct maybe_t {
  P inner;
  using captures = typename captures_of<P>::type;
  static constexpr std::size_t nodes = P::nodes;

  void describe(std::string& out) const {
    out += "maybe(";
    inner.describe(out);
    out += ")";
  }
  template <class C>
  bool match(C& c, const site* where, value_id v, continuation rest) const {
    if (v == no_id) return rest();  // p's captures stay unbound: has<>() tells
    return inner.match(c, where, v, rest);
  }
};

template <class P>
constexpr maybe_t<P> maybe(P p) {
  return {p};
}

// ---- all<"parts">: every input of a variadic op (at least one), bound as a list;
// all<"parts">(p): each of them must match p, a value pattern without captures or op nodes

template <fixed_string Name, class Element>
struct all_t {
  static constexpr std::string_view name = Name.view();
  Element element;
  using captures = decl_list<decl<Name, capture_kind::list>>;
  static constexpr std::size_t nodes = 0;

  template <class P>
  constexpr all_t<Name, P> operator()(P p) const {
    static_assert(captures_of<P>::type::size == 0,
                  "fusekit: all<>(p): p may not bind captures (each input would bind them again)");
    static_assert(P::nodes == 0,
                  "fusekit: all<>(p): p must match each input without op nodes (any() with "
                  "predicates)");
    return {p};
  }

  void describe(std::string& out) const {
    out += std::string(Name.view()) + ":all";
    if constexpr (!std::is_same_v<Element, any_t>) {
      out += "(";
      element.describe(out);
      out += ")";
    }
  }

  template <class C>
  bool match(C&, const site*, value_id, continuation) const {
    static_assert(sizeof(C) == 0,
                  "fusekit: all<> stands for every input of an op, it is no value pattern");
    return false;
  }

  // Called by the op in place of matching input by input: `given` inputs, trailing omitted ones
  // not counted.
  template <class C>
  bool match_all(C& c, const site* where, node_id n, std::size_t given, continuation rest) const {
    for (std::size_t i = 0; i < given; ++i) {
      const site here{n, std::uint32_t(i), where};
      if (!element.match(c, &here, c.g.input(n, i), [] { return true; })) return false;
    }
    constexpr std::size_t k = index_of<typename C::captures>(Name.view());
    return c.template bind<k>(slot{.id = std::uint32_t(given), .pointer = c.g.inputs(n).data()},
                              rest);
  }
};

template <fixed_string Name>
inline constexpr all_t<Name, any_t> all{};

// ---- around<"before", "after">(p): one input of a variadic op matches p, wherever it stands; the
// inputs before it and after it are bound as lists, either of which may be empty. Positions are
// tried first to last until p and the rest of the pattern hold: a Concat of a Concat among its
// inputs, a Sum of one product among its terms. p is a whole value pattern, captures and op nodes
// included.

template <fixed_string Before, fixed_string After, class Element>
struct around_t {
  static_assert(Before.view() != After.view(),
                "fusekit: around<>: the inputs before and after are two lists of two names");
  static constexpr std::string_view before = Before.view(), after = After.view();
  Element element;
  using captures =
      merge_t<decl_list<decl<Before, capture_kind::list>>,
              decl_list<decl<After, capture_kind::list>>, typename captures_of<Element>::type>;
  static constexpr std::size_t nodes = Element::nodes;

  void describe(std::string& out) const {
    out += std::string(Before.view()) + ":all, ";
    element.describe(out);
    out += ", " + std::string(After.view()) + ":all";
  }

  template <class C>
  bool match(C&, const site*, value_id, continuation) const {
    static_assert(sizeof(C) == 0,
                  "fusekit: around<> stands for every input of an op, it is no value pattern");
    return false;
  }

  // Called by the op in place of matching input by input, as all<>'s.
  template <class C>
  bool match_all(C& c, const site* where, node_id n, std::size_t given, continuation rest) const {
    constexpr std::size_t before = index_of<typename C::captures>(Before.view());
    constexpr std::size_t after = index_of<typename C::captures>(After.view());
    const value_id* inputs = c.g.inputs(n).data();
    for (std::size_t i = 0; i < given; ++i) {
      const site here{n, std::uint32_t(i), where};
      const bool matched = element.match(c, &here, inputs[i], [&] {
        return c.template bind<before>(slot{.id = std::uint32_t(i), .pointer = inputs}, [&] {
          return c.template bind<after>(
              slot{.id = std::uint32_t(given - i - 1), .pointer = inputs + i + 1}, rest);
        });
      });
      if (matched) return true;
    }
    return false;
  }
};

template <fixed_string Before, fixed_string After>
struct around_factory {
  template <class P>
  constexpr around_t<Before, After, P> operator()(P p) const {
    return {p};
  }
};
template <fixed_string Before, fixed_string After>
inline constexpr around_factory<Before, After> around{};

// ---- transparent(p): p at the value, or above up to 4 nodes that pass the value on unchanged
// ---- through_casts(p): the same, or above up to 4 Casts of any types: where a rule reads a
// chain's precision itself (its guard must prove what each type means)

namespace detail {

// The value-preserving nodes directly above a value, top down: what passes its input on unchanged
// at inference (Identity, a Cast to the type its input already has, a Dropout not in training
// mode) and a Cast pair that round-trips exactly (float16 → float32 → float16 …); with
// `any_casts`, every Cast.
struct preserving_chain {
  static constexpr std::size_t max_nodes = 4;
  std::array<node_id, max_nodes> nodes{};
  std::array<value_id, max_nodes + 1> values{};       // values[k]: the value after k steps
  std::array<std::uint8_t, max_nodes + 1> skipped{};  // nodes skipped to reach values[k]
  std::size_t steps = 0;
};

// Widening casts that the narrow type survives exactly, there and back.
inline bool round_trips(dtype narrow, dtype wide) {
  switch (narrow) {
    case dtype::float16:
    case dtype::bfloat16:
      return wide == dtype::float32 || wide == dtype::float64;
    case dtype::float32:
      return wide == dtype::float64;
    default:
      return false;
  }
}

inline preserving_chain value_preserving_chain(const graph& g, value_id v, bool any_casts) {
  preserving_chain chain;
  chain.values[0] = v;
  std::size_t taken = 0;
  auto cast_to = [&](node_id n) {
    const auto to = g.attribute_int(n, "to");
    return to ? dtype(*to) : dtype::undefined;
  };
  while (v != no_id && taken < preserving_chain::max_nodes) {
    const node_id n = g.producer(v);
    if (n == no_id || !g.domain(n).empty()) break;
    const value_id in = g.input(n, 0);
    if (in == no_id) break;
    const std::string_view op = g.op_type(n);
    if ((g.passes_input_at_inference(n) && g.output(n, 0) == v) || (any_casts && op == "Cast")) {
      chain.nodes[taken++] = n;
      v = in;
    } else if (op == "Cast" && taken + 2 <= preserving_chain::max_nodes) {
      const node_id inner = g.producer(in);
      if (inner == no_id || g.op_type(inner) != "Cast" || !g.domain(inner).empty()) break;
      const value_id below = g.input(inner, 0);
      if (below == no_id || g.type(below) != cast_to(n) || !round_trips(cast_to(n), cast_to(inner)))
        break;
      chain.nodes[taken++] = n;
      chain.nodes[taken++] = inner;
      v = below;
    } else {
      break;
    }
    ++chain.steps;
    chain.values[chain.steps] = v;
    chain.skipped[chain.steps] = std::uint8_t(taken);
  }
  return chain;
}

}  // namespace detail

template <class P, bool AnyCasts = false>
struct transparent_t {
  P inner;
  using captures = typename captures_of<P>::type;
  static constexpr std::size_t nodes = P::nodes + detail::preserving_chain::max_nodes;

  void describe(std::string& out) const {
    out += AnyCasts ? "through_casts(" : "transparent(";
    inner.describe(out);
    out += ")";
  }

  // The longest skip first, then shorter ones; skipped nodes join the match (their outputs then
  // follow the default use policy).
  template <class C>
  bool match(C& c, const site* where, value_id v, continuation rest) const {
    const detail::preserving_chain chain =
        v == no_id ? detail::preserving_chain{} : detail::value_preserving_chain(c.g, v, AnyCasts);
    if (chain.steps == 0) return inner.match(c, where, v, rest);
    std::array<site, detail::preserving_chain::max_nodes> sites{};
    for (std::size_t i = 0; i < chain.skipped[chain.steps]; ++i)
      sites[i] = site{chain.nodes[i], 0, i == 0 ? where : &sites[i - 1]};
    for (std::size_t k = chain.steps + 1; k-- > 0;) {
      const std::size_t skipped = chain.skipped[k];
      for (std::size_t i = 0; i < skipped; ++i)
        c.push(chain.nodes[i], use_policy::contained, false);
      const bool ok =
          inner.match(c, skipped == 0 ? where : &sites[skipped - 1], chain.values[k], rest);
      for (std::size_t i = 0; i < skipped; ++i) c.pop();
      if (ok) return true;
    }
    return false;
  }
};

template <class P>
constexpr transparent_t<P> transparent(P p) {
  return {p};
}

template <class P>
constexpr transparent_t<P, true> through_casts(P p) {
  return {p};
}

}  // namespace fusekit::pattern
