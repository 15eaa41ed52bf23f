// Must not compile: the where_bound() predicate reads capture "scale", which the pattern lacks.
#include "fusekit/graph/graph.hpp"
#include "fusekit/pattern/pattern.hpp"

using namespace fusekit::pattern;

constexpr auto reads = [](const fusekit::graph&, fusekit::value_id, const auto& bound) {
  return bound.template get<"s">() > 0;
};

void use(const fusekit::graph& g) {
  constexpr auto named = op<"Mul">(constant_scalar<"s">, capture<"x">.where_bound("scaled", reads));
  (void)match(named, g, 0);
#ifdef FUSEKIT_COMPILE_FAIL
  constexpr auto missing =
      op<"Mul">(constant_scalar<"s">,
                capture<"x">.where_bound(
                    "scaled", [](const fusekit::graph&, fusekit::value_id, const auto& bound) {
                      return bound.template get<"scale">() > 0;
                    }));
  (void)match(missing, g, 0);
#endif
}
