#include "unsqueeze_folding.hpp"
#include "all.hpp"

namespace fusekit::rules {

rewrite::any_rule unsqueeze_folding_rule() { return rewrite::any_rule::of<unsqueeze_folding>(); }
rewrite::any_rule squeeze_unsqueeze_elimination_rule() {
  return rewrite::any_rule::of<squeeze_unsqueeze_elimination>();
}

}  // namespace fusekit::rules
