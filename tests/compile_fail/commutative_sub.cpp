// Must not compile: a - b is not b - a, so a swapped match would fuse a different computation.
#include "fusekit/pattern/pattern.hpp"

using namespace fusekit::pattern;

constexpr auto add = commutative(op<"Add">(any(), any()));

#ifdef FUSEKIT_COMPILE_FAIL
constexpr auto sub = commutative(op<"Sub">(any(), any()));
#endif
