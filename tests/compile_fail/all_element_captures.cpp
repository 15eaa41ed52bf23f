// Must not compile: all<>(p) matches p once per input, so a capture inside p would be bound to
// every input at once.
#include "fusekit/pattern/pattern.hpp"

using namespace fusekit::pattern;
using fusekit::dtype;

constexpr auto halves = op<"Concat">(all<"parts">(any().dtype<dtype::float16>()));

#ifdef FUSEKIT_COMPILE_FAIL
constexpr auto named = op<"Concat">(all<"parts">(capture<"part">));
#endif
