// Must not compile: a priority the engine cannot read as a constant int would be
// taken for none, and the rule would lose the contests it was meant to win.
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
  static int priority() { return 1; }
};
const auto mistyped_rule = fusekit::rewrite::any_rule::of<mistyped>();
#endif
