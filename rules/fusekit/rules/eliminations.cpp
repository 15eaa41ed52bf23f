#include "eliminations.hpp"
#include "all.hpp"

namespace fusekit::rules {

rewrite::any_rule identity_elimination_rule() {
  return rewrite::any_rule::of<identity_elimination>();
}

rewrite::any_rule noop_elimination_rule() { return rewrite::any_rule::of<noop_elimination>(); }

rewrite::any_rule not_elimination_rule() { return rewrite::any_rule::of<not_elimination>(); }

rewrite::any_rule castlike_to_cast_rule() { return rewrite::any_rule::of<castlike_to_cast>(); }

rewrite::any_rule constant_to_initializer_rule() {
  return rewrite::any_rule::of<constant_to_initializer>();
}

}  // namespace fusekit::rules
