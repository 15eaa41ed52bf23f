// Must not compile: Add takes exactly two inputs; all<> is for ops with any number (Concat, Sum).
#include "fusekit/pattern/pattern.hpp"

using namespace fusekit::pattern;

constexpr auto sum = op<"Sum">(all<"terms">);

#ifdef FUSEKIT_COMPILE_FAIL
constexpr auto add = op<"Add">(all<"terms">);
#endif
