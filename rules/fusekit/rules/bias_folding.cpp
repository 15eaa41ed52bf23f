#include "bias_folding.hpp"
#include "all.hpp"

namespace fusekit::rules {

rewrite::any_rule bias_into_conv_rule() { return rewrite::any_rule::of<bias_into_conv>(); }
rewrite::any_rule bias_into_gemm_rule() { return rewrite::any_rule::of<bias_into_gemm>(); }
rewrite::any_rule matmul_add_to_gemm_rule() { return rewrite::any_rule::of<matmul_add_to_gemm>(); }

}  // namespace fusekit::rules
