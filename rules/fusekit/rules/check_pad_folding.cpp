#include "check_bundled_rule.hpp"
#include "pad_folding.hpp"

namespace fusekit::rules {

template selfcheck::result check_rule<pad_into_conv>(const selfcheck::options&, target, provider);
template selfcheck::result check_rule<pad_into_max_pool>(const selfcheck::options&, target,
                                                         provider);
template selfcheck::result check_rule<pad_into_average_pool>(const selfcheck::options&, target,
                                                             provider);

}  // namespace fusekit::rules
