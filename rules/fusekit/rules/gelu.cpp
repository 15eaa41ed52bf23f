#include "gelu.hpp"
#include "all.hpp"

namespace fusekit::rules {

rewrite::any_rule gelu_rule(const fusion_options& options) {
  return rewrite::any_rule::of<gelu>(options);
}

rewrite::any_rule gelu_tanh_rule(const fusion_options& options) {
  return rewrite::any_rule::of<gelu_tanh>(options);
}

rewrite::any_rule bias_gelu_rule(const fusion_options& options) {
  return rewrite::any_rule::of<bias_gelu>(options);
}

rewrite::any_rule quick_gelu_rule(const fusion_options& options) {
  return rewrite::any_rule::of<quick_gelu>(options);
}

}  // namespace fusekit::rules
