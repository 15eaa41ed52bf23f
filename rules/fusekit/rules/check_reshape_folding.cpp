#include "check_bundled_rule.hpp"
#include "reshape_folding.hpp"

namespace fusekit::rules {

template selfcheck::result check_rule<reshape_folding>(const selfcheck::options&, target, provider);
template selfcheck::result check_rule<reshape_target_folding>(const selfcheck::options&, target,
                                                              provider);

}  // namespace fusekit::rules
