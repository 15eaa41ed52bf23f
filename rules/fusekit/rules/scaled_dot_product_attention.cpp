#include "scaled_dot_product_attention.hpp"
#include "all.hpp"

namespace fusekit::rules {

rewrite::any_rule scaled_dot_product_attention_rule(const attention_options& attention) {
  return rewrite::any_rule::of<scaled_dot_product_attention>(attention);
}

}  // namespace fusekit::rules
