// The second example rule's selfcheck, a test of its own, as the GELU rule's is.
#include "skip_layer_norm_rule.hpp"

#include <gtest/gtest.h>

#include "fusekit/rewrite/selfcheck.hpp"

namespace {

// Both Adds' operand orders, the bias and beta present and absent, float and float16: each
// fuses and computes what it replaced; a gamma or bias of the wrong shape is found by the search
// the guard judges, and each predicate broken alone is refused by name or, where the bias-free
// alternative takes the graph, still computes the same. Each of the rule's refusals (an input of
// rank 4, a skip that broadcasts, a gamma of one element), written into an instance that fused,
// is refused in the words the rule gives.
TEST(SkipLayerNormRule, Selfcheck) {
  const auto result = fusekit::selfcheck::check<my_rules::skip_layer_norm>(
      {.write_to = FUSEKIT_SELFCHECK_DIR, .python = FUSEKIT_PYTHON});
  EXPECT_TRUE(result.ok()) << result.to_table();
}

}  // namespace
