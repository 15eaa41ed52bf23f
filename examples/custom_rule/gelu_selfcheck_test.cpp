// The example rule's selfcheck, a test of its own: the check's search over the rule's pattern
// takes longer to compile than every specification of gelu_rule_test.cpp together, and a change
// to a specification need not compile it again.
#include "gelu_rule.hpp"

#include <gtest/gtest.h>

#include "fusekit/rewrite/selfcheck.hpp"

namespace {

// The rule checks itself from its pattern: every form, operand order and constant spelling it
// describes is written, fused and run in ONNX Runtime beside the original; each of its predicates
// broken alone must leave the graph unfused, with a near miss that names it.
TEST(GeluRule, Selfcheck) {
  const auto result = fusekit::selfcheck::check<my_rules::gelu>(
      {.write_to = FUSEKIT_SELFCHECK_DIR, .python = FUSEKIT_PYTHON});
  EXPECT_TRUE(result.ok()) << result.to_table();
  // the line the pattern README quotes
  EXPECT_EQ(result.to_table(),
            "gelu-erf: ok; 20 of 20 instances fused, 33 of 33 alternatives covered; parity with "
            "ONNX Runtime 20 of 20; 13 mutants: 13 refused and named\n");
}

}  // namespace
