// Must not compile: around<>'s inputs before and after its own are two lists, each of its name.
#include "fusekit/pattern/pattern.hpp"

using namespace fusekit::pattern;

constexpr auto concat = op<"Concat">(around<"before", "after">(op<"Concat">(all<"parts">)));

#ifdef FUSEKIT_COMPILE_FAIL
constexpr auto one_name = op<"Concat">(around<"others", "others">(op<"Concat">(all<"parts">)));
#endif
