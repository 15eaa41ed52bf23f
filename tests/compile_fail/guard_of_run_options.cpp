// Must not compile: a guard that takes the engine's options (rewrite::options) would never be
// called, since rules get their own options; the rule would fuse unguarded.
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/any_rule.hpp"

using namespace fusekit::pattern;
using fusekit::graph;
using fusekit::rewrite::emitter;
using fusekit::rewrite::verdict;

struct guarded {
  static constexpr std::string_view name = "guarded";
  static constexpr auto pattern = op<"Relu">(capture<"x">);
  static verdict guard(const graph&, const auto&) { return verdict::yes(); }
  static void emit(const graph&, const auto& m, emitter& e) {
    e.replace_root(e.value(get<"x">(m)));
  }
};
const auto guarded_rule = fusekit::rewrite::any_rule::of<guarded>();

#ifdef FUSEKIT_COMPILE_FAIL
struct guarded_by_run_options {
  static constexpr std::string_view name = "guarded-by-run-options";
  static constexpr auto pattern = op<"Relu">(capture<"x">);
  static verdict guard(const graph&, const auto&, const fusekit::rewrite::options&) {
    return verdict::no("never asked");
  }
  static void emit(const graph&, const auto& m, emitter& e) {
    e.replace_root(e.value(get<"x">(m)));
  }
};
const auto unguarded_rule = fusekit::rewrite::any_rule::of<guarded_by_run_options>();
#endif
