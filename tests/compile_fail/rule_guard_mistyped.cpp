// Must not compile: a guard of a non-const graph cannot be called with the graph the engine
// holds; taken for no guard, it would be skipped and the rule would fuse what it must refuse.
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
  static verdict guard(graph&, const auto&) { return verdict::no("never asked"); }
};
const auto mistyped_rule = fusekit::rewrite::any_rule::of<mistyped>();
#endif
