#include "batch_normalization_folding.hpp"
#include "check_bundled_rule.hpp"

namespace fusekit::rules {

template selfcheck::result check_rule<batch_normalization_into_conv>(const selfcheck::options&,
                                                                     target, provider);
template selfcheck::result check_rule<batch_normalization_into_conv_transpose>(
    const selfcheck::options&, target, provider);
template selfcheck::result check_rule<batch_normalization_into_gemm>(const selfcheck::options&,
                                                                     target, provider);

}  // namespace fusekit::rules
