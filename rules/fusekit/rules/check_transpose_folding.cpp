#include "check_bundled_rule.hpp"
#include "transpose_folding.hpp"

namespace fusekit::rules {

template selfcheck::result check_rule<transpose_folding>(const selfcheck::options&, target,
                                                         provider);

}  // namespace fusekit::rules
