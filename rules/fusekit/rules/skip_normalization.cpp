#include "skip_normalization.hpp"
#include "all.hpp"

namespace fusekit::rules {

rewrite::any_rule skip_layer_normalization_rule(const fusion_options& options) {
  return rewrite::any_rule::of<skip_layer_normalization>(options);
}

rewrite::any_rule skip_rms_normalization_rule(const fusion_options& options) {
  return rewrite::any_rule::of<skip_rms_normalization>(options);
}

}  // namespace fusekit::rules
