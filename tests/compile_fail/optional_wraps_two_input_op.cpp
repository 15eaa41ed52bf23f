// Must not compile: optional<> stands in for an absent op by that op's single input, so it takes
// exactly one.
#include "fusekit/pattern/pattern.hpp"

using namespace fusekit::pattern;

constexpr auto maybe_relu = optional<"Relu">(any());

#ifdef FUSEKIT_COMPILE_FAIL
constexpr auto maybe_add = optional<"Add">(any(), any());
#endif
