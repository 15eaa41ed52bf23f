// Reading the elements of a TensorProto whatever way it stores them: raw_data (little-endian),
// the typed repeated fields (float16/bfloat16 bits live in int32_data), or an external file; the
// 2- and 4-bit integers packed from the low bits up, as many to a byte (or an int32_data entry) as
// fit.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "fusekit/engine.hpp"
#include "fusekit/graph/dtype.hpp"
#include "fusekit/io/external_data.hpp"

namespace fusekit {

// -1 for a negative dim or a count int64 cannot hold.
inline std::int64_t element_count(const onnx::TensorProto& t) {
  std::int64_t n = 1;
  for (std::int64_t d : t.dims())
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  return n;
}

// The types tensor_values decodes as numbers; the 8-, 6- and 4-bit floats and complex are not
// among them.
inline bool reads_as_numbers(dtype t) {
  return is_float(t) || t == dtype::boolean || (t >= dtype::uint8 && t <= dtype::int64) ||
         t == dtype::uint32 || t == dtype::uint64 || is_packed_integer(t);
}

// The bytes raw_data takes for `n` elements of `t`, the last one padded; -1 for string or when the
// count overflows.
inline std::int64_t raw_bytes(dtype t, std::int64_t n) {
  const std::int64_t bits = static_cast<std::int64_t>(dtype_bits(t));
  std::int64_t total = 0;
  if (bits == 0 || __builtin_mul_overflow(n, bits, &total)) return -1;
  return total / 8 + (total % 8 != 0);
}

class tensor_values {
 public:
  // Throws fusekit::error when the data does not hold element_count() elements of the type.
  // raw_ may point into external_: a copy would point into the original.
  tensor_values(const tensor_values&) = delete;
  tensor_values& operator=(const tensor_values&) = delete;

  explicit tensor_values(const onnx::TensorProto& t, const std::filesystem::path& base_dir = {})
      : tensor_(&t), type_(static_cast<dtype>(t.data_type())), size_(element_count(t)) {
    if (is_external(t)) {
      external_ = read_external_data(t, base_dir);
      raw_ = external_;
    } else if (t.has_raw_data()) {
      raw_ = t.raw_data();
    }
    check_size();
  }

  dtype type() const { return type_; }
  std::int64_t size() const { return size_; }
  bool is_numeric() const { return reads_as_numbers(type_); }

  double as_double(std::int64_t i) const {
    const std::size_t k = static_cast<std::size_t>(i);
    switch (type_) {
      case dtype::float32:
        return typed<float>(k, [&] { return tensor_->float_data(i); });
      case dtype::float64:
        return typed<double>(k, [&] { return tensor_->double_data(i); });
      case dtype::float16:
        return half_to_float(bits16(k));
      case dtype::bfloat16:
        return bfloat16_to_float(bits16(k));
      case dtype::uint32:
        return typed<std::uint32_t>(k, [&] { return std::uint32_t(tensor_->uint64_data(i)); });
      case dtype::uint64:
        return double(as_uint64(k));
      default:
        return double(as_int64(i));
    }
  }

  std::int64_t as_int64(std::int64_t i) const {
    const std::size_t k = static_cast<std::size_t>(i);
    auto int32_field = [&] { return tensor_->int32_data(i); };
    switch (type_) {
      case dtype::int64:
        return typed<std::int64_t>(k, [&] { return tensor_->int64_data(i); });
      case dtype::int32:
        return typed<std::int32_t>(k, int32_field);
      case dtype::int16:
        return typed<std::int16_t>(k, int32_field);
      case dtype::int8:
        return typed<std::int8_t>(k, int32_field);
      case dtype::uint16:
        return typed<std::uint16_t>(k, int32_field);
      case dtype::uint8:
      case dtype::boolean:
        return typed<std::uint8_t>(k, int32_field);
      case dtype::uint32:
      case dtype::uint64:
        return static_cast<std::int64_t>(as_uint64(k));
      case dtype::uint4:
      case dtype::int4:
      case dtype::uint2:
      case dtype::int2:
        return packed(k);
      case dtype::float32:
      case dtype::float64:
      case dtype::float16:
      case dtype::bfloat16:
        return static_cast<std::int64_t>(as_double(i));
      default:
        throw tensor_error(*tensor_, "holds " + std::string(dtype_name(type_)) +
                                         ", which fusekit does not read as numbers");
    }
  }

 private:
  template <class T, class Field>
  T typed(std::size_t i, Field field) const {
    if (raw_.empty()) return static_cast<T>(field());
    T v;
    std::memcpy(&v, raw_.data() + i * sizeof(T), sizeof(T));
    return v;
  }

  // Element i of a packed integer type: its bits of the byte (raw_data) or of the int32_data entry
  // that holds it, sign-extended for int4 and int2.
  std::int64_t packed(std::size_t i) const {
    const std::size_t bits = dtype_bits(type_);
    const std::size_t per_byte = 8 / bits;
    const std::uint32_t holder = raw_.empty()
                                     ? std::uint32_t(tensor_->int32_data(int(i / per_byte)))
                                     : std::uint8_t(raw_[i / per_byte]);
    const std::uint32_t field = (holder >> (i % per_byte * bits)) & ((1u << bits) - 1);
    const bool is_signed = type_ == dtype::int4 || type_ == dtype::int2;
    if (is_signed && (field >> (bits - 1)) != 0)
      return std::int64_t(field) - (std::int64_t(1) << bits);
    return field;
  }

  std::uint16_t bits16(std::size_t i) const {
    return typed<std::uint16_t>(i, [&] { return std::uint16_t(tensor_->int32_data(int(i))); });
  }

  std::uint64_t as_uint64(std::size_t i) const {
    if (type_ == dtype::uint32)
      return typed<std::uint32_t>(i, [&] { return std::uint32_t(tensor_->uint64_data(int(i))); });
    return typed<std::uint64_t>(i, [&] { return tensor_->uint64_data(int(i)); });
  }

  std::int64_t stored_count() const {
    if (!raw_.empty() || tensor_->has_raw_data() || is_external(*tensor_)) {
      const std::size_t width = dtype_size(type_);
      return width == 0 ? -1 : static_cast<std::int64_t>(raw_.size() / width);
    }
    switch (type_) {
      case dtype::float32:
        return tensor_->float_data_size();
      case dtype::float64:
        return tensor_->double_data_size();
      // Two numbers per element; an odd count is left to whoever reads complex data (fusekit
      // does not).
      case dtype::complex64:
        return tensor_->float_data_size() % 2 ? -1 : tensor_->float_data_size() / 2;
      case dtype::complex128:
        return tensor_->double_data_size() % 2 ? -1 : tensor_->double_data_size() / 2;
      case dtype::int64:
        return tensor_->int64_data_size();
      case dtype::uint32:
      case dtype::uint64:
        return tensor_->uint64_data_size();
      case dtype::string:
        return tensor_->string_data_size();
      default:
        return tensor_->int32_data_size();
    }
  }

  void check_size() const;

  // Types narrower than a byte: raw_data holds them packed, int32_data as many an entry as fit in a
  // byte (one float6 an entry).
  void check_packed_size() const;

  const onnx::TensorProto* tensor_;
  dtype type_;
  std::int64_t size_;
  std::string external_;
  std::string_view raw_;
};

#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE void tensor_values::check_packed_size() const {
  const bool raw = !raw_.empty() || tensor_->has_raw_data() || is_external(*tensor_);
  const std::int64_t bits = static_cast<std::int64_t>(dtype_bits(type_));
  const std::int64_t per_entry = bits == 6 ? 1 : 8 / bits;
  const std::int64_t needed =
      raw ? raw_bytes(type_, size_) : size_ / per_entry + (size_ % per_entry != 0);
  const std::int64_t stored =
      raw ? static_cast<std::int64_t>(raw_.size()) : tensor_->int32_data_size();
  if (needed != stored)
    throw tensor_error(*tensor_, "shape holds " + std::to_string(size_) + " elements of " +
                                     std::string(dtype_name(type_)) + ", packed in " +
                                     std::to_string(needed) +
                                     (raw ? " bytes" : " int32_data entries") +
                                     ", but its data has " + std::to_string(stored));
}

FUSEKIT_ENGINE_INLINE void tensor_values::check_size() const {
  if (size_ < 0)
    throw tensor_error(*tensor_, "has a negative dimension or more elements than int64 holds");
  if (dtype_size(type_) == 0 && dtype_bits(type_) != 0) return check_packed_size();
  const std::int64_t stored = stored_count();
  if (stored >= 0 && stored != size_)
    throw tensor_error(*tensor_, "shape holds " + std::to_string(size_) +
                                     " elements but its data holds " + std::to_string(stored) +
                                     " of " + std::string(dtype_name(type_)));
}
#endif

// The value of a one-element numeric tensor (0-d, [1], [1,1] …); nullopt for anything else.
inline std::optional<double> scalar_value(const onnx::TensorProto& t,
                                          const std::filesystem::path& base_dir = {}) {
  if (element_count(t) != 1 || !reads_as_numbers(static_cast<dtype>(t.data_type())))
    return std::nullopt;
  return tensor_values(t, base_dir).as_double(0);
}

}  // namespace fusekit
