#include "check_bundled_rule.hpp"
#include "scaled_dot_product_attention.hpp"

namespace fusekit::rules {

template selfcheck::result check_rule<scaled_dot_product_attention>(const selfcheck::options&,
                                                                    target, provider);

}  // namespace fusekit::rules
