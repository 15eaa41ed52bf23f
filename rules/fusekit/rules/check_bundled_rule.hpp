// One bundled rule checked under a target and provider, as check_bundled runs it. The generator's
// instantiation for a rule costs what compiling the rule does: each is compiled in its family's
// file (check_<family>.cpp, which reads no other family), so that the families build side by side;
// check_bundled.cpp declares them for its table and instantiates none.
#pragma once

#include <type_traits>

#include "fusekit/rewrite/selfcheck.hpp"
#include "options.hpp"

namespace fusekit::rules {

template <class R>
selfcheck::result check_rule(const selfcheck::options& o, target to, provider on) {
  if constexpr (std::is_same_v<rewrite::options_of<R>, rewrite::no_options>) {
    return selfcheck::check<R>(o);
  } else {
    rewrite::options_of<R> own;
    own.fused_target = to;
    own.runs_on = on;
    return selfcheck::check<R>(o, own);
  }
}

}  // namespace fusekit::rules
