#include "all.hpp"
#include "scaled_dot_product_attention.hpp"

namespace fusekit::rules {

rewrite::any_rule scaled_dot_product_attention_head_merge_rule(const attention_options& attention) {
  return rewrite::any_rule::of<scaled_dot_product_attention_head_merge>(attention);
}

}  // namespace fusekit::rules
