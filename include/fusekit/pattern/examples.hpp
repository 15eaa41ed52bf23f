// Combinations of a pattern's alternatives that its guard accepts only together, said by the
// captures they bind:
//
//   static constexpr auto examples = pattern::examples(
//       // soft-capped scores fuse only as GroupQueryAttention: k and v repeated, no cache
//       pattern::example{.with = {"softcap", "k_grouped", "v_grouped"},
//                        .without = {"k_cache", "v_cache"}});
//
// Matching never reads them. selfcheck writes each as an instance (at every choice, the
// alternative that binds the most `with` captures and the fewest `without` ones; the first
// where they tie) and, from what it fused, seeks the alternatives it could not reach choosing
// apart: a guard that wants k and v repeated alike, and no cache, leaves each of those alone
// refused, and a search one choice at a time never finds the pair. An example the rule refuses
// for anything but its options is a failure of the check: the rule or the example is wrong.
// Each name must be one the pattern or the rule's sources capture (a rule naming another does
// not compile): a source's branch is steered by a node it binds.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>
#include <type_traits>

#include "fusekit/pattern/captures.hpp"
#include "fusekit/pattern/matchers.hpp"
#include "fusekit/pattern/sources.hpp"

namespace fusekit::pattern {

struct example {
  static constexpr std::size_t most = 8;
  std::array<std::string_view, most> with{}, without{};
};

template <class... E>
constexpr std::array<example, sizeof...(E)> examples(E... each) {
  static_assert(sizeof...(E) > 0, "fusekit: examples() holds at least one example");
  static_assert((std::is_same_v<E, example> && ...),
                "fusekit: examples() takes pattern::example{.with = {…}, .without = {…}}s");
  return {each...};
}

template <class T>
inline constexpr bool is_examples = false;
template <std::size_t N>
inline constexpr bool is_examples<std::array<example, N>> = true;

// What the sources' patterns bind, which examples may name beside the pattern's captures.
template <class Sources>
struct captures_of_sources {
  using type = decl_list<>;
};
template <class... S>
struct captures_of_sources<sources_t<S...>> {
  using type = merge_t<typename captures_of<decltype(S::pattern)>::type...>;
};

// Whether every name an example gives is one of `Captures`, and each example names one at least.
template <class Captures, std::size_t N>
constexpr bool examples_name_captures(const std::array<example, N>& all) {
  for (const example& e : all) {
    bool any = false;
    for (const auto& names : {e.with, e.without})
      for (const std::string_view name : names) {
        if (name.empty()) continue;
        if (index_of<Captures>(name) == npos) return false;
        any = true;
      }
    if (!any) return false;
  }
  return true;
}

// How much an alternative binding `binds` is what `e` asks for: a capture it wants, one more; one
// it does not, one less.
template <class Binds>
constexpr int steered(const example& e) {
  int score = 0;
  for (const std::string_view name : e.with)
    score += !name.empty() && index_of<Binds>(name) != npos;
  for (const std::string_view name : e.without)
    score -= !name.empty() && index_of<Binds>(name) != npos;
  return score;
}

}  // namespace fusekit::pattern
