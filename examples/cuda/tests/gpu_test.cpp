// The kernels on a GPU against the fp64 reference: every instantiation (element type × head
// size × causal × K layout × query tile), tails, the F5-TTS scale, grouped heads, and the simple
// kernel. Registered only where a GPU is present.
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
  tools::device_tensor q(p.type, in.q), k(p.type, in.k), v(p.type, in.v);
  tools::device_tensor o(p.type, std::size_t(o_extent(p)));
  tools::check(attention_forward(p, {q.data(), k.data(), v.data(), o.data()}, choice, nullptr),
               "launch");
  tools::check(cudaDeviceSynchronize(), "kernel");
  return testing::max_error(p, o.download(), reference(p, in.q.data(), in.k.data(), in.v.data()));
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
