// A rule = name + pattern + guard + emit (+ priority). A rule is a struct of static members:
//
//   struct fuse_gelu {
//     static constexpr std::string_view name = "gelu";
//     static constexpr auto pattern = …;                              // the DSL expression
//     static verdict guard(const graph&, const auto& m, const options&);   // optional
//     static void emit(const graph&, const auto& m, emitter&);
//     static constexpr int priority = 0;                               // optional; higher first
//   };
#pragma once

#include <concepts>
#include <string>
#include <string_view>

#include "fusekit/graph/graph.hpp"
#include "fusekit/pattern/match.hpp"
#include "fusekit/rewrite/emitter.hpp"

namespace fusekit::rewrite {

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

template <class R>
concept rule = requires(const graph& g, const match_of<R>& m, emitter& e) {
  { R::name } -> std::convertible_to<std::string_view>;
  R::emit(g, m, e);
};

template <class R>
constexpr int priority_of() {
  if constexpr (requires { R::priority; })
    return R::priority;
  else
    return 0;
}

template <class R>
verdict guard_of(const graph& g, const match_of<R>& m, const options& opts) {
  if constexpr (requires { R::guard(g, m, opts); })
    return R::guard(g, m, opts);
  else
    return verdict::yes();
}

}  // namespace fusekit::rewrite
