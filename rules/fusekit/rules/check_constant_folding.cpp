#include "check_bundled_rule.hpp"
#include "constant_folding.hpp"

namespace fusekit::rules {

template selfcheck::result check_rule<constant_folding>(const selfcheck::options&, target,
                                                        provider);
template selfcheck::result check_rule<constant_view_folding>(const selfcheck::options&, target,
                                                             provider);

}  // namespace fusekit::rules
