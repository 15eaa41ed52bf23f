// Must not compile: "MatMull" is no ai.onnx op (a typo of MatMul), and ai.onnx names are checked.
#include "fusekit/pattern/pattern.hpp"

using namespace fusekit::pattern;

// The same pattern spelled right, and an unknown op in a custom domain, are fine.
constexpr auto matmul = op<"MatMul">(any(), any());
constexpr auto custom = op<"MatMull", "my.domain">(any(), any());

#ifdef FUSEKIT_COMPILE_FAIL
constexpr auto typo = op<"MatMull">(any(), any());
#endif
