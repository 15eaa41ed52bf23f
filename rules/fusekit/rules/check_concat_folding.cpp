#include "check_bundled_rule.hpp"
#include "concat_folding.hpp"

namespace fusekit::rules {

template selfcheck::result check_rule<concat_folding>(const selfcheck::options&, target, provider);

}  // namespace fusekit::rules
