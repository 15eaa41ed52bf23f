// Must not compile: same_dim<> compares with capture "kq", and the pattern binds no such name (a
// typo of "q").
#include "fusekit/graph/graph.hpp"
#include "fusekit/pattern/pattern.hpp"

using namespace fusekit::pattern;

void use(const fusekit::graph& g) {
  constexpr auto named = op<"MatMul">(capture<"q">, capture<"kt">.same_dim<-2, "q", -1>());
  (void)match(named, g, 0);
#ifdef FUSEKIT_COMPILE_FAIL
  constexpr auto typo = op<"MatMul">(capture<"q">, capture<"kt">.same_dim<-2, "kq", -1>());
  (void)match(typo, g, 0);
#endif
}
