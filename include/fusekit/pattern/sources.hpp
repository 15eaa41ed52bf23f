// What a guard reads beyond its pattern, said as patterns: for a capture the pattern leaves a
// leaf, the ops that may produce it; for a list (all<"xs">, around<>'s two), each of its elements.
//
//   static constexpr auto sources = pattern::sources(
//       pattern::source<"p1">(op<"Softmax">(any())),  // the guard walks up to a Softmax
//       pattern::source<"p2">(capture<"p1">));        // and wants both products to read it
//
// Matching never reads them: the guard stays the judge of what it accepts there. They are the
// rule's word on what the guard looks for, which selfcheck writes in place of the leaf (a graph
// input, which no guard can see past, would otherwise leave such a rule unchecked). A source's
// own choices (any_of, optional …) are alternatives to cover like the pattern's; its predicates
// are not mutated, since what refuses a graph without them is the guard, in its own words.
//
// Where no pattern can say what a value is, the rule writes it: `written<W>` calls
// `W::write(w)` with selfcheck's writer, which gives the instance's float type, the dims of a
// capture already written, the shape the leaf search would give the value, and the means to
// write a graph input or an initializer. The check
// takes a leaf's type from its op's schema, where that admits one, but no schema gives dims that
// follow another value's (a RotaryEmbedding's positions and caches, whose dims follow x's):
//
//   struct positions {
//     static auto write(auto& w) { return w.input(dtype::int64, {w.dim("x", 0), w.dim("x", 2)}); }
//   };
//   static constexpr auto sources = pattern::sources(source<"positions">(written<positions>));
#pragma once

#include <string>
#include <string_view>
#include <tuple>

#include "fusekit/pattern/fixed_string.hpp"

namespace fusekit::pattern {

template <fixed_string Name, class P>
struct source_t {
  static constexpr std::string_view name = Name.view();
  P pattern;
};

template <fixed_string Name>
struct source_factory {
  template <class P>
  constexpr source_t<Name, P> operator()(P p) const {
    return {p};
  }
};
template <fixed_string Name>
inline constexpr source_factory<Name> source{};

// Where a source chooses between what it writes (any_of(any(), written<W>)), the choice names it:
// W::text, or "a value the rule writes".
template <class W>
struct written_t {
  void describe(std::string& out) const {
    if constexpr (requires { std::string_view(W::text); })
      out += W::text;
    else
      out += "a value the rule writes";
  }
};
template <class W>
inline constexpr written_t<W> written{};

template <class... S>
struct sources_t {
  std::tuple<S...> each;
};

template <class T>
inline constexpr bool is_source = false;
template <fixed_string Name, class P>
inline constexpr bool is_source<source_t<Name, P>> = true;

template <class... S>
constexpr sources_t<S...> sources(S... each) {
  static_assert(sizeof...(S) > 0, "fusekit: sources() names at least one capture");
  static_assert((is_source<S> && ...), "fusekit: sources() takes source<\"name\">(pattern)s");
  return {{each...}};
}

// A family's sources and a rule's own, as one.
template <class... A, class... B>
constexpr sources_t<A..., B...> operator+(const sources_t<A...>& a, const sources_t<B...>& b) {
  return {std::tuple_cat(a.each, b.each)};
}

template <class T>
inline constexpr bool is_sources = false;
template <class... S>
inline constexpr bool is_sources<sources_t<S...>> = true;

// A refusal of the guard, and a graph that meets it: the rule's first instance that fused, with
// the captures these sources name written from them instead. selfcheck writes it as a mutant,
// which must not fuse and whose near miss must say `Text`: a guard's reasons are code, which no
// search can read, so the rule says how to break each, as sources say how to write what it reads.
//
//   struct one_element {
//     static auto write(auto& w) { return w.initializer(w.type(), {1}, {1.0}); }
//   };
//   static constexpr auto refusals = pattern::refusals(
//       refusal<"takes a vector of the hidden size">(source<"gamma">(written<one_element>)));
template <fixed_string Text, class... S>
struct refusal_t {
  static constexpr std::string_view text = Text.view();
  sources_t<S...> sources;
};

template <fixed_string Text>
struct refusal_factory {
  template <class... S>
  constexpr refusal_t<Text, S...> operator()(S... each) const {
    static_assert(sizeof...(S) > 0, "fusekit: a refusal<\"…\">() names at least one source");
    static_assert((is_source<S> && ...), "fusekit: a refusal<\"…\">() takes source<\"name\">(…)s");
    return {{{each...}}};
  }
};
template <fixed_string Text>
inline constexpr refusal_factory<Text> refusal{};

template <class... R>
struct refusals_t {
  std::tuple<R...> each;
};

template <class T>
inline constexpr bool is_refusal = false;
template <fixed_string Text, class... S>
inline constexpr bool is_refusal<refusal_t<Text, S...>> = true;

template <class... R>
constexpr refusals_t<R...> refusals(R... each) {
  static_assert(sizeof...(R) > 0, "fusekit: refusals() names at least one refusal");
  static_assert((is_refusal<R> && ...), "fusekit: refusals() takes refusal<\"text\">(…)s");
  return {{each...}};
}

template <class T>
inline constexpr bool is_refusals = false;
template <class... R>
inline constexpr bool is_refusals<refusals_t<R...>> = true;

}  // namespace fusekit::pattern
