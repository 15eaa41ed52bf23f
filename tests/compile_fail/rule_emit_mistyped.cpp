// Must not compile: an emit whose arguments are in another order is no emit the engine
// can call.
#include "sound_rule.hpp"

#ifdef FUSEKIT_COMPILE_FAIL
struct mistyped : sound {
  static void emit(const auto& m, const graph&, emitter& e) {
    e.replace_root(e.value(get<"x">(m)));
  }
};
const auto mistyped_rule = fusekit::rewrite::any_rule::of<mistyped>();
#endif
