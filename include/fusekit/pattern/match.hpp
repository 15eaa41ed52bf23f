// Running a pattern: match() at one anchor node, trace() over every anchor with explanations, and
// describe() for the pattern's text.
#pragma once

#include <algorithm>
#include <array>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "fusekit/graph/graph.hpp"
#include "fusekit/pattern/matchers.hpp"

namespace fusekit::pattern {

// The outcome of match(): false, or the captures and the matched nodes. Captures are written only
// when the whole match succeeded.
template <class Captures, std::size_t Depth>
class match_result {
 public:
  using captures = Captures;

  explicit operator bool() const { return matched_; }
  node_id root() const { return root_; }

  // Typed access: a value_id, node_id, double, TensorProto*, AttributeProto*, branch index or
  // span of value_ids, by the capture's kind. A name the pattern does not bind does not compile.
  template <fixed_string Name>
  auto get() const {
    constexpr std::size_t i = index_of<Captures>(Name.view());
    static_assert(i != npos, "fusekit: get<>: the pattern has no capture of this name");
    if constexpr (i != npos)  // only the assertion above reports a missing name
      return read_slot<Captures::kinds[i]>(slots_[i]);
  }

  // False for a capture inside an any_of branch that was not taken.
  template <fixed_string Name>
  bool has() const {
    constexpr std::size_t i = index_of<Captures>(Name.view());
    static_assert(i != npos, "fusekit: has<>: the pattern has no capture of this name");
    return slots_[i].bound;
  }

  // The matched nodes, root first, in match order (a node reached twice is listed twice).
  std::span<const node_id> nodes() const { return {nodes_.data(), node_count_}; }

  template <class C>
  void accept(node_id root, const C& c) {
    matched_ = true;
    root_ = root;
    slots_ = c.slots;
    node_count_ = c.matched_count;
    for (std::size_t i = 0; i < node_count_; ++i) nodes_[i] = c.matched[i].node;
  }

 private:
  bool matched_ = false;
  node_id root_ = no_id;
  std::array<slot, Captures::size> slots_{};
  std::array<node_id, Depth> nodes_{};
  std::size_t node_count_ = 0;
};

template <class P>
using match_result_for = match_result<typename P::captures, P::nodes>;

// get<"scale">(m): the same as m.get<"scale">(), without the `template` keyword that a generic
// emit(const auto& m) would need.
template <fixed_string Name, class Captures, std::size_t Depth>
auto get(const match_result<Captures, Depth>& m) {
  return m.template get<Name>();
}
template <fixed_string Name, class Captures, std::size_t Depth>
bool has(const match_result<Captures, Depth>& m) {
  return m.template has<Name>();
}

// Matches `p` with `root` as the node producing its outermost value. With a sink, a failure
// leaves there the deepest reason and the nodes matched up to it.
template <class P>
match_result_for<P> match(const P& p, const graph& g, node_id root, explanation* sink = nullptr) {
  context<typename P::captures, P::nodes> c(g, sink);
  match_result_for<P> result;
  p.match_root(c, root, [&] {
    if (!c.uses_contained()) return false;
    result.accept(root, c);
    return true;
  });
  return result;
}

template <class P>
std::string describe(const P& p) {
  std::string text;
  p.describe(text);
  return text;
}

template <class P, class F>
constexpr void for_each_alternative(const P& p, F&& f) {
  if constexpr (!std::is_same_v<P, pack<>>) {
    f(p.head);
    for_each_alternative(p.tail, f);
  }
}

// The op types a pattern's root can have: where a driver or tracer looks for anchors.
template <class S, class I, class Preds, bool C>
std::vector<node_id> anchors(const op_pattern<S, I, Preds, C>&, const graph& g) {
  if constexpr (S::id.has_value()) {
    const auto nodes = g.nodes_of(*S::id);
    return {nodes.begin(), nodes.end()};
  } else {
    const auto id = g.ops().find(S::domain, S::name);
    if (!id) return {};
    const auto nodes = g.nodes_of(*id);
    return {nodes.begin(), nodes.end()};
  }
}
template <fixed_string N, class I>
std::vector<node_id> anchors(const captured<N, I>& p, const graph& g) {
  return anchors(p.inner, g);
}
template <fixed_string B, class... Alts>
std::vector<node_id> anchors(const any_of_t<B, Alts...>& p, const graph& g) {
  std::vector<node_id> all;
  auto add = [&](const auto& alt) {
    for (node_id n : anchors(alt, g)) all.push_back(n);
  };
  for_each_alternative(p.alts, add);
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return all;
}

// The op types every match of a pattern holds a node of, whichever alternatives it takes: an op
// node, what its inputs require, the first input of an optional op (matched with or without it),
// what every alternative of an any_of requires, what a transparent or captured pattern wraps,
// what around<> finds among the inputs. Nothing else is required (a capture, a constant, maybe(),
// all<>, a matcher of a rule's own), so the list only ever errs on the side of holding less. A
// graph without a node of one of them holds no match: a driver knows the match fails at every
// anchor without trying it.
struct required_ops {
  static constexpr std::size_t capacity = 16;  // past it, the rest are not listed: still sound
  struct op {
    std::string_view domain, name;
    friend constexpr bool operator==(const op&, const op&) = default;
  };
  std::array<op, capacity> ops{};
  std::size_t size = 0;

  constexpr bool contains(const op& o) const {
    return std::find(ops.begin(), ops.begin() + size, o) != ops.begin() + size;
  }
  constexpr void add(const op& o) {
    if (!contains(o) && size < capacity) ops[size++] = o;
  }
  constexpr void add_all(const required_ops& other) {
    for (std::size_t i = 0; i < other.size; ++i) add(other.ops[i]);
  }
  constexpr required_ops common_with(const required_ops& other) const {
    required_ops both;
    for (std::size_t i = 0; i < size; ++i)
      if (other.contains(ops[i])) both.add(ops[i]);
    return both;
  }
  std::span<const op> list() const { return {ops.data(), size}; }
};

// Computed once per pattern type, each type a constant expression of its own: a pattern that
// repeats a sub-pattern (attention's alternatives share their score chains) stays within a
// compiler's constexpr step limit however large the rule.
template <class P>
struct required_of {
  static constexpr required_ops value{};
};
template <class S, class... Inputs, class Preds, bool C>
struct required_of<op_pattern<S, pack<Inputs...>, Preds, C>> {
  static constexpr required_ops value = [] {
    required_ops r;
    r.add(required_ops::op{S::domain, S::name});
    (r.add_all(required_of<Inputs>::value), ...);
    return r;
  }();
};
template <fixed_string N, class I>
struct required_of<captured<N, I>> : required_of<I> {};
template <class I, class Pred>
struct required_of<checked<I, Pred>> : required_of<I> {};
template <class P, bool AnyCasts>
struct required_of<transparent_t<P, AnyCasts>> : required_of<P> {};
template <class Op, fixed_string B>
struct required_of<optional_t<Op, B>> : required_of<decltype(std::declval<Op>().inputs.head)> {};
template <fixed_string B, fixed_string A, class E>
struct required_of<around_t<B, A, E>> : required_of<E> {};
template <fixed_string B, class First, class... Rest>
struct required_of<any_of_t<B, First, Rest...>> {
  static constexpr required_ops value = [] {
    required_ops r = required_of<First>::value;
    ((r = r.common_with(required_of<Rest>::value)), ...);
    return r;
  }();
};

template <class P>
constexpr required_ops required_ops_of(const P&) {
  return required_of<P>::value;
}

// Whether g has a node of every op `required` lists.
inline bool holds_every(const graph& g, const required_ops& required) {
  for (const required_ops::op& o : required.list()) {
    const auto id = g.ops().find(o.domain, o.name);
    if (!id || g.nodes_of(*id).empty()) return false;
  }
  return true;
}

// One anchor's outcome, with the explanation of the best partial match when it failed.
struct attempt {
  node_id anchor = no_id;
  bool matched = false;
  explanation why;
};

// Tries `p` at every anchor of `g`, in graph order: the data behind "why did this not fuse".
template <class P>
std::vector<attempt> trace(const P& p, const graph& g) {
  std::vector<attempt> attempts;
  for (node_id n : anchors(p, g)) {
    attempt a{.anchor = n, .matched = false, .why = {}};
    a.matched = bool(match(p, g, n, &a.why));
    attempts.push_back(std::move(a));
  }
  return attempts;
}

}  // namespace fusekit::pattern
