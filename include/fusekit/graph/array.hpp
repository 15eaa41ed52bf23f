// Typed tensors for a rule's folds: the elements of a constant, element-wise arithmetic with
// numpy's broadcasting, and a result written back in the source's element type. A fold reads as
// its formula (`w * (gamma / (var + eps).sqrt()).along(0, w.rank())`) instead of TensorProto code.
//
// Elements are held as double, and each operation rounds its result to the array's type as numpy
// does in that type: float32, float16 and bfloat16 to nearest even (one double operation then one
// rounding is the correctly rounded result for + − × ÷ and √), integers truncated toward zero and
// wrapped to their width, bool to 0 or 1. Integers beyond 2^53 are not exact: fold them elsewhere.
#pragma once

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "fusekit/graph/dtype.hpp"
#include "fusekit/graph/graph.hpp"
#include "fusekit/graph/model_builder.hpp"
#include "fusekit/graph/tensor.hpp"
#include "fusekit/io/error.hpp"

namespace fusekit {

class array {
 public:
  // `values` row-major, as many as `dims` holds; each is rounded to `type`.
  array(dtype type, std::vector<std::int64_t> dims, std::vector<double> values)
      : type_(type), dims_(std::move(dims)), values_(std::move(values)) {
    if (std::int64_t(values_.size()) != count(dims_))
      throw error("array of " + std::string(dtype_name(type_)) + " " + shape_text(dims_) +
                  " given " + std::to_string(values_.size()) + " values");
    for (double& v : values_) v = round(v);
  }
  // A 0-d array: a number to combine with others of `type`.
  static array scalar(dtype type, double v) { return array(type, {}, {v}); }
  // `n` zeros of `type`, a vector: a bias a node leaves out, for instance.
  static array zeros(dtype type, std::int64_t n) {
    return array(type, {n}, std::vector<double>(std::size_t(n), 0.0));
  }

  // The elements of a constant tensor (a `constant<"w">` capture), read however they are stored;
  // throws fusekit::error naming the tensor when its data does not hold them as numbers.
  array(const graph& g, const onnx::TensorProto* t) : type_(dtype(t->data_type())) {
    const tensor_values read(*t, g.directory());
    if (!read.is_numeric())
      throw tensor_error(*t, "holds " + std::string(dtype_name(type_)) + ", not numbers");
    dims_.assign(t->dims().begin(), t->dims().end());
    values_.reserve(std::size_t(read.size()));
    for (std::int64_t i = 0; i < read.size(); ++i) values_.push_back(read.as_double(i));
  }

  dtype type() const { return type_; }
  const std::vector<std::int64_t>& dims() const { return dims_; }
  std::size_t rank() const { return dims_.size(); }
  std::int64_t size() const { return std::int64_t(values_.size()); }
  double operator[](std::int64_t i) const { return values_[std::size_t(i)]; }
  const std::vector<double>& values() const { return values_; }

  // The same elements in other dims; one of them may be -1, the count left over.
  array reshape(std::vector<std::int64_t> dims) const {
    std::int64_t known = 1, unknown = -1;
    for (std::size_t i = 0; i < dims.size(); ++i)
      if (dims[i] == -1)
        unknown = std::int64_t(i);
      else
        known *= dims[i];
    if (unknown >= 0 && known > 0 && size() % known == 0)
      dims[std::size_t(unknown)] = size() / known;
    return array(type_, std::move(dims), values_);
  }
  // A vector laid along `axis` of a rank-`rank` shape, ones elsewhere: a per-channel factor
  // broadcast against a weight, as numpy's reshape(-1, 1, 1, 1) for a 4-D one at axis 0.
  array along(std::size_t axis, std::size_t rank) const {
    std::vector<std::int64_t> dims(rank, 1);
    dims.at(axis) = size();
    return reshape(std::move(dims));
  }
  // The same numbers as another type, rounded to it (a Cast).
  array as(dtype type) const { return array(type, dims_, values_); }

  array sqrt() const {
    return map([](double x) { return std::sqrt(x); });
  }
  template <class F>
  array map(F f) const {
    array out = *this;
    for (double& v : out.values_) v = out.round(f(v));
    return out;
  }

  friend array operator+(const array& a, const array& b) { return a.zip(b, std::plus<>{}, "+"); }
  friend array operator-(const array& a, const array& b) { return a.zip(b, std::minus<>{}, "-"); }
  friend array operator*(const array& a, const array& b) {
    return a.zip(b, std::multiplies<>{}, "*");
  }
  // Integers divide as ONNX Runtime's Div does, truncating toward zero.
  friend array operator/(const array& a, const array& b) {
    const bool whole = is_integer(a.type_);
    return a.zip(
        b, [whole](double x, double y) { return whole ? std::trunc(x / y) : x / y; }, "/");
  }
  // A number combines with an array as a 0-d array of its type.
  friend array operator+(const array& a, double b) { return a + scalar(a.type_, b); }
  friend array operator-(const array& a, double b) { return a - scalar(a.type_, b); }
  friend array operator*(const array& a, double b) { return a * scalar(a.type_, b); }
  friend array operator/(const array& a, double b) { return a / scalar(a.type_, b); }
  friend array operator-(double a, const array& b) { return scalar(b.type_, a) - b; }
  friend array operator/(double a, const array& b) { return scalar(b.type_, a) / b; }

  // The initializer holding these elements in this type (float16 and bfloat16 as their bits).
  onnx::TensorProto to_tensor(std::string name) const {
    return build::make_tensor(std::move(name), type_, dims_, values_);
  }

  static std::string shape_text(const std::vector<std::int64_t>& dims) {
    std::string s = "[";
    for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + "]";
  }

 private:
  static std::int64_t count(const std::vector<std::int64_t>& dims) {
    return std::accumulate(dims.begin(), dims.end(), std::int64_t(1), std::multiplies<>{});
  }

  double round(double x) const {
    if (is_float(type_)) return rounded_to(x, type_);
    if (type_ == dtype::boolean) return x != 0.0;
    if (!is_integer(type_) || !std::isfinite(x)) return x;
    const std::size_t bits = dtype_bits(type_);
    // Past what int64 holds a double has no fraction to drop, and converting it is undefined.
    if (bits >= 64 || std::fabs(x) >= 0x1p62) return std::trunc(x);
    const bool is_signed = type_ == dtype::int8 || type_ == dtype::int16 || type_ == dtype::int32;
    const std::int64_t span = std::int64_t(1) << bits;
    std::int64_t v = std::int64_t(std::trunc(x)) % span;
    if (v < 0) v += span;
    if (is_signed && v >= span / 2) v -= span;
    return double(v);
  }

  // numpy's broadcasting: dims aligned from the last, each pair equal or one of them 1.
  template <class F>
  array zip(const array& b, F f, const char* op) const {
    const array& a = *this;
    auto refuse = [&](const std::string& why) {
      return error("array " + std::string(op) + ": " + std::string(dtype_name(a.type_)) + " " +
                   shape_text(a.dims_) + " and " + std::string(dtype_name(b.type_)) + " " +
                   shape_text(b.dims_) + " " + why);
    };
    if (a.type_ != b.type_) throw refuse("are of different types: convert one with as()");
    const std::size_t rank = std::max(a.rank(), b.rank());
    std::vector<std::int64_t> dims(rank);
    for (std::size_t i = 0; i < rank; ++i) {
      const std::int64_t x = dim_from_end(a, rank - 1 - i), y = dim_from_end(b, rank - 1 - i);
      if (x != y && x != 1 && y != 1) throw refuse("do not broadcast");
      dims[i] = x == 1 ? y : x;
    }
    std::vector<double> out(std::size_t(count(dims)));
    std::vector<std::int64_t> at(rank, 0);
    for (double& v : out) {
      v = f(a.values_[std::size_t(a.offset(at))], b.values_[std::size_t(b.offset(at))]);
      for (std::size_t i = rank; i-- > 0;) {  // the next index, row-major
        if (++at[i] < dims[i]) break;
        at[i] = 0;
      }
    }
    return array(a.type_, std::move(dims), std::move(out));
  }

  static std::int64_t dim_from_end(const array& a, std::size_t k) {
    return k < a.rank() ? a.dims_[a.rank() - 1 - k] : 1;
  }
  // Where index `at` of the broadcast shape reads this array: its own dims aligned from the last,
  // a dim of 1 read at 0.
  std::int64_t offset(const std::vector<std::int64_t>& at) const {
    std::int64_t o = 0;
    const std::size_t skip = at.size() - rank();
    for (std::size_t i = 0; i < rank(); ++i) o = o * dims_[i] + (dims_[i] == 1 ? 0 : at[skip + i]);
    return o;
  }

  dtype type_;
  std::vector<std::int64_t> dims_;
  std::vector<double> values_;
};

}  // namespace fusekit
