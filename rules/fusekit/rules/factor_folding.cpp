#include "factor_folding.hpp"
#include "all.hpp"

namespace fusekit::rules {

rewrite::any_rule factor_folding_rule() { return rewrite::any_rule::of<factor_folding>(); }

}  // namespace fusekit::rules
