#include "concat_folding.hpp"
#include "all.hpp"

namespace fusekit::rules {

rewrite::any_rule concat_folding_rule() { return rewrite::any_rule::of<concat_folding>(); }

}  // namespace fusekit::rules
