#include "differential_attention.hpp"
#include "all.hpp"

namespace fusekit::rules {

rewrite::any_rule differential_attention_values_rule() {
  return rewrite::any_rule::of<differential_attention_values>();
}

}  // namespace fusekit::rules
