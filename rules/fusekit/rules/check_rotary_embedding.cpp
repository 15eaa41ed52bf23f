#include "check_bundled_rule.hpp"
#include "rotary_embedding.hpp"

namespace fusekit::rules {

template selfcheck::result check_rule<rotary_embedding>(const selfcheck::options&, target,
                                                        provider);
template selfcheck::result check_rule<rotary_embedding_interleaved>(const selfcheck::options&,
                                                                    target, provider);
template selfcheck::result check_rule<partial_rotary_embedding>(const selfcheck::options&, target,
                                                                provider);

}  // namespace fusekit::rules
