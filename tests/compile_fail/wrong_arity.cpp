// Must not compile: MatMul takes exactly two inputs, the pattern gives it one.
#include "fusekit/pattern/pattern.hpp"

using namespace fusekit::pattern;

constexpr auto matmul = op<"MatMul">(any(), any());

#ifdef FUSEKIT_COMPILE_FAIL
constexpr auto one_input = op<"MatMul">(any());
#endif
