// Must not compile: any_of() with a single alternative is no choice; write the alternative itself.
#include "fusekit/pattern/pattern.hpp"

using namespace fusekit::pattern;

constexpr auto two = any_of(op<"Relu">(any()), op<"Sigmoid">(any()));

#ifdef FUSEKIT_COMPILE_FAIL
constexpr auto one = any_of(op<"Relu">(any()));
#endif
