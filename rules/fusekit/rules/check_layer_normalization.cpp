#include "check_bundled_rule.hpp"
#include "layer_normalization.hpp"

namespace fusekit::rules {

template selfcheck::result check_rule<layer_normalization>(const selfcheck::options&, target,
                                                           provider);
template selfcheck::result check_rule<rms_normalization>(const selfcheck::options&, target,
                                                         provider);

}  // namespace fusekit::rules
