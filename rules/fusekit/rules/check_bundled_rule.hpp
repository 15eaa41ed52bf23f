// One bundled rule checked under a target and provider, as check_bundled runs it. The generator's
// instantiation for a rule costs what compiling the rule does: each is compiled in its family's
// file (check_<family>.cpp, which reads no other family), so that the families build side by side;
// check_bundled.cpp declares them for its table and instantiates none. The rule itself (matcher,
// guard, emit) is the library's, compiled once in its family's rule file.
#pragma once

#include "all.hpp"
#include "fusekit/rewrite/selfcheck.hpp"
#include "options.hpp"

namespace fusekit::rules {

template <class R>
selfcheck::result check_rule(const selfcheck::options& o, target to, provider on) {
  attention_options own;
  own.fused_target = to;
  own.runs_on = on;
  // The rule as the library compiled it (all.cpp): this file compiles R's pattern's writer alone.
  return selfcheck::check<R>(o, rule_named(R::name, own));
}

}  // namespace fusekit::rules
