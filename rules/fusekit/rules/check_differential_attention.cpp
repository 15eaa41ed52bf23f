#include "check_bundled_rule.hpp"
#include "differential_attention.hpp"

namespace fusekit::rules {

template selfcheck::result check_rule<differential_attention_values>(const selfcheck::options&,
                                                                     target, provider);

}  // namespace fusekit::rules
