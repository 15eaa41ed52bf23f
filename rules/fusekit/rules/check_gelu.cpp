#include "check_bundled_rule.hpp"
#include "gelu.hpp"

namespace fusekit::rules {

template selfcheck::result check_rule<gelu>(const selfcheck::options&, target, provider);
template selfcheck::result check_rule<gelu_tanh>(const selfcheck::options&, target, provider);
template selfcheck::result check_rule<bias_gelu>(const selfcheck::options&, target, provider);
template selfcheck::result check_rule<quick_gelu>(const selfcheck::options&, target, provider);

}  // namespace fusekit::rules
