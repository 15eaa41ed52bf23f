// Must not compile: "x" is bound both as a value (capture) and as a number (constant_scalar).
#include "fusekit/graph/graph.hpp"
#include "fusekit/pattern/pattern.hpp"

using namespace fusekit::pattern;

void use(const fusekit::graph& g) {
  constexpr auto two_names = op<"Mul">(capture<"x">, constant_scalar<"s">);
  (void)match(two_names, g, 0);
#ifdef FUSEKIT_COMPILE_FAIL
  constexpr auto one_name = op<"Mul">(capture<"x">, constant_scalar<"x">);
  (void)match(one_name, g, 0);
#endif
}
