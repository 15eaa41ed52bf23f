// The tiled kernel with one of its synchronisations or bounds checks taken out (a mutant CMake
// writes from flash/tiled_kernel.cuh, FLASH_MUTANT_HEADER) must fail on the emulator with the
// fault that names the mistake (FLASH_MUTANT_FAULT): the emulator's checks catch the kernel's own
// errors, not only planted ones.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../tools/device_tensors.hpp"
#include FLASH_MUTANT_HEADER
#include "test_tensors.hpp"

namespace flash {
namespace {

TEST(Mutant, FailsWithTheFaultThatNamesIt) {
  // Tails in both lengths, so that the last query tile reaches past the end of O.
  const problem p = testing::make_problem(element::f16, 1, 2, 2, 72, 136, 64, 0.125f, false,
                                          testing::layout::bnsh);
  const testing::inputs in = testing::random_inputs(p, 9);
  tools::device_tensor q(p.type, in.q), k(p.type, in.k), v(p.type, in.v);
  tools::device_tensor o(p.type, std::size_t(o_extent(p)));
  const kernel_args a{p, q.data(), k.data(), v.data(), o.data(), true};
  EXPECT_EQ(tiled::dispatch<__half>(a, 2, nullptr), cudaErrorLaunchFailure);
  EXPECT_TRUE(emulator::fault().starts_with(FLASH_MUTANT_FAULT)) << emulator::fault();
}

}  // namespace
}  // namespace flash
