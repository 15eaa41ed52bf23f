#include "check_bundled_rule.hpp"
#include "eliminations.hpp"

namespace fusekit::rules {

template selfcheck::result check_rule<identity_elimination>(const selfcheck::options&, target,
                                                            provider);
template selfcheck::result check_rule<noop_elimination>(const selfcheck::options&, target,
                                                        provider);
template selfcheck::result check_rule<not_elimination>(const selfcheck::options&, target, provider);
template selfcheck::result check_rule<castlike_to_cast>(const selfcheck::options&, target,
                                                        provider);
template selfcheck::result check_rule<constant_to_initializer>(const selfcheck::options&, target,
                                                               provider);

}  // namespace fusekit::rules
