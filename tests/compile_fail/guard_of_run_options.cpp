// Must not compile: a guard that takes the engine's options (rewrite::options) would never be
// called, since rules get their own options; the rule would fuse unguarded.
#include "sound_rule.hpp"

#ifdef FUSEKIT_COMPILE_FAIL
struct guarded_by_run_options : sound {
  static verdict guard(const graph&, const auto&, const fusekit::rewrite::options&) {
    return verdict::no("never asked");
  }
};
const auto unguarded_rule = fusekit::rewrite::any_rule::of<guarded_by_run_options>();
#endif
