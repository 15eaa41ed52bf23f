// Must not compile: .axes() reads a Reduce op's axes, where none given means every axis; Squeeze's
// axes mean something else.
#include "fusekit/pattern/pattern.hpp"

using namespace fusekit::pattern;

constexpr auto mean = op<"ReduceMean">(any(), maybe(any())).axes(last_axis);

#ifdef FUSEKIT_COMPILE_FAIL
constexpr auto squeeze = op<"Squeeze">(any(), maybe(any())).axes(last_axis);
#endif
