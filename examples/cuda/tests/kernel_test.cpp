// The kernels against the fp64 reference: every instantiation (element type × head size ×
// causal × K layout × query tile), tails, scales 1/√d, 0.3 and F5-TTS's 100, grouped heads, rows
// with no visible key, and the simple kernel. Built twice from this one source: flash_gpu_test
// runs it on a GPU (registered only where one is present), flash_emulated_kernel_test on the
// SIMT emulator, everywhere (its Large shapes are left to the GPU).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "../tools/device_tensors.hpp"
#include "flash/launch.hpp"
#include "flash/reference.hpp"
#include "test_tensors.hpp"

namespace flash {
namespace {

using testing::layout;

double gpu_error(const problem& p, const kernel_choice& choice) {
  const testing::inputs in = testing::random_inputs(p, 11);
  return testing::max_error(p, tools::forward(p, in.q, in.k, in.v, choice),
                            reference(p, in.q.data(), in.k.data(), in.v.data()));
}

kernel_choice tiled(int slices, bool k_vectorized = true) {
  return {kernel_choice::kernel::tiled, slices, k_vectorized, {}};
}

TEST(Small, EveryTiledInstantiation) {
  int n = 0;
  for (element type : {element::f16, element::bf16})
    for (int dim : {64, 128})
      for (bool causal : {false, true})
        for (layout l : {layout::bnsh, layout::bsnh, layout::bnhs_k})
          for (int slices : {1, 2}) {
            const int seq = n % 2 ? 200 : 136;  // tails; multiples of 8 for vector K loads
            const float scale = n++ % 3 == 0 ? 100.f : 1.f / std::sqrt(float(dim));
            const problem p = testing::make_problem(type, 2, 3, 3, seq, seq, dim, scale, causal, l);
            EXPECT_LE(gpu_error(p, tiled(slices)), testing::tolerance(type))
                << element_name(type) << " d" << dim << (causal ? " causal " : " ")
                << testing::layout_name(l) << " slices " << slices;
          }
}

TEST(Small, TransposedKFallbackLoads) {
  for (int seq : {37, 131}) {
    const problem p =
        testing::make_problem(element::f16, 1, 2, 2, seq, seq, 64, 100.f, false, layout::bnhs_k);
    EXPECT_LE(gpu_error(p, tiled(1, false)), testing::tolerance(element::f16)) << seq;
  }
}

TEST(Small, SimpleKernel) {
  for (element type : {element::f32, element::f16, element::bf16})
    for (int dim : {8, 16, 64, 80, 256}) {
      const problem p =
          testing::make_problem(type, 2, 4, 2, 45, 70, dim, 0.3f, dim == 16, layout::bsnh);
      EXPECT_LE(gpu_error(p, {}), testing::tolerance(type)) << element_name(type) << " d" << dim;
    }
}

struct case_t {
  element type;
  int dim, slices;
  bool causal;
  layout l;
  int seq_q, seq_kv;
  float scale;
  int heads = 2, kv_heads = 2;
};

std::string describe(const case_t& c) {
  return std::string(element_name(c.type)) + " d" + std::to_string(c.dim) + " slices " +
         std::to_string(c.slices) + (c.causal ? " causal " : " ") + testing::layout_name(c.l) +
         " S " + std::to_string(c.seq_q) + "×" + std::to_string(c.seq_kv) + " scale " +
         std::to_string(c.scale) + " heads " + std::to_string(c.heads) + "/" +
         std::to_string(c.kv_heads);
}

// Transposed K rows take 16-byte copies only when a row is a whole number of them.
double case_error(const case_t& c) {
  return gpu_error(testing::make_problem(c.type, 2, c.heads, c.kv_heads, c.seq_q, c.seq_kv, c.dim,
                                         c.scale, c.causal, c.l),
                   tiled(c.slices, c.l != layout::bnhs_k || c.seq_kv % 8 == 0));
}

// Every instantiation again, each with its own sequence lengths (tails, one row, more keys than
// queries and fewer) and scale.
TEST(Small, EveryTiledInstantiationOnItsOwnShape) {
  const int seqs[][2] = {{64, 64}, {100, 100}, {37, 37}, {130, 130}, {1, 1}, {200, 77}, {65, 190}};
  int n = 0;
  for (element type : {element::f16, element::bf16})
    for (int dim : {64, 128})
      for (int slices : {1, 2})
        for (bool causal : {false, true})
          for (layout l : {layout::bnsh, layout::bsnh, layout::bnhs_k}) {
            const auto& s = seqs[n % 7];
            const float scale = n % 3 == 0   ? 100.f
                                : n % 3 == 1 ? 1.f / std::sqrt(float(dim))
                                             : 0.3f;
            ++n;
            const case_t c{type, dim, slices, causal, l, s[0], s[1], scale};
            EXPECT_LE(case_error(c), testing::tolerance(type)) << describe(c);
          }
}

TEST(Small, GroupedQueryHeadsShareKeyValueHeads) {
  const case_t c{element::f16, 128, 2, true, layout::bnsh, 150, 150, 0.125f, 8, 2};
  EXPECT_LE(case_error(c), testing::tolerance(element::f16)) << describe(c);
}

TEST(Small, RowsWithNoVisibleKeyAreZeroNotNan) {
  const problem p =
      testing::make_problem(element::f16, 1, 1, 1, 70, 0, 64, 1.f, false, layout::bnsh);
  const testing::inputs in = testing::random_inputs(p, 1);
  for (float x : tools::forward(p, in.q, {0.f}, {0.f}, tiled(1))) EXPECT_EQ(x, 0.f);
}

// The comparison has teeth: a causal reference against a non-causal run fails it.
TEST(Small, ToleranceDetectsAWrongMask) {
  problem p =
      testing::make_problem(element::f16, 1, 2, 2, 100, 100, 64, 0.125f, false, layout::bnsh);
  const testing::inputs in = testing::random_inputs(p, 3);
  const std::vector<float> out = tools::forward(p, in.q, in.k, in.v, tiled(1));
  p.causal = true;
  EXPECT_GT(testing::max_error(p, out, reference(p, in.q.data(), in.k.data(), in.v.data())),
            10 * testing::tolerance(element::f16));
}

TEST(Large, F5TtsAndSd3Shapes) {
  for (int seq : {256, 1024}) {
    const problem p =
        testing::make_problem(element::f16, 2, 16, 16, seq, seq, 64, 100.f, false, layout::bnhs_k);
    EXPECT_LE(gpu_error(p, tiled(1)), testing::tolerance(element::f16)) << seq;
  }
  const problem sd3 =
      testing::make_problem(element::f16, 1, 24, 24, 1024, 1024, 64, 0.125f, false, layout::bnsh);
  EXPECT_LE(gpu_error(sd3, tiled(2)), testing::tolerance(element::f16));
}

}  // namespace
}  // namespace flash
