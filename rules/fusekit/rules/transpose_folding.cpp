#include "transpose_folding.hpp"
#include "all.hpp"

namespace fusekit::rules {

rewrite::any_rule transpose_folding_rule() { return rewrite::any_rule::of<transpose_folding>(); }

}  // namespace fusekit::rules
