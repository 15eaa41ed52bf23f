#include "constant_folding.hpp"
#include "all.hpp"

namespace fusekit::rules {

rewrite::any_rule constant_folding_rule() { return rewrite::any_rule::of<constant_folding>(); }

rewrite::any_rule constant_view_folding_rule() {
  return rewrite::any_rule::of<constant_view_folding>();
}

}  // namespace fusekit::rules
