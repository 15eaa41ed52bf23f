#include "reshape_folding.hpp"
#include "all.hpp"

namespace fusekit::rules {

rewrite::any_rule reshape_folding_rule() { return rewrite::any_rule::of<reshape_folding>(); }
rewrite::any_rule reshape_target_folding_rule() {
  return rewrite::any_rule::of<reshape_target_folding>();
}

}  // namespace fusekit::rules
