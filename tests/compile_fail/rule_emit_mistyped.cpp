// Must not compile: an emit whose arguments are in another order is no emit the engine
// can call.
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/any_rule.hpp"

using namespace fusekit::pattern;
using fusekit::graph;
using fusekit::node_id;
using fusekit::rewrite::emitter;
using fusekit::rewrite::verdict;

struct sound {
  static constexpr std::string_view name = "sound";
  static constexpr auto pattern = op<"Relu">(capture<"x">);
  static void emit(const graph&, const auto& m, emitter& e) {
    e.replace_root(e.value(get<"x">(m)));
  }
};
const auto sound_rule = fusekit::rewrite::any_rule::of<sound>();

#ifdef FUSEKIT_COMPILE_FAIL
struct mistyped : sound {
  static void emit(const auto& m, const graph&, emitter& e) {
    e.replace_root(e.value(get<"x">(m)));
  }
};
const auto mistyped_rule = fusekit::rewrite::any_rule::of<mistyped>();
#endif
