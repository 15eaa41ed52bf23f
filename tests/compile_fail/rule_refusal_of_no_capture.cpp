// Must not compile: a refusal whose source names a value the pattern does not capture ("y" where
// it binds "x") would write the instance unchanged, and selfcheck would blame the guard.
#include "sound_rule.hpp"

#ifdef FUSEKIT_COMPILE_FAIL
struct misnamed_refusal : sound {
  static constexpr auto refusals = fusekit::pattern::refusals(
      fusekit::pattern::refusal<"refused">(source<"y">(op<"Abs">(any()))));
};
const auto misnamed_rule = fusekit::rewrite::any_rule::of<misnamed_refusal>();
#endif
