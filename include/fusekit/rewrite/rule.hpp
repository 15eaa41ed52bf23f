// A rule = name + pattern + guard + emit (+ priority, + options). A rule is a struct of static
// members:
//
//   struct fuse_gelu {
//     static constexpr std::string_view name = "gelu";
//     static constexpr auto pattern = …;                          // the DSL expression
//     using options = gelu_options;                               // optional: what a caller sets
//     static verdict guard(const graph&, const auto& m, const options&);  // optional; or (g, m)
//     static void emit(const graph&, const auto& m, emitter&, const options&);  // or (g, m, e)
//     static constexpr int priority = 0;                          // optional; higher first
//   };
//
// The engine's own options (which rules run, how much to explain) are the run's; what only a
// family of rules understands (an attention rule's target op and head count) is its options.
#pragma once

#include <algorithm>
#include <concepts>
#include <string>
#include <string_view>
#include <vector>

#include "fusekit/graph/graph.hpp"
#include "fusekit/pattern/match.hpp"
#include "fusekit/rewrite/emitter.hpp"

namespace fusekit::rewrite {

// How a run goes, whatever its rules.
struct options {
  bool explain = false;            // every anchor's outcome, not only near misses
  std::vector<std::string> rules;  // names of the rules to run; empty: all

  bool runs(std::string_view rule) const {
    return rules.empty() || std::find(rules.begin(), rules.end(), rule) != rules.end();
  }
};

// A guard's answer: yes, or no with the reason a user will read in the report.
struct verdict {
  bool ok = true;
  std::string reason{};

  static verdict yes() { return {}; }
  static verdict no(std::string why) { return {false, std::move(why)}; }
  explicit operator bool() const { return ok; }
};

template <class R>
using match_of = pattern::match_result_for<std::remove_cvref_t<decltype(R::pattern)>>;

// The options of a rule that declares none.
struct no_options {};

template <class R>
struct options_type {
  using type = no_options;
};
template <class R>
requires requires { typename R::options; }
struct options_type<R> {
  using type = typename R::options;
};
template <class R>
using options_of = typename options_type<R>::type;

// emit(g, m, e, options), or emit(g, m, e) where the rule needs none.
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
concept named = requires {
  { R::name } -> std::convertible_to<std::string_view>;
};

template <class R>
concept emits = emits_with_options<R> || emits_alone<R>;

template <class R>
concept rule = named<R> && emits<R>;

template <class R>
constexpr int priority_of() {
  if constexpr (requires { R::priority; })
    return R::priority;
  else
    return 0;
}

template <class R>
verdict guard_of(const graph& g, const match_of<R>& m, const options_of<R>& o) {
  if constexpr (requires { R::guard(g, m, o); }) {
    return R::guard(g, m, o);
  } else if constexpr (requires { R::guard(g, m); }) {
    return R::guard(g, m);
  } else {
    // A guard of the engine's options would otherwise be skipped without a word.
    static_assert(
        !requires(const options& run) { R::guard(g, m, run); },
        "fusekit: a guard takes the rule's own options (using options = …), not "
        "rewrite::options");
    return verdict::yes();
  }
}

template <class R>
void emit_of(const graph& g, const match_of<R>& m, emitter& e, const options_of<R>& o) {
  if constexpr (emits_with_options<R>)
    R::emit(g, m, e, o);
  else
    R::emit(g, m, e);
}

}  // namespace fusekit::rewrite
