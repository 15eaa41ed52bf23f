#include "check_bundled_rule.hpp"
#include "skip_normalization.hpp"

namespace fusekit::rules {

template selfcheck::result check_rule<skip_layer_normalization>(const selfcheck::options&, target,
                                                                provider);
template selfcheck::result check_rule<skip_rms_normalization>(const selfcheck::options&, target,
                                                              provider);

}  // namespace fusekit::rules
