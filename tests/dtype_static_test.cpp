// fusekit's element types are the linked onnx release's TensorProto.DataType, every one of them, by
// value and in the order the proto numbers them; checked when this file compiles.
#include <onnx/onnx_pb.h>

#include "fusekit/graph/dtype.hpp"

using fusekit::dtype;

namespace {

constexpr bool same(dtype t, onnx::TensorProto_DataType proto) { return int(t) == int(proto); }

}  // namespace

static_assert(onnx::TensorProto_DataType_DataType_MAX == int(dtype::float6e3m2),
              "the proto has an element type fusekit's dtype lacks");
static_assert(same(dtype::float32, onnx::TensorProto_DataType_FLOAT));
static_assert(same(dtype::bfloat16, onnx::TensorProto_DataType_BFLOAT16));
static_assert(same(dtype::float8e4m3fn, onnx::TensorProto_DataType_FLOAT8E4M3FN));
static_assert(same(dtype::float8e4m3fnuz, onnx::TensorProto_DataType_FLOAT8E4M3FNUZ));
static_assert(same(dtype::float8e5m2, onnx::TensorProto_DataType_FLOAT8E5M2));
static_assert(same(dtype::float8e5m2fnuz, onnx::TensorProto_DataType_FLOAT8E5M2FNUZ));
static_assert(same(dtype::uint4, onnx::TensorProto_DataType_UINT4));
static_assert(same(dtype::int4, onnx::TensorProto_DataType_INT4));
static_assert(same(dtype::float4e2m1, onnx::TensorProto_DataType_FLOAT4E2M1));
static_assert(same(dtype::float8e8m0, onnx::TensorProto_DataType_FLOAT8E8M0));
static_assert(same(dtype::uint2, onnx::TensorProto_DataType_UINT2));
static_assert(same(dtype::int2, onnx::TensorProto_DataType_INT2));
static_assert(same(dtype::float6e2m3, onnx::TensorProto_DataType_FLOAT6E2M3));
static_assert(same(dtype::float6e3m2, onnx::TensorProto_DataType_FLOAT6E3M2));

// Every type has a name of its own: none falls through to "unknown".
constexpr bool every_type_named() {
  for (int t = 0; t <= onnx::TensorProto_DataType_DataType_MAX; ++t)
    if (fusekit::dtype_name(dtype(t)) == "unknown") return false;
  return true;
}
static_assert(every_type_named());

// Bits per element as the proto packs them: two int4 a byte, four int2, a float6 in 6 bits.
static_assert(fusekit::dtype_bits(dtype::int4) == 4 && fusekit::dtype_bits(dtype::float4e2m1) == 4);
static_assert(fusekit::dtype_bits(dtype::uint2) == 2 &&
              fusekit::dtype_bits(dtype::float6e2m3) == 6);
static_assert(fusekit::dtype_bits(dtype::float8e8m0) == 8 &&
              fusekit::dtype_bits(dtype::string) == 0);
