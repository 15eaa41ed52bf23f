// Must not compile: a guard of a non-const graph cannot be called with the graph the engine
// holds; taken for no guard, it would be skipped and the rule would fuse what it must refuse.
#include "sound_rule.hpp"

#ifdef FUSEKIT_COMPILE_FAIL
struct mistyped : sound {
  static verdict guard(graph&, const auto&) { return verdict::no("never asked"); }
};
const auto mistyped_rule = fusekit::rewrite::any_rule::of<mistyped>();
#endif
