// Must not compile: MatMul always has two inputs, so its second one cannot be maybe().
#include "fusekit/pattern/pattern.hpp"

using namespace fusekit::pattern;

constexpr auto clip =
    op<"Clip">(any(), maybe(constant_scalar<"min">), maybe(constant_scalar<"max">));

#ifdef FUSEKIT_COMPILE_FAIL
constexpr auto matmul = op<"MatMul">(any(), maybe(any()));
#endif
