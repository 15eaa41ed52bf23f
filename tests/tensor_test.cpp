// Reading constants of every numeric type however a TensorProto stores them, float16 and bfloat16
// conversion, and Constant nodes and initializers as the graph index sees them.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "fusekit/graph/array.hpp"
#include "fusekit/graph/dtype.hpp"
#include "fusekit/graph/graph.hpp"
#include "fusekit/graph/model_builder.hpp"
#include "fusekit/graph/tensor.hpp"
#include "fusekit/io/error.hpp"
#include "test_support.hpp"

using fusekit::dtype;
using fusekit::build::make_tensor;
using fusekit::build::model_builder;

namespace {

// A type and a value it holds exactly, chosen so that a wrong width or sign would show.
struct typed_value {
  dtype type;
  double value;
};

std::string type_name(const ::testing::TestParamInfo<typed_value>& info) {
  return std::string(fusekit::dtype_name(info.param.type));
}

// The tensor stored the pre-raw_data way: ONNX's typed repeated field for the type.
onnx::TensorProto field_tensor(dtype type, const std::vector<std::int64_t>& dims,
                               const std::vector<double>& values) {
  onnx::TensorProto t;
  t.set_name("t");
  t.set_data_type(static_cast<int>(type));
  for (std::int64_t d : dims) t.add_dims(d);
  for (double v : values) {
    switch (type) {
      case dtype::float32:
        t.add_float_data(float(v));
        break;
      case dtype::float64:
        t.add_double_data(v);
        break;
      case dtype::float16:
        t.add_int32_data(fusekit::float_to_half(float(v)));
        break;
      case dtype::bfloat16:
        t.add_int32_data(fusekit::float_to_bfloat16(float(v)));
        break;
      case dtype::int64:
        t.add_int64_data(std::int64_t(v));
        break;
      case dtype::uint32:
      case dtype::uint64:
        t.add_uint64_data(std::uint64_t(v));
        break;
      default:  // 8, 16 and 32-bit integers and bool
        t.add_int32_data(std::int32_t(v));
        break;
    }
  }
  return t;
}

std::vector<double> doubles(const onnx::TensorProto& t) {
  const fusekit::tensor_values values(t);
  std::vector<double> out;
  for (std::int64_t i = 0; i < values.size(); ++i) out.push_back(values.as_double(i));
  return out;
}

using fusekit::testing::error_of;

float bits_to_float(std::uint32_t bits) { return std::bit_cast<float>(bits); }

// The shapes of a one-element tensor: 0-d, [1] and [1, 1].
const std::vector<std::vector<std::int64_t>> scalar_shapes = {{}, {1}, {1, 1}};

// A builder's model, kept alive beside its index.
class built_graph {
 public:
  explicit built_graph(const model_builder& b) : model_(b.build()), graph_(model_) {}
  fusekit::value_id value(const std::string& name) const { return *graph_.find_value(name); }
  const fusekit::graph* operator->() const { return &graph_; }

 private:
  onnx::ModelProto model_;
  fusekit::graph graph_;
};

// ---- every numeric type, from raw_data and from the typed fields

class NumericType : public ::testing::TestWithParam<typed_value> {};

INSTANTIATE_TEST_SUITE_P(
    AllTypes, NumericType,
    ::testing::Values(typed_value{dtype::float32, -1.5}, typed_value{dtype::float64, 0.1},
                      typed_value{dtype::float16, -0.333251953125},
                      typed_value{dtype::bfloat16, 3.140625}, typed_value{dtype::int8, -100},
                      typed_value{dtype::uint8, 200}, typed_value{dtype::int16, -30000},
                      typed_value{dtype::uint16, 60000}, typed_value{dtype::int32, -2000000000},
                      typed_value{dtype::uint32, 4000000000.0},
                      typed_value{dtype::int64, -1099511627776.0},        // -2^40
                      typed_value{dtype::uint64, 9223372036854775808.0},  // 2^63
                      typed_value{dtype::boolean, 1}),
    type_name);

TEST_P(NumericType, RawDataElements) {
  const auto [type, v] = GetParam();
  const onnx::TensorProto t = make_tensor("t", type, {3}, {0, v, 1});
  const fusekit::tensor_values values(t);
  EXPECT_TRUE(values.is_numeric());
  EXPECT_EQ(values.type(), type);
  EXPECT_EQ(doubles(t), (std::vector<double>{0, v, 1}));
}

TEST_P(NumericType, TypedFieldElements) {
  const auto [type, v] = GetParam();
  EXPECT_EQ(doubles(field_tensor(type, {3}, {0, v, 1})), (std::vector<double>{0, v, 1}));
}

TEST_P(NumericType, RawDataScalars) {
  const auto [type, v] = GetParam();
  for (const auto& dims : scalar_shapes)
    EXPECT_EQ(fusekit::scalar_value(make_tensor("t", type, dims, {v})), v) << dims.size() << "-d";
}

TEST_P(NumericType, TypedFieldScalars) {
  const auto [type, v] = GetParam();
  for (const auto& dims : scalar_shapes)
    EXPECT_EQ(fusekit::scalar_value(field_tensor(type, dims, {v})), v) << dims.size() << "-d";
}

TEST_P(NumericType, TwoElementsAreNotAScalar) {
  // Near miss: the right type, one element too many.
  const auto [type, v] = GetParam();
  EXPECT_EQ(fusekit::scalar_value(make_tensor("t", type, {2}, {v, v})), std::nullopt);
  EXPECT_EQ(fusekit::scalar_value(field_tensor(type, {1, 2}, {v, v})), std::nullopt);
}

TEST(TensorValues, IntegersReadAsInt64) {
  EXPECT_EQ(fusekit::tensor_values(make_tensor("t", dtype::int8, {}, {-100})).as_int64(0), -100);
  EXPECT_EQ(fusekit::tensor_values(field_tensor(dtype::uint16, {}, {60000})).as_int64(0), 60000);
  EXPECT_EQ(
      fusekit::tensor_values(make_tensor("t", dtype::int64, {}, {-1099511627776.0})).as_int64(0),
      -1099511627776);
}

TEST(TensorValues, StringTensorIsNotNumeric) {
  // One element, but text: "7" is not the number 7.
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto_DataType_STRING);
  t.add_string_data("7");
  EXPECT_FALSE(fusekit::tensor_values(t).is_numeric());
  EXPECT_EQ(fusekit::scalar_value(t), std::nullopt);
}

TEST(TensorValues, Float8IsNotNumeric) {
  // Near miss: one byte per element like int8, but as_double cannot decode float8.
  onnx::TensorProto t;
  t.set_data_type(static_cast<int>(dtype::float8e4m3fn));
  t.set_raw_data(std::string(1, '\x38'));
  EXPECT_FALSE(fusekit::tensor_values(t).is_numeric());
  EXPECT_EQ(fusekit::scalar_value(t), std::nullopt);
}

// Packed integers, as the proto stores them: the first element in the low bits of the byte (or the
// int32_data entry), the last byte padded.
onnx::TensorProto packed_tensor(dtype type, std::int64_t count, const std::string& raw) {
  onnx::TensorProto t;
  t.set_name("w");
  t.set_data_type(static_cast<int>(type));
  t.add_dims(count);
  t.set_raw_data(raw);
  return t;
}

TEST(TensorValues, PackedIntegersAreReadLowBitsFirst) {
  // 0x78 0x0F: the nibbles 8, 7, F and a padding 0.
  const std::string raw("\x78\x0f", 2);
  const onnx::TensorProto int4 = packed_tensor(dtype::int4, 3, raw);
  const fusekit::tensor_values signed_values(int4);
  EXPECT_TRUE(signed_values.is_numeric());
  EXPECT_EQ(signed_values.as_int64(0), -8);
  EXPECT_EQ(signed_values.as_int64(1), 7);
  EXPECT_EQ(signed_values.as_int64(2), -1);
  const onnx::TensorProto uint4 = packed_tensor(dtype::uint4, 3, raw);
  EXPECT_EQ(fusekit::tensor_values(uint4).as_int64(0), 8);
  EXPECT_EQ(fusekit::tensor_values(uint4).as_double(2), 15.0);
  // Four 2-bit elements a byte: 0b11'10'01'00.
  const onnx::TensorProto int2 = packed_tensor(dtype::int2, 4, std::string(1, '\xe4'));
  EXPECT_EQ(fusekit::tensor_values(int2).as_int64(2), -2);
  EXPECT_EQ(fusekit::tensor_values(int2).as_int64(3), -1);
  const onnx::TensorProto uint2 = packed_tensor(dtype::uint2, 4, std::string(1, '\xe4'));
  EXPECT_EQ(fusekit::tensor_values(uint2).as_int64(3), 3);
  // The same int4 in int32_data: two elements an entry.
  onnx::TensorProto fields = int4;
  fields.clear_raw_data();
  fields.add_int32_data(0x78);
  fields.add_int32_data(0x0f);
  EXPECT_EQ(fusekit::tensor_values(fields).as_int64(0), -8);
  EXPECT_EQ(fusekit::tensor_values(fields).as_int64(2), -1);
}

TEST(TensorValues, PackedDataOfAnotherLengthIsRefused) {
  // Near miss: three int4 take two bytes; three bytes are the data of five or six.
  const onnx::TensorProto long_raw = packed_tensor(dtype::int4, 3, std::string(3, '\0'));
  EXPECT_EQ(error_of([&] { fusekit::tensor_values{long_raw}; }),
            "initializer 'w': shape holds 3 elements of int4, packed in 2 bytes, but its data has "
            "3");
  // Near miss: int32_data holds two int4 an entry, so three elements need two entries, not three.
  onnx::TensorProto fields = packed_tensor(dtype::int4, 3, "");
  fields.clear_raw_data();
  for (int i = 0; i < 3; ++i) fields.add_int32_data(0);
  EXPECT_EQ(error_of([&] { fusekit::tensor_values{fields}; }),
            "initializer 'w': shape holds 3 elements of int4, packed in 2 int32_data entries, but "
            "its data has 3");
  // Near miss: a float6 is 6 bits, so four take three bytes.
  const onnx::TensorProto float6 = packed_tensor(dtype::float6e2m3, 4, std::string(4, '\0'));
  EXPECT_EQ(
      error_of([&] { fusekit::tensor_values{float6}; }),
      "initializer 'w': shape holds 4 elements of float6e2m3, packed in 3 bytes, but its data "
      "has 4");
  EXPECT_FALSE(fusekit::tensor_values(packed_tensor(dtype::float6e2m3, 4, std::string(3, '\0')))
                   .is_numeric());
}

TEST(TensorValues, ComplexHoldsTwoNumbersPerElement) {
  // A valid complex128 scalar in double_data: two doubles, one element, and not a number to read.
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto_DataType_COMPLEX128);
  t.add_double_data(1.0);
  t.add_double_data(-2.0);
  EXPECT_EQ(fusekit::tensor_values(t).size(), 1);
  EXPECT_FALSE(fusekit::tensor_values(t).is_numeric());
  // Its data is not read to find a scalar, so even an empty one is no error there (a fuzzed
  // model the ONNX checker passes).
  t.clear_double_data();
  EXPECT_EQ(fusekit::scalar_value(t), std::nullopt);
}

TEST(TensorValues, ElementCountsInt64CannotHoldAreRefused) {
  // Dims whose product overflows int64: no count, and reading says why.
  onnx::TensorProto t;
  t.set_name("w");
  t.set_data_type(onnx::TensorProto_DataType_FLOAT);
  t.add_dims(std::int64_t(1) << 40);
  t.add_dims(std::int64_t(1) << 40);
  EXPECT_EQ(fusekit::element_count(t), -1);
  EXPECT_EQ(error_of([&] { fusekit::tensor_values{t}; }),
            "initializer 'w': has a negative dimension or more elements than int64 holds");
}

TEST(TensorValues, RawDataCountMustMatchShape) {
  // Shape [3], 8 bytes of float32: reading element 2 would run past the data.
  const onnx::TensorProto t = make_tensor("w", dtype::float32, {3}, {1, 2});
  EXPECT_EQ(error_of([&] { fusekit::tensor_values{t}; }),
            "initializer 'w': shape holds 3 elements but its data holds 2 of float32");
}

TEST(TensorValues, TypedFieldCountMustMatchShape) {
  // Shape [2, 2], three int64_data entries.
  onnx::TensorProto t = field_tensor(dtype::int64, {2, 2}, {1, 2, 3});
  t.set_name("w");
  EXPECT_EQ(error_of([&] { fusekit::tensor_values{t}; }),
            "initializer 'w': shape holds 4 elements but its data holds 3 of int64");
}

TEST(TensorValues, ScalarShapeWithTwoValuesThrows) {
  // Near miss: the shape says scalar, so scalar_value reads it and finds the data wrong.
  onnx::TensorProto t = field_tensor(dtype::float32, {1}, {1, 2});
  t.set_name("w");
  EXPECT_EQ(error_of([&] { fusekit::scalar_value(t); }),
            "initializer 'w': shape holds 1 elements but its data holds 2 of float32");
}

// ---- float16

TEST(Float16, NormalValuesRoundTrip) {
  EXPECT_EQ(fusekit::float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(fusekit::float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(fusekit::float_to_half(0.333251953125f), 0x3555);
  EXPECT_EQ(fusekit::half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(fusekit::half_to_float(0xc000), -2.0f);
  EXPECT_EQ(fusekit::half_to_float(0x3555), 0.333251953125f);
}

TEST(Float16, SignedZero) {
  EXPECT_EQ(fusekit::float_to_half(-0.0f), 0x8000);
  EXPECT_TRUE(std::signbit(fusekit::half_to_float(0x8000)));
}

TEST(Float16, Subnormals) {
  const float smallest = std::ldexp(1.0f, -24);
  EXPECT_EQ(fusekit::float_to_half(smallest), 0x0001);
  EXPECT_EQ(fusekit::half_to_float(0x0001), smallest);
  EXPECT_EQ(fusekit::float_to_half(1023 * smallest), 0x03ff);
  EXPECT_EQ(fusekit::half_to_float(0x03ff), 1023 * smallest);
  EXPECT_EQ(fusekit::half_to_float(0x8001), -smallest);
}

TEST(Float16, SubnormalRoundingTiesToEven) {
  const float half_ulp = std::ldexp(1.0f, -25);
  EXPECT_EQ(fusekit::float_to_half(half_ulp), 0x0000);      // 0.5 ulp: to even 0
  EXPECT_EQ(fusekit::float_to_half(3 * half_ulp), 0x0002);  // 1.5 ulp: to even 2
  EXPECT_EQ(fusekit::float_to_half(std::nextafter(half_ulp, 1.0f)), 0x0001);
}

TEST(Float16, LargestSubnormalRoundsUpToSmallestNormal) {
  const float just_below_normal = std::nextafter(std::ldexp(1.0f, -14), 0.0f);
  EXPECT_EQ(fusekit::float_to_half(just_below_normal), 0x0400);
}

TEST(Float16, RoundingTiesToEven) {
  const float ulp = std::ldexp(1.0f, -10);                     // spacing of halfs in [1, 2)
  EXPECT_EQ(fusekit::float_to_half(1 + ulp / 2), 0x3c00);      // tie: down to even 1.0
  EXPECT_EQ(fusekit::float_to_half(1 + 3 * ulp / 2), 0x3c02);  // tie: up to even 1 + 2 ulp
  EXPECT_EQ(fusekit::float_to_half(std::nextafter(1 + ulp / 2, 2.0f)), 0x3c01);
}

TEST(Float16, Max) {
  EXPECT_EQ(fusekit::float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(fusekit::half_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(fusekit::float_to_half(65519.0f), 0x7bff);  // below the midpoint to 65536
}

TEST(Float16, OverflowIsInfinity) {
  EXPECT_EQ(fusekit::float_to_half(65520.0f), 0x7c00);  // the midpoint ties to even: infinity
  EXPECT_EQ(fusekit::float_to_half(1e6f), 0x7c00);
  EXPECT_EQ(fusekit::float_to_half(-1e6f), 0xfc00);
  EXPECT_EQ(fusekit::float_to_half(std::numeric_limits<float>::max()), 0x7c00);
}

TEST(Float16, Infinity) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(fusekit::float_to_half(inf), 0x7c00);
  EXPECT_EQ(fusekit::float_to_half(-inf), 0xfc00);
  EXPECT_EQ(fusekit::half_to_float(0x7c00), inf);
  EXPECT_EQ(fusekit::half_to_float(0xfc00), -inf);
}

TEST(Float16, NaN) {
  const std::uint16_t h = fusekit::float_to_half(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(h & 0x7c00, 0x7c00);
  EXPECT_NE(h & 0x03ff, 0);
  EXPECT_TRUE(std::isnan(fusekit::half_to_float(0x7e00)));
  EXPECT_TRUE(std::isnan(fusekit::half_to_float(0x7c01)));
  // A NaN whose payload lives only in the low float bits must not become infinity.
  EXPECT_NE(fusekit::float_to_half(bits_to_float(0x7f800001)) & 0x03ff, 0);
}

TEST(Float16, EveryHalfRoundTripsThroughFloat) {
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0;
    if (nan) continue;
    ASSERT_EQ(fusekit::float_to_half(fusekit::half_to_float(std::uint16_t(h))), h) << std::hex << h;
  }
}

// ---- bfloat16

TEST(BFloat16, RoundTripAndRounding) {
  EXPECT_EQ(fusekit::float_to_bfloat16(1.0f), 0x3f80);
  EXPECT_EQ(fusekit::bfloat16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(fusekit::float_to_bfloat16(bits_to_float(0x3f808000)), 0x3f80);  // tie: to even
  EXPECT_EQ(fusekit::float_to_bfloat16(bits_to_float(0x3f818000)), 0x3f82);  // tie: to even
  EXPECT_EQ(fusekit::float_to_bfloat16(bits_to_float(0x3f808001)), 0x3f81);
}

TEST(BFloat16, InfinityAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(fusekit::float_to_bfloat16(inf), 0x7f80);
  EXPECT_EQ(fusekit::bfloat16_to_float(0xff80), -inf);
  // The payload sits in the low 16 bits: truncating would make it infinity.
  EXPECT_TRUE(std::isnan(
      fusekit::bfloat16_to_float(fusekit::float_to_bfloat16(bits_to_float(0x7f800001)))));
}

// ---- constants in a graph

TEST(GraphConstants, ConstantNodeValue) {
  model_builder b;
  auto c = b.constant(dtype::float16, {2}, {1.5, -2});
  auto s = b.constant_scalar(dtype::int32, 7);
  b.output(b.op("Add", {c, b.op("Cast", {s}, {{"to", dtype::float16}})}));
  const built_graph g(b);
  ASSERT_NE(g->constant_tensor(g.value(c.name)), nullptr);
  EXPECT_EQ(doubles(*g->constant_tensor(g.value(c.name))), (std::vector<double>{1.5, -2}));
  EXPECT_EQ(g->constant_scalar(g.value(c.name)), std::nullopt);
  EXPECT_EQ(g->constant_scalar(g.value(s.name)), 7);
  EXPECT_EQ(g->type(g.value(s.name)), dtype::int32);
}

TEST(GraphConstants, ConstantNodeValueFloat) {
  model_builder b;
  auto c = b.op("Constant", {}, {{"value_float", 2.5}});
  b.output(c);
  const built_graph g(b);
  EXPECT_EQ(g->constant_scalar(g.value(c.name)), 2.5);
  EXPECT_EQ(g->type(g.value(c.name)), dtype::float32);
  EXPECT_EQ(g->shape(g.value(c.name)).rank(), 0u);
}

TEST(GraphConstants, ConstantNodeValueInt) {
  model_builder b;
  auto c = b.op("Constant", {}, {{"value_int", -3}});
  b.output(c);
  const built_graph g(b);
  EXPECT_EQ(g->constant_scalar(g.value(c.name)), -3);
  EXPECT_EQ(g->type(g.value(c.name)), dtype::int64);
}

TEST(GraphConstants, ConstantNodeValueFloats) {
  model_builder b;
  auto one = b.op("Constant", {}, {{"value_floats", std::vector<double>{0.25}}});
  auto two = b.op("Constant", {}, {{"value_floats", std::vector<double>{0.25, 4}}});
  b.output(b.op("Add", {one, two}));
  const built_graph g(b);
  EXPECT_EQ(g->constant_scalar(g.value(one.name)), 0.25);  // shape [1]
  EXPECT_EQ(g->constant_scalar(g.value(two.name)), std::nullopt);
  EXPECT_EQ(doubles(*g->constant_tensor(g.value(two.name))), (std::vector<double>{0.25, 4}));
}

TEST(GraphConstants, ConstantNodeValueInts) {
  model_builder b;
  auto one = b.op("Constant", {}, {{"value_ints", std::vector<std::int64_t>{9}}});
  auto two = b.op("Constant", {}, {{"value_ints", std::vector<std::int64_t>{4, -5}}});
  b.output(b.op("Add", {one, two}));
  const built_graph g(b);
  EXPECT_EQ(g->constant_scalar(g.value(one.name)), 9);  // shape [1]
  EXPECT_EQ(g->constant_scalar(g.value(two.name)), std::nullopt);
  EXPECT_EQ(doubles(*g->constant_tensor(g.value(two.name))), (std::vector<double>{4, -5}));
  EXPECT_EQ(g->type(g.value(two.name)), dtype::int64);
}

TEST(GraphConstants, InitializerIsConstant) {
  model_builder b;
  auto x = b.input("x", dtype::float32, {1});
  auto w = b.initializer("w", dtype::float32, {1, 1}, {0.5});
  b.output(b.op("Mul", {x, w}));
  const built_graph g(b);
  EXPECT_TRUE(g->is_constant(g.value("w")));
  EXPECT_EQ(g->constant_scalar(g.value("w")), 0.5);
}

TEST(GraphConstants, InitializerThatIsAGraphInputIsNotConstant) {
  // From IR 4 on, a graph input with an initializer is a default the caller may override.
  model_builder b;
  auto x = b.input("x", dtype::float32, {1});
  auto w = b.input("w", dtype::float32, {1});
  b.initializer("w", dtype::float32, {1}, {0.5});
  b.output(b.op("Mul", {x, w}));
  const built_graph g(b);
  EXPECT_FALSE(g->is_constant(g.value("w")));
  EXPECT_EQ(g->constant_tensor(g.value("w")), nullptr);
  EXPECT_EQ(g->constant_scalar(g.value("w")), std::nullopt);
}

TEST(GraphConstants, InitializerThatIsAGraphInputIsConstantInIr3) {
  // Near miss: IR 3 listed every initializer as an input, so there it says nothing.
  model_builder b;
  b.ir_version(3);
  auto x = b.input("x", dtype::float32, {1});
  auto w = b.input("w", dtype::float32, {1});
  b.initializer("w", dtype::float32, {1}, {0.5});
  b.output(b.op("Mul", {x, w}));
  const built_graph g(b);
  EXPECT_TRUE(g->is_constant(g.value("w")));
  EXPECT_EQ(g->constant_scalar(g.value("w")), 0.5);
}

}  // namespace

// ---- fusekit::array: a fold's arithmetic, as numpy computes it in the array's type

TEST(Array, BroadcastsAsNumpyDoes) {
  const fusekit::array w(dtype::float32, {2, 3}, {1, 2, 3, 4, 5, 6});
  const fusekit::array column(dtype::float32, {2, 1}, {10, 20});
  const fusekit::array sum = w + column;
  EXPECT_EQ(sum.dims(), (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(sum.values(), (std::vector<double>{11, 12, 13, 24, 25, 26}));
  // A per-channel vector laid along axis 0 of the weight, numpy's reshape(-1, 1).
  const fusekit::array scaled = w * fusekit::array(dtype::float32, {2}, {2, 3}).along(0, 2);
  EXPECT_EQ(scaled.values(), (std::vector<double>{2, 4, 6, 12, 15, 18}));
  EXPECT_EQ((1.0 - w).values()[0], 0);
}

TEST(Array, RoundsEachResultToItsType) {
  // 1/3 in float16 is 0.333251953125, as numpy's float16 division gives.
  const fusekit::array third = 1.0 / fusekit::array::scalar(dtype::float16, 3);
  EXPECT_EQ(third[0], 0.333251953125);
  EXPECT_EQ(third.to_tensor("t").data_type(), int(dtype::float16));
  // Integers divide toward zero and wrap to their width.
  EXPECT_EQ((fusekit::array::scalar(dtype::int32, -7) / 2.0)[0], -3);
  EXPECT_EQ((fusekit::array::scalar(dtype::int8, 100) * 2.0)[0], -56);
}

TEST(Array, RefusesWhatNumpyWouldNotBroadcastAndMixedTypes) {
  const fusekit::array a(dtype::float32, {3}, {1, 2, 3});
  using fusekit::testing::error_of;
  EXPECT_EQ(error_of([&] {
              return a + fusekit::array(dtype::float32, {2}, {1, 2});
            }),
            "array +: float32 [3] and float32 [2] do not broadcast");
  EXPECT_EQ(error_of([&] {
              return a * fusekit::array(dtype::float16, {3}, {1, 2, 3});
            }),
            "array *: float32 [3] and float16 [3] are of different types: convert one with as()");
}

TEST(Array, SelectsAndLaysOutAsOnnxsOpsDo) {
  const fusekit::array w(dtype::float32, {2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(w.transpose({1, 0}).values(), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  // Columns 2, 1, 0: a Slice from the end with step −1.
  EXPECT_EQ(w.strided({0, 2}, {1, -1}, {2, 3}).values(), (std::vector<double>{3, 2, 1, 6, 5, 4}));
  EXPECT_EQ(fusekit::array::concat({w, w.strided({0, 0}, {1, 1}, {2, 1})}, 1).values(),
            (std::vector<double>{1, 2, 3, 1, 4, 5, 6, 4}));
  // Gather along axis 1, index −1 the last.
  const fusekit::array last = w.take(fusekit::array(dtype::int64, {2}, {-1, 0}), 1);
  EXPECT_EQ(last.dims(), (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(last.values(), (std::vector<double>{3, 1, 6, 4}));
  // Row 1 replaced, as ScatterND with indices [[1]].
  EXPECT_EQ(w.scatter_nd(fusekit::array(dtype::int64, {1, 1}, {1}),
                         fusekit::array(dtype::float32, {1, 3}, {0, 0, 0}))
                .values(),
            (std::vector<double>{1, 2, 3, 0, 0, 0}));
  const fusekit::array odd = fusekit::array::zip(
      w, fusekit::array::scalar(dtype::float32, 3), dtype::boolean,
      [](double a, double b) { return double(a > b); }, "Greater");
  EXPECT_EQ(odd.type(), dtype::boolean);
  EXPECT_EQ(fusekit::array::where(odd, w, fusekit::array::scalar(dtype::float32, -1)).values(),
            (std::vector<double>{-1, -1, -1, 4, 5, 6}));
  EXPECT_EQ(fusekit::array::scalar(dtype::float32, 7).broadcast_to({2, 2}).values(),
            (std::vector<double>{7, 7, 7, 7}));
  using fusekit::testing::error_of;
  EXPECT_EQ(error_of([&] { return w.take(fusekit::array(dtype::int64, {1}, {3}), 1); }),
            "array take: index 3 out of an axis of 3");
  EXPECT_EQ(error_of([&] {
              return w.broadcast_to({3, 3});
            }),
            "array float32 [2, 3] does not broadcast to [3, 3]");
}
