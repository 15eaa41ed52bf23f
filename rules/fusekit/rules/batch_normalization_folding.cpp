#include "batch_normalization_folding.hpp"
#include "all.hpp"

namespace fusekit::rules {

rewrite::any_rule batch_normalization_into_conv_rule() {
  return rewrite::any_rule::of<batch_normalization_into_conv>();
}
rewrite::any_rule batch_normalization_into_conv_transpose_rule() {
  return rewrite::any_rule::of<batch_normalization_into_conv_transpose>();
}
rewrite::any_rule batch_normalization_into_gemm_rule() {
  return rewrite::any_rule::of<batch_normalization_into_gemm>();
}

}  // namespace fusekit::rules
