// Element types of ONNX tensors and the scalar conversions fusekit needs to read them.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace fusekit {

// Values are TensorProto.DataType's, so a proto's data_type converts with a cast: every type of the
// linked onnx release's proto (a test compares the two).
enum class dtype : std::int32_t {
  undefined = 0,
  float32 = 1,
  uint8 = 2,
  int8 = 3,
  uint16 = 4,
  int16 = 5,
  int32 = 6,
  int64 = 7,
  string = 8,
  boolean = 9,
  float16 = 10,
  float64 = 11,
  uint32 = 12,
  uint64 = 13,
  complex64 = 14,
  complex128 = 15,
  bfloat16 = 16,
  float8e4m3fn = 17,
  float8e4m3fnuz = 18,
  float8e5m2 = 19,
  float8e5m2fnuz = 20,
  uint4 = 21,
  int4 = 22,
  float4e2m1 = 23,
  float8e8m0 = 24,
  uint2 = 25,
  int2 = 26,
  float6e2m3 = 27,
  float6e3m2 = 28,
};

constexpr std::string_view dtype_name(dtype t) {
  switch (t) {
    case dtype::undefined:
      return "undefined";
    case dtype::float32:
      return "float32";
    case dtype::uint8:
      return "uint8";
    case dtype::int8:
      return "int8";
    case dtype::uint16:
      return "uint16";
    case dtype::int16:
      return "int16";
    case dtype::int32:
      return "int32";
    case dtype::int64:
      return "int64";
    case dtype::string:
      return "string";
    case dtype::boolean:
      return "bool";
    case dtype::float16:
      return "float16";
    case dtype::float64:
      return "float64";
    case dtype::uint32:
      return "uint32";
    case dtype::uint64:
      return "uint64";
    case dtype::complex64:
      return "complex64";
    case dtype::complex128:
      return "complex128";
    case dtype::bfloat16:
      return "bfloat16";
    case dtype::float8e4m3fn:
      return "float8e4m3fn";
    case dtype::float8e4m3fnuz:
      return "float8e4m3fnuz";
    case dtype::float8e5m2:
      return "float8e5m2";
    case dtype::float8e5m2fnuz:
      return "float8e5m2fnuz";
    case dtype::uint4:
      return "uint4";
    case dtype::int4:
      return "int4";
    case dtype::float4e2m1:
      return "float4e2m1";
    case dtype::float8e8m0:
      return "float8e8m0";
    case dtype::uint2:
      return "uint2";
    case dtype::int2:
      return "int2";
    case dtype::float6e2m3:
      return "float6e2m3";
    case dtype::float6e3m2:
      return "float6e3m2";
  }
  return "unknown";
}

constexpr bool is_float(dtype t) {
  return t == dtype::float32 || t == dtype::float16 || t == dtype::float64 || t == dtype::bfloat16;
}

constexpr bool is_integer(dtype t) {
  return t == dtype::int64 || t == dtype::int32 || t == dtype::int16 || t == dtype::int8 ||
         t == dtype::uint64 || t == dtype::uint32 || t == dtype::uint16 || t == dtype::uint8;
}

// Bytes per element in raw_data; 0 for types that are not byte-addressable (string, 2-, 4- and
// 6-bit types).
constexpr std::size_t dtype_size(dtype t) {
  switch (t) {
    case dtype::uint8:
    case dtype::int8:
    case dtype::boolean:
    case dtype::float8e4m3fn:
    case dtype::float8e4m3fnuz:
    case dtype::float8e5m2:
    case dtype::float8e5m2fnuz:
    case dtype::float8e8m0:
      return 1;
    case dtype::uint16:
    case dtype::int16:
    case dtype::float16:
    case dtype::bfloat16:
      return 2;
    case dtype::float32:
    case dtype::int32:
    case dtype::uint32:
      return 4;
    case dtype::float64:
    case dtype::int64:
    case dtype::uint64:
    case dtype::complex64:
      return 8;
    case dtype::complex128:
      return 16;
    default:
      return 0;
  }
}

// The integer types narrower than a byte, packed in raw_data and int32_data (int4: two a byte).
constexpr bool is_packed_integer(dtype t) {
  return t == dtype::int4 || t == dtype::uint4 || t == dtype::int2 || t == dtype::uint2;
}

// Bits per element in raw_data; 0 for string.
constexpr std::size_t dtype_bits(dtype t) {
  switch (t) {
    case dtype::uint2:
    case dtype::int2:
      return 2;
    case dtype::uint4:
    case dtype::int4:
    case dtype::float4e2m1:
      return 4;
    case dtype::float6e2m3:
    case dtype::float6e3m2:
      return 6;
    case dtype::string:
    case dtype::undefined:
      return 0;
    default:
      return 8 * dtype_size(t);
  }
}

constexpr float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0)
    return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return std::bit_cast<float>(sign);
  // Subnormal half: normalise into a float exponent.
  std::uint32_t e = 113;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --e;
  }
  return std::bit_cast<float>(sign | (e << 23) | ((mantissa & 0x3ffu) << 13));
}

// Round to nearest even, as numpy's astype(float16) does.
constexpr std::uint16_t float_to_half(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds past 65504
  if (abs < 0x38800000u) {                        // below the smallest normal half
    if (abs < 0x33000000u) return sign;           // rounds to zero
    const std::uint32_t e = abs >> 23;
    const std::uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - e;
    std::uint32_t half = m >> shift;
    const std::uint32_t rest = m & ((1u << shift) - 1);
    const std::uint32_t midpoint = 1u << (shift - 1);
    if (rest > midpoint || (rest == midpoint && (half & 1u))) ++half;
    return sign | static_cast<std::uint16_t>(half);
  }
  std::uint32_t half = ((abs >> 13) - (112u << 10));
  const std::uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return sign | static_cast<std::uint16_t>(half);
}

constexpr float bfloat16_to_float(std::uint16_t b) {
  return std::bit_cast<float>(std::uint32_t(b) << 16);
}

constexpr std::uint16_t float_to_bfloat16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  const std::uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>((x + rounding) >> 16);
}

// x as a value of type t: rounded to nearest even into float32, float16 or bfloat16, as a Cast
// or a constant of that type holds it; other types' values as they are.
constexpr double rounded_to(double x, dtype t) {
  switch (t) {
    case dtype::float32:
      return double(float(x));
    case dtype::float16:
      return double(half_to_float(float_to_half(float(x))));
    case dtype::bfloat16:
      return double(bfloat16_to_float(float_to_bfloat16(float(x))));
    default:
      return x;
  }
}

}  // namespace fusekit
