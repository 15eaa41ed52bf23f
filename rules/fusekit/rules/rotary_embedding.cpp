#include "rotary_embedding.hpp"
#include "all.hpp"

namespace fusekit::rules {

rewrite::any_rule rotary_embedding_rule(const fusion_options& options) {
  return rewrite::any_rule::of<rotary_embedding>(options);
}

rewrite::any_rule rotary_embedding_interleaved_rule(const fusion_options& options) {
  return rewrite::any_rule::of<rotary_embedding_interleaved>(options);
}

rewrite::any_rule partial_rotary_embedding_rule() {
  return rewrite::any_rule::of<partial_rotary_embedding>();
}

}  // namespace fusekit::rules
