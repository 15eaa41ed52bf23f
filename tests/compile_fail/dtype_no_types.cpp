// Must not compile: dtype<>() with no element type would accept nothing.
#include "fusekit/pattern/pattern.hpp"

using namespace fusekit::pattern;
using fusekit::dtype;

constexpr auto float32 = capture<"x">.dtype<dtype::float32>();

#ifdef FUSEKIT_COMPILE_FAIL
constexpr auto nothing = capture<"x">.dtype<>();
#endif
