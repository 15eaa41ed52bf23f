// Must not compile: an example naming a capture the pattern does not bind ("y" where it binds
// "x") would steer no choice, and selfcheck would write the plainest instance in its place.
#include "sound_rule.hpp"

#ifdef FUSEKIT_COMPILE_FAIL
struct misnamed_example : sound {
  static constexpr auto examples = fusekit::pattern::examples(example{.with = {"y"}});
};
const auto misnamed_rule = fusekit::rewrite::any_rule::of<misnamed_example>();
#endif
