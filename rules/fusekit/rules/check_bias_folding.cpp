#include "bias_folding.hpp"
#include "check_bundled_rule.hpp"

namespace fusekit::rules {

template selfcheck::result check_rule<bias_into_conv>(const selfcheck::options&, target, provider);
template selfcheck::result check_rule<bias_into_gemm>(const selfcheck::options&, target, provider);
template selfcheck::result check_rule<matmul_add_to_gemm>(const selfcheck::options&, target,
                                                          provider);

}  // namespace fusekit::rules
