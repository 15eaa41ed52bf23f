#include "slice_folding.hpp"
#include "all.hpp"

namespace fusekit::rules {

rewrite::any_rule slice_folding_rule() { return rewrite::any_rule::of<slice_folding>(); }

}  // namespace fusekit::rules
