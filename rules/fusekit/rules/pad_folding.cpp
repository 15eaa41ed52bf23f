#include "pad_folding.hpp"
#include "all.hpp"

namespace fusekit::rules {

rewrite::any_rule pad_into_conv_rule() { return rewrite::any_rule::of<pad_into_conv>(); }
rewrite::any_rule pad_into_max_pool_rule() { return rewrite::any_rule::of<pad_into_max_pool>(); }
rewrite::any_rule pad_into_average_pool_rule() {
  return rewrite::any_rule::of<pad_into_average_pool>();
}

}  // namespace fusekit::rules
