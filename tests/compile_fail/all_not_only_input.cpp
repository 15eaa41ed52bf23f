// Must not compile: all<> stands for every input, so nothing can come before or after it.
#include "fusekit/pattern/pattern.hpp"

using namespace fusekit::pattern;

constexpr auto concat = op<"Concat">(all<"parts">);

#ifdef FUSEKIT_COMPILE_FAIL
constexpr auto first_and_rest = op<"Concat">(capture<"first">, all<"rest">);
#endif
