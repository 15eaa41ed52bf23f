// Must not compile: get<"nope">() names a capture the pattern does not have.
#include "fusekit/graph/graph.hpp"
#include "fusekit/pattern/pattern.hpp"

using namespace fusekit::pattern;

void use(const fusekit::graph& g) {
  constexpr auto mul = op<"Mul">(capture<"x">, constant_scalar<"s">);
  const auto m = match(mul, g, 0);
  (void)m.get<"x">();
#ifdef FUSEKIT_COMPILE_FAIL
  (void)m.get<"nope">();
#endif
}
