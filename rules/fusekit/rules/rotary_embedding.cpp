#include "rotary_embedding.hpp"
#include "all.hpp"

namespace fusekit::rules {

rewrite::any_rule rotary_embedding_rule(const fusion_options& options) {
  return rewrite::any_rule::of<rotary_embedding>(options);
}

rewrite::any_rule rotary_embedding_interleaved_rule(const fusion_options& options) {
  return rewrite::any_rule::of<rotary_embedding_interleaved>(options);
}

}  // namespace fusekit::rules
