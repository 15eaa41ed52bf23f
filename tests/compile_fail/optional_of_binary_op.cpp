// Must not compile: optional<"Add">(x) builds Add(x), and Add takes two inputs.
#include "fusekit/pattern/pattern.hpp"

using namespace fusekit::pattern;

constexpr auto maybe_cast = optional<"Cast">(any());

#ifdef FUSEKIT_COMPILE_FAIL
constexpr auto maybe_add = optional<"Add">(any());
#endif
