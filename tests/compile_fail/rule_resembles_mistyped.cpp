// Must not compile: a resembles() of a non-const graph cannot be called; taken for none,
// every anchor would resemble the block and the report would fill with noise.
#include "sound_rule.hpp"

#ifdef FUSEKIT_COMPILE_FAIL
struct mistyped : sound {
  static bool resembles(graph&, node_id) { return false; }
};
const auto mistyped_rule = fusekit::rewrite::any_rule::of<mistyped>();
#endif
