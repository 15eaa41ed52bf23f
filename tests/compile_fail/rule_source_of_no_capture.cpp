// Must not compile: a source named for a value the pattern does not capture ("y" where it binds
// "x") would never be written, and selfcheck would leave the guard's input a bare leaf.
#include "sound_rule.hpp"

#ifdef FUSEKIT_COMPILE_FAIL
struct misnamed_source : sound {
  static constexpr auto sources = fusekit::pattern::sources(source<"y">(op<"Abs">(any())));
};
const auto misnamed_rule = fusekit::rewrite::any_rule::of<misnamed_source>();
#endif
