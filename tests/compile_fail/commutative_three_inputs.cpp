// Must not compile: commutative() swaps two operands, and Where has three inputs.
#include "fusekit/pattern/pattern.hpp"

using namespace fusekit::pattern;

constexpr auto add = commutative(op<"Add">(any(), any()));

#ifdef FUSEKIT_COMPILE_FAIL
constexpr auto where = commutative(op<"Where">(any(), any(), any()));
#endif
