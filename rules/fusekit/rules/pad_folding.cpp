#include "pad_folding.hpp"
#include "all.hpp"

namespace fusekit::rules {

rewrite::any_rule pad_into_conv_rule() { return rewrite::any_rule::of<pad_into_conv>(); }

}  // namespace fusekit::rules
