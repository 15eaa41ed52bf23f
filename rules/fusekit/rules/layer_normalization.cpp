#include "layer_normalization.hpp"
#include "all.hpp"

namespace fusekit::rules {

rewrite::any_rule layer_normalization_rule(const fusion_options& options) {
  return rewrite::any_rule::of<layer_normalization>(options);
}

rewrite::any_rule rms_normalization_rule(const fusion_options& options) {
  return rewrite::any_rule::of<rms_normalization>(options);
}

}  // namespace fusekit::rules
