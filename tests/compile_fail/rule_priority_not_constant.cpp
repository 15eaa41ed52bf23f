// Must not compile: a priority the engine cannot read as a constant int would be
// taken for none, and the rule would lose the contests it was meant to win.
#include "sound_rule.hpp"

#ifdef FUSEKIT_COMPILE_FAIL
struct mistyped : sound {
  static int priority() { return 1; }
};
const auto mistyped_rule = fusekit::rewrite::any_rule::of<mistyped>();
#endif
