// Must not compile: Clip takes one to three inputs (input, min, max), the pattern gives it four.
#include "fusekit/pattern/pattern.hpp"

using namespace fusekit::pattern;

constexpr auto relu6 = op<"Clip">(any(), constant_scalar<"min">, constant_scalar<"max">);

#ifdef FUSEKIT_COMPILE_FAIL
constexpr auto four = op<"Clip">(any(), any(), any(), any());
#endif
