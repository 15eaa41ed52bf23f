#include "check_bundled_rule.hpp"
#include "factor_folding.hpp"

namespace fusekit::rules {

template selfcheck::result check_rule<factor_folding>(const selfcheck::options&, target, provider);

}  // namespace fusekit::rules
