#include "check_bundled_rule.hpp"
#include "unsqueeze_folding.hpp"

namespace fusekit::rules {

template selfcheck::result check_rule<unsqueeze_folding>(const selfcheck::options&, target,
                                                         provider);
template selfcheck::result check_rule<squeeze_unsqueeze_elimination>(const selfcheck::options&,
                                                                     target, provider);

}  // namespace fusekit::rules
