// A rule = name + pattern + emit (+ guard, priority, options, near-miss policy). A rule is a
// struct of static members:
//
//   struct fuse_gelu {
//     static constexpr std::string_view name = "gelu";
//     static constexpr auto pattern = …;                          // the DSL expression
//     using options = gelu_options;                               // optional: what a caller sets
//     static verdict guard(const graph&, const auto& m, const options&);  // optional; or (g, m)
//     static void emit(const graph&, const auto& m, emitter&, const options&);  // or (g, m, e)
//     static constexpr int priority = 0;  // optional; higher first; below 0 cleans up: its
//                                         // matches inside a function call do not inline it
//     static constexpr std::size_t near_miss_depth = 2;           // optional; see below
//     static bool resembles(const graph&, node_id anchor);        // optional; see below
//     static bool is_its_block(const graph&, node_id anchor);     // optional; see below
//     static constexpr auto sources = pattern::sources(…);       // optional; see below
//     static constexpr auto refusals = pattern::refusals(…);     // optional; see below
//     static constexpr auto examples = pattern::examples(…);     // optional; see below
//   };
//
// The check is strict: a member of one of these names that is not of its form (a guard taking a
// non-const graph, an emit with its arguments swapped, a priority that is a function) would
// otherwise be skipped without a word, so any_rule::of<R>() and fuse<R>() refuse to compile it,
// naming the member and its form. `rule<R>` is the same check as a concept.
//
// Which failed anchors the report lists as near misses: an anchor is a node of the root's op type
// (pattern::anchors); a match that fails there is a near miss when
//   - it failed in the root itself, after its op type: a check written on the root (an attribute,
//     dtype, input count, where) refused the node the rule exists for;
//   - or it got into the near_miss_depth-th node of the pattern (default 2: the root and a node
//     one of its inputs must be) before failing;
//   - or is_its_block(g, anchor) says the anchor surely is the rule's block, however early it
//   failed.
// resembles(g, anchor), checked first, says which anchors can be its block at all: a failure at
// any other anchor is no near miss, however far it got (a RoPE MatMul is not attention). With
// `explain`, every anchor's failure is listed.
//
// sources (fusekit/pattern/sources.hpp) say what the guard reads beyond the pattern: for a
// capture the pattern leaves a leaf, what may produce it. Matching never reads them; selfcheck
// writes them, so that its graphs show the guard what it looks for.
//
// refusals (fusekit/pattern/sources.hpp) say how to break each reason the guard refuses for: a
// text its near miss says and sources that write a graph it refuses so. selfcheck writes each as
// a mutant of the first instance that fused.
//
// examples (fusekit/pattern/examples.hpp) name combinations of the pattern's alternatives that
// the guard accepts only together, by the captures they bind: selfcheck writes each, and seeks
// from what fused the alternatives that no search one choice at a time reaches.
//
// The engine's own options (which rules run, how much to explain) are the run's; what only a
// family of rules understands (an attention rule's target op and head count) is its options.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "fusekit/graph/graph.hpp"
#include "fusekit/pattern/examples.hpp"
#include "fusekit/pattern/match.hpp"
#include "fusekit/pattern/sources.hpp"
#include "fusekit/rewrite/emitter.hpp"

namespace fusekit::rewrite {

// How a run goes, whatever its rules.
struct options {
  bool explain = false;              // every anchor's outcome, not only near misses
  std::vector<std::string> rules{};  // names of the rules to run; empty: all

  bool runs(std::string_view rule) const {
    return rules.empty() || std::find(rules.begin(), rules.end(), rule) != rules.end();
  }
};

// A guard's answer: yes, or no with the reason a user will read in the report. A no the rule's
// options decide alone, whatever the graph holds beyond what the pattern matched
// (no_with_these_options: soft-capped scores, which no op of target onnx computes alike on every
// runtime), tells selfcheck that the alternative these options refuse is no gap in its cover.
struct verdict {
  bool ok = true;
  std::string reason{};
  bool by_options = false;

  static verdict yes() { return {}; }
  static verdict no(std::string why) { return {false, std::move(why)}; }
  static verdict no_with_these_options(std::string why) { return {false, std::move(why), true}; }
  explicit operator bool() const { return ok; }
};

// The options of a rule that declares none.
struct no_options {};

namespace rule_detail {

// Whether R declares a member of a name, whatever its kind or signature: the name is then found
// in both bases of probe<R>, and naming it is ambiguous. A member template or an overload set,
// which no expression can name without its arguments, is found too.
struct member_names {
  int name, pattern, guard, emit, priority, options, near_miss_depth, resembles, is_its_block,
      sources, refusals, examples;
};
template <class R>
struct probe : R, member_names {};

#define FUSEKIT_RULE_DECLARES(member)     \
  template <class R>                      \
  concept declares_##member = !requires { \
    &probe<R>::member;                    \
  };
FUSEKIT_RULE_DECLARES(name)
FUSEKIT_RULE_DECLARES(pattern)
FUSEKIT_RULE_DECLARES(guard)
FUSEKIT_RULE_DECLARES(emit)
FUSEKIT_RULE_DECLARES(priority)
FUSEKIT_RULE_DECLARES(options)
FUSEKIT_RULE_DECLARES(near_miss_depth)
FUSEKIT_RULE_DECLARES(resembles)
FUSEKIT_RULE_DECLARES(is_its_block)
FUSEKIT_RULE_DECLARES(sources)
FUSEKIT_RULE_DECLARES(refusals)
FUSEKIT_RULE_DECLARES(examples)
#undef FUSEKIT_RULE_DECLARES

template <class R>
concept probe_able = std::is_class_v<R> && !std::is_final_v<R>;

template <class R>
struct options_type {
  using type = no_options;
};
template <class R>
requires requires { typename R::options; }
struct options_type<R> {
  using type = typename R::options;
};

}  // namespace rule_detail

template <class R>
using options_of = typename rule_detail::options_type<R>::type;

template <class R>
using match_of = pattern::match_result_for<std::remove_cvref_t<decltype(R::pattern)>>;

// ---- each member's accepted forms

template <class R>
concept named = requires {
  { R::name } -> std::convertible_to<std::string_view>;
  typename std::integral_constant<std::size_t, std::string_view(R::name).size()>;
};

template <class R>
concept patterned = requires(const graph& g) {
  typename match_of<R>;
  pattern::anchors(R::pattern, g);
};

template <class R>
concept options_ok = !rule_detail::declares_options<R> || requires {
  typename R::options;
  requires std::default_initializable<typename R::options>;
};

template <class R>
concept emits_with_options = requires(const graph& g, const match_of<R>& m, emitter& e,
                                      const options_of<R>& o) {
  R::emit(g, m, e, o);
};
template <class R>
concept emits_alone = requires(const graph& g, const match_of<R>& m, emitter& e) {
  R::emit(g, m, e);
};
template <class R>
concept emits = emits_with_options<R> || emits_alone<R>;

template <class R>
concept guards_with_options = requires(const graph& g, const match_of<R>& m,
                                       const options_of<R>& o) {
  { R::guard(g, m, o) } -> std::same_as<verdict>;
};
template <class R>
concept guards_alone = requires(const graph& g, const match_of<R>& m) {
  { R::guard(g, m) } -> std::same_as<verdict>;
};
// A guard of the engine's options is a guard of the wrong options: rules get their own.
template <class R>
concept guards_with_run_options = requires(const graph& g, const match_of<R>& m,
                                           const options& run) {
  R::guard(g, m, run);
};
template <class R>
concept guard_callable = guards_with_options<R> || guards_alone<R>;
template <class R>
concept guard_accepted = guard_callable<R> && !guards_with_run_options<R>;
template <class R>
concept guard_ok = !rule_detail::declares_guard<R> || guard_accepted<R>;

template <class R>
concept int_priority = requires {
  typename std::integral_constant<int, R::priority>;
  { R::priority } -> std::same_as<const int&>;
};
template <class R>
concept priority_ok = !rule_detail::declares_priority<R> || int_priority<R>;

template <class R>
concept size_near_miss_depth = requires {
  typename std::integral_constant<std::size_t, R::near_miss_depth>;
  { R::near_miss_depth } -> std::same_as<const std::size_t&>;
};
template <class R>
concept near_miss_depth_ok = !rule_detail::declares_near_miss_depth<R> ||
                             (size_near_miss_depth<R> && R::near_miss_depth >= 1);

template <class R>
concept resembles_ok = !rule_detail::declares_resembles<R> || requires(const graph& g, node_id n) {
  { R::resembles(g, n) } -> std::same_as<bool>;
};
template <class R>
concept is_its_block_ok =
    !rule_detail::declares_is_its_block<R> || requires(const graph& g, node_id n) {
  { R::is_its_block(g, n) } -> std::same_as<bool>;
};

namespace rule_detail {
// Each source names a value, a constant's number, a constant tensor or a list (whose source writes
// each of its elements) the pattern captures: one of another name would never be written.
template <class Captures, class... S>
constexpr bool sources_name_values(const pattern::sources_t<S...>*) {
  constexpr auto value = [](std::string_view name) {
    const std::size_t i = pattern::index_of<Captures>(name);
    return i != pattern::npos && (Captures::kinds[i] == pattern::capture_kind::value ||
                                  Captures::kinds[i] == pattern::capture_kind::number ||
                                  Captures::kinds[i] == pattern::capture_kind::tensor ||
                                  Captures::kinds[i] == pattern::capture_kind::list);
  };
  return (value(S::name) && ...);
}
template <class Captures, class... R>
constexpr bool refusals_name_values(const pattern::refusals_t<R...>*) {
  return (sources_name_values<Captures>(static_cast<const decltype(R::sources)*>(nullptr)) && ...);
}
}  // namespace rule_detail

template <class R>
concept sources_of_captures = requires {
  requires pattern::is_sources<std::remove_cvref_t<decltype(R::sources)>>;
  requires rule_detail::sources_name_values<typename match_of<R>::captures>(
      static_cast<const std::remove_cvref_t<decltype(R::sources)>*>(nullptr));
};
template <class R>
concept sources_ok = !rule_detail::declares_sources<R> || sources_of_captures<R>;

template <class R>
concept refusals_of_captures = requires {
  requires pattern::is_refusals<std::remove_cvref_t<decltype(R::refusals)>>;
  requires rule_detail::refusals_name_values<typename match_of<R>::captures>(
      static_cast<const std::remove_cvref_t<decltype(R::refusals)>*>(nullptr));
};
template <class R>
concept refusals_ok = !rule_detail::declares_refusals<R> || refusals_of_captures<R>;

namespace rule_detail {
template <class R>
struct sources_of {
  using type = pattern::sources_t<>;
};
template <class R>
requires declares_sources<R>
struct sources_of<R> {
  using type = std::remove_cvref_t<decltype(R::sources)>;
};
}  // namespace rule_detail

template <class R>
concept examples_of_captures = requires {
  requires pattern::is_examples<std::remove_cvref_t<decltype(R::examples)>>;
  requires pattern::examples_name_captures < pattern::merge_t < typename match_of<R>::captures,
  typename pattern::captures_of_sources<typename rule_detail::sources_of<R>::type>::type >>
      (R::examples);
};
template <class R>
concept examples_ok = !rule_detail::declares_examples<R> || examples_of_captures<R>;

template <class R>
concept rule = rule_detail::probe_able<R> && named<R> && patterned<R> && options_ok<R> &&
    emits<R> && guard_ok<R> && priority_ok<R> && near_miss_depth_ok<R> && resembles_ok<R> &&
    is_its_block_ok<R> && sources_ok<R> && refusals_ok<R> && examples_ok<R>;

// The same check with a message per member, for the places a rule is compiled. True when it
// passes, so that callers compile the rest only then and the first message is the only one.
template <class R>
constexpr bool check_rule() {
  static_assert(rule_detail::probe_able<R>,
                "fusekit: a rule is a struct that is not final (its members are checked by name)");
  if constexpr (rule_detail::probe_able<R>) {
    static_assert(named<R>,
                  "fusekit: a rule needs `static constexpr std::string_view name = \"…\";`");
    static_assert(patterned<R>,
                  "fusekit: a rule needs `static constexpr auto pattern = <a pattern>;` whose "
                  "root is an op<>, a capture of one or an any_of of them");
    static_assert(options_ok<R>,
                  "fusekit: a rule's `options` is a default-constructible type: `using options "
                  "= …;`");
    if constexpr (patterned<R> && options_ok<R>) {
      static_assert(!guards_with_run_options<R>,
                    "fusekit: a guard takes the rule's own options (using options = …), not "
                    "rewrite::options");
      static_assert(guard_ok<R>,
                    "fusekit: a rule's guard is `static verdict guard(const fusekit::graph&, "
                    "const auto& m)`, or with `const options&` last");
      static_assert(emits<R>,
                    "fusekit: a rule's emit is `static void emit(const fusekit::graph&, const "
                    "auto& m, fusekit::rewrite::emitter&)`, or with `const options&` last");
    }
    static_assert(priority_ok<R>, "fusekit: a rule's priority is `static constexpr int priority`");
    static_assert(near_miss_depth_ok<R>,
                  "fusekit: a rule's near_miss_depth is `static constexpr std::size_t "
                  "near_miss_depth` of at least 1");
    static_assert(resembles_ok<R>,
                  "fusekit: a rule's resembles is `static bool resembles(const fusekit::graph&, "
                  "fusekit::node_id)`");
    static_assert(is_its_block_ok<R>,
                  "fusekit: a rule's is_its_block is `static bool is_its_block(const "
                  "fusekit::graph&, fusekit::node_id)`");
    if constexpr (patterned<R>)
      static_assert(sources_ok<R>,
                    "fusekit: a rule's sources are `static constexpr auto sources = "
                    "fusekit::pattern::sources(source<\"x\">(<a pattern>), …);`, each named for a "
                    "value, a constant scalar or a constant<> the pattern captures");
    if constexpr (patterned<R>)
      static_assert(refusals_ok<R>,
                    "fusekit: a rule's refusals are `static constexpr auto refusals = "
                    "fusekit::pattern::refusals(refusal<\"what the near miss says\">("
                    "source<\"x\">(<a pattern>), …), …);`, each source named for a value, a "
                    "constant scalar or a constant<> the pattern captures");
    if constexpr (patterned<R>)
      static_assert(
          examples_ok<R>,
          "fusekit: a rule's examples are `static constexpr auto examples = "
          "fusekit::pattern::examples(pattern::example{.with = {\"x\", …}, .without = "
          "{…}}, …);`, each naming at least one capture, and only captures the pattern or its "
          "sources bind");
  }
  return rule<R>;
}

template <class R>
constexpr int priority_of() {
  if constexpr (rule_detail::declares_priority<R>)
    return R::priority;
  else
    return 0;
}

template <class R>
constexpr std::size_t near_miss_depth_of() {
  if constexpr (rule_detail::declares_near_miss_depth<R>)
    return R::near_miss_depth;
  else
    return 2;
}

template <class R>
bool resembles(const graph& g, node_id n) {
  if constexpr (rule_detail::declares_resembles<R>)
    return R::resembles(g, n);
  else
    return true;
}

template <class R>
bool is_its_block(const graph& g, node_id n) {
  if constexpr (rule_detail::declares_is_its_block<R>)
    return R::is_its_block(g, n);
  else
    return false;
}

// Whether a failed match at an anchor that resembles the rule's block is a near miss (above).
template <class R>
bool is_near_miss(const graph& g, node_id anchor, const pattern::explanation& why) {
  const bool in_root = why.progress == 1;  // inside the root, no node matched yet
  return in_root || why.progress + 1 >= 2 * near_miss_depth_of<R>() || is_its_block<R>(g, anchor);
}

template <class R>
verdict guard_of(const graph& g, const match_of<R>& m, const options_of<R>& o) {
  if constexpr (guards_with_options<R>)
    return R::guard(g, m, o);
  else if constexpr (guards_alone<R>)
    return R::guard(g, m);
  else
    return verdict::yes();
}

template <class R>
void emit_of(const graph& g, const match_of<R>& m, emitter& e, const options_of<R>& o) {
  if constexpr (emits_with_options<R>)
    R::emit(g, m, e, o);
  else
    R::emit(g, m, e);
}

}  // namespace fusekit::rewrite
