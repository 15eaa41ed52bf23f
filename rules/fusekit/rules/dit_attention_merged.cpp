#include "all.hpp"
#include "dit.hpp"

namespace fusekit::rules {

rewrite::any_rule dit_attention_merged_rule(const attention_options& attention) {
  return rewrite::any_rule::of<dit_attention_merged>(attention);
}

}  // namespace fusekit::rules
