#include "check_bundled_rule.hpp"
#include "constant_evaluation.hpp"

namespace fusekit::rules {

template selfcheck::result check_rule<constant_evaluation>(const selfcheck::options&, target,
                                                           provider);

}  // namespace fusekit::rules
