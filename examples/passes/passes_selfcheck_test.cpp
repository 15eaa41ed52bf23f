// Each pass checked from its own pattern (fusekit/rewrite/selfcheck.hpp): every form it claims is
// written, fused and run in ONNX Runtime beside the original; each predicate broken alone must be
// refused with a near miss that names it. A file of its own: the check's instantiations cost more
// to compile than the specifications beside them.
#include <gtest/gtest.h>

#include <filesystem>

#include "fusekit/rewrite/selfcheck.hpp"
#include "fusekit/rules/batch_normalization_folding.hpp"
#include "fusekit/rules/bias_folding.hpp"
#include "fusekit/rules/transpose_folding.hpp"
#include "quick_gelu.hpp"

namespace {

template <class Pass>
std::string selfcheck(std::string_view dir) {
  const auto result = fusekit::selfcheck::check<Pass>(
      {.write_to = std::filesystem::path(FUSEKIT_SELFCHECK_DIR) / dir, .python = FUSEKIT_PYTHON});
  EXPECT_TRUE(result.ok()) << result.to_table();
  return result.to_table();
}

TEST(PassesSelfcheck, QuickGelu) {
  EXPECT_EQ(selfcheck<passes::quick_gelu>("quick_gelu"),
            "quick-gelu: ok; 8 of 8 instances fused, 10 of 10 alternatives covered; parity with "
            "ONNX Runtime 8 of 8; 4 mutants: 4 refused and named\n");
}
TEST(PassesSelfcheck, TransposeFolding) {
  // No predicate to break: the perms are read by the guard and emit, not asked by the pattern.
  EXPECT_EQ(
      selfcheck<fusekit::rules::transpose_folding>("transpose_folding"),
      "transpose-folding: ok; 6 of 6 instances fused, 4 of 4 alternatives covered; parity with "
      "ONNX Runtime 6 of 6; 0 mutants: 0 refused and named\n");
}
TEST(PassesSelfcheck, MatMulAddToGemm) {
  // a [M, K] beside b [K, N]: the declared ranks' dims are searched until the product runs.
  EXPECT_EQ(selfcheck<fusekit::rules::matmul_add_to_gemm>("matmul_add_to_gemm"),
            "matmul-add-to-gemm: ok; 7 of 7 instances fused, 6 of 6 alternatives covered; parity "
            "with ONNX Runtime 7 of 7; 3 mutants: 3 refused and named\n");
}
TEST(PassesSelfcheck, FoldBatchNormIntoConv) {
  // The statistics are written as long as the weight's dim 0, which they read through same_dim.
  EXPECT_EQ(
      selfcheck<fusekit::rules::batch_normalization_into_conv>("fold_batch_norm_into_conv"),
      "batch-normalization-into-conv: ok; 7 of 7 instances fused, 6 of 6 alternatives covered; "
      "parity with ONNX Runtime 7 of 7; 4 mutants: 4 refused and named\n");
}

}  // namespace
