#include "check_bundled_rule.hpp"
#include "slice_folding.hpp"

namespace fusekit::rules {

template selfcheck::result check_rule<slice_folding>(const selfcheck::options&, target, provider);

}  // namespace fusekit::rules
