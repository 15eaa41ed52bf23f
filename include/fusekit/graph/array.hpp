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

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <optional>
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

  friend array operator+(const array& a, const array& b) {
    return zip(a, b, a.type_, std::plus<>{}, "+");
  }
  friend array operator-(const array& a, const array& b) {
    return zip(a, b, a.type_, std::minus<>{}, "-");
  }
  friend array operator*(const array& a, const array& b) {
    return zip(a, b, a.type_, std::multiplies<>{}, "*");
  }
  // Integers divide as ONNX Runtime's Div does, truncating toward zero.
  friend array operator/(const array& a, const array& b) {
    const bool whole = is_integer(a.type_);
    return zip(
        a, b, a.type_, [whole](double x, double y) { return whole ? std::trunc(x / y) : x / y; },
        "/");
  }

  // f of each pair of elements of a and b (of one type), broadcast as numpy does, rounded to
  // `out`: a comparison's bools, for instance. `op` names it in the error where they do not
  // broadcast.
  template <class F>
  static array zip(const array& a, const array& b, dtype out, F f, const char* op) {
    if (a.type_ != b.type_)
      throw mismatch(a, b, op, "are of different types: convert one with as()");
    const auto dims = broadcast_dims(a.dims_, b.dims_);
    if (!dims) throw mismatch(a, b, op, "do not broadcast");
    const array x = a.broadcast_to(*dims), y = b.broadcast_to(*dims);
    std::vector<double> values(x.values_.size());
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = f(x.values_[i], y.values_[i]);
    return array(out, *dims, std::move(values));
  }
  // numpy's broadcasting: dims aligned from the last, each pair equal or one of them 1.
  static std::optional<std::vector<std::int64_t>> broadcast_dims(
      const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
    const std::size_t rank = std::max(a.size(), b.size());
    std::vector<std::int64_t> dims(rank);
    for (std::size_t i = 0; i < rank; ++i) {
      const std::int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1;
      const std::int64_t y = i < b.size() ? b[b.size() - 1 - i] : 1;
      if (x != y && x != 1 && y != 1) return std::nullopt;
      dims[rank - 1 - i] = x == 1 ? y : x;
    }
    return dims;
  }
  // These elements repeated to `dims` (numpy's broadcast_to, ONNX's Expand to exactly them).
  array broadcast_to(const std::vector<std::int64_t>& dims) const {
    const auto to = broadcast_dims(dims_, dims);
    if (!to || *to != dims)
      throw error("array " + std::string(dtype_name(type_)) + " " + shape_text(dims_) +
                  " does not broadcast to " + shape_text(dims));
    if (dims == dims_) return *this;
    std::vector<double> out(std::size_t(count(dims)));
    std::vector<std::int64_t> at(dims.size(), 0);
    for (double& v : out) {
      v = values_[std::size_t(offset(at))];
      next_index(at, dims);
    }
    return array(type_, dims, std::move(out));
  }

  // ---- selections and layouts, as ONNX's ops of the same name compute them

  // The axes reordered: output axis i is input axis perm[i].
  array transpose(const std::vector<std::int64_t>& perm) const {
    std::vector<std::int64_t> dims(rank()), strides = strides_of(dims_), read(rank());
    for (std::size_t i = 0; i < rank(); ++i) {
      dims[i] = dims_.at(std::size_t(perm.at(i)));
      read[i] = strides[std::size_t(perm[i])];
    }
    return gathered(dims, read, 0);
  }
  // Elements start[i], start[i] + step[i] … along each axis, count[i] of them: Slice once its
  // bounds are clamped (the caller's part).
  array strided(const std::vector<std::int64_t>& start, const std::vector<std::int64_t>& step,
                const std::vector<std::int64_t>& count) const {
    const std::vector<std::int64_t> strides = strides_of(dims_);
    std::vector<std::int64_t> read(rank());
    std::int64_t base = 0;
    for (std::size_t i = 0; i < rank(); ++i) {
      base += start.at(i) * strides[i];
      read[i] = step.at(i) * strides[i];
    }
    return gathered(count, read, base);
  }
  // The arrays one after another along `axis`, their other dims equal.
  static array concat(const std::vector<array>& parts, std::size_t axis) {
    array out = parts.at(0);
    out.values_.clear();
    out.dims_.at(axis) = 0;
    for (const array& p : parts) out.dims_[axis] += p.dims_.at(axis);
    const std::int64_t outer = count({out.dims_.begin(), out.dims_.begin() + std::ptrdiff_t(axis)});
    for (std::int64_t o = 0; o < outer; ++o)
      for (const array& p : parts) {
        const std::int64_t run = p.size() / std::max<std::int64_t>(outer, 1);
        out.values_.insert(out.values_.end(), p.values_.begin() + o * run,
                           p.values_.begin() + (o + 1) * run);
      }
    if (out.size() != count(out.dims_)) throw error("array concat: parts of other dims");
    return out;
  }
  // Gather: along `axis`, the slices `indices` name (negative from the end), indices' dims in
  // place of that axis.
  array take(const array& indices, std::size_t axis) const {
    const std::int64_t outer = count({dims_.begin(), dims_.begin() + std::ptrdiff_t(axis)});
    const std::int64_t inner = count({dims_.begin() + std::ptrdiff_t(axis) + 1, dims_.end()});
    const std::int64_t n = dims_.at(axis);
    std::vector<std::int64_t> dims(dims_.begin(), dims_.begin() + std::ptrdiff_t(axis));
    dims.insert(dims.end(), indices.dims_.begin(), indices.dims_.end());
    dims.insert(dims.end(), dims_.begin() + std::ptrdiff_t(axis) + 1, dims_.end());
    std::vector<double> out;
    out.reserve(std::size_t(count(dims)));
    for (std::int64_t o = 0; o < outer; ++o)
      for (double x : indices.values_) {
        const std::int64_t k = index_in(x, n, "take");
        const auto from = values_.begin() + (o * n + k) * inner;
        out.insert(out.end(), from, from + inner);
      }
    return array(type_, std::move(dims), std::move(out));
  }
  // ScatterND with no reduction: a copy where each row of `indices` (its last dim long) names a
  // slice of this array that the matching slice of `updates` replaces, in order.
  array scatter_nd(const array& indices, const array& updates) const {
    const std::size_t depth = std::size_t(indices.dims_.empty() ? 0 : indices.dims_.back());
    if (depth == 0 || depth > rank()) throw error("array scatter_nd: indices of another depth");
    const std::int64_t inner = count({dims_.begin() + std::ptrdiff_t(depth), dims_.end()});
    const std::vector<std::int64_t> strides = strides_of(dims_);
    const std::int64_t rows = indices.size() / std::int64_t(depth);
    if (updates.size() != rows * inner) throw error("array scatter_nd: updates of another size");
    array out = *this;
    for (std::int64_t r = 0; r < rows; ++r) {
      std::int64_t at = 0;
      for (std::size_t i = 0; i < depth; ++i)
        at += index_in(indices.values_[std::size_t(r) * depth + i], dims_[i], "scatter_nd") *
              strides[i];
      for (std::int64_t k = 0; k < inner; ++k)
        out.values_[std::size_t(at + k)] = out.round(updates.values_[std::size_t(r * inner + k)]);
    }
    return out;
  }
  // Where: each element of `a` where `condition` holds, else of `b`, the three broadcast.
  static array where(const array& condition, const array& a, const array& b) {
    const auto ab = broadcast_dims(a.dims_, b.dims_);
    const auto dims = ab ? broadcast_dims(condition.dims_, *ab) : std::nullopt;
    if (!dims) throw mismatch(a, b, "where", "do not broadcast with the condition");
    const array c = condition.broadcast_to(*dims), x = a.broadcast_to(*dims),
                y = b.as(a.type_).broadcast_to(*dims);
    std::vector<double> out(x.values_.size());
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = c.values_[i] != 0 ? x.values_[i] : y.values_[i];
    return array(a.type_, *dims, std::move(out));
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

  static error mismatch(const array& a, const array& b, const char* op, const std::string& why) {
    return error("array " + std::string(op) + ": " + std::string(dtype_name(a.type_)) + " " +
                 shape_text(a.dims_) + " and " + std::string(dtype_name(b.type_)) + " " +
                 shape_text(b.dims_) + " " + why);
  }
  static std::vector<std::int64_t> strides_of(const std::vector<std::int64_t>& dims) {
    std::vector<std::int64_t> strides(dims.size(), 1);
    for (std::size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
    return strides;
  }
  static void next_index(std::vector<std::int64_t>& at, const std::vector<std::int64_t>& dims) {
    for (std::size_t i = at.size(); i-- > 0;) {  // row-major
      if (++at[i] < dims[i]) return;
      at[i] = 0;
    }
  }
  // An index into an axis of n (negative from the end), checked.
  static std::int64_t index_in(double x, std::int64_t n, const char* op) {
    if (!(x >= -double(n) && x < double(n)))
      throw error("array " + std::string(op) + ": index " +
                  std::to_string(std::llround(std::clamp(x, -0x1p62, 0x1p62))) +
                  " out of an axis of " + std::to_string(n));
    return std::int64_t(x) + (x < 0 ? n : 0);
  }
  // Elements of `dims`, the one at index `at` read at base + Σ at[i]·step[i].
  array gathered(const std::vector<std::int64_t>& dims, const std::vector<std::int64_t>& step,
                 std::int64_t base) const {
    std::vector<double> out(std::size_t(count(dims)));
    std::vector<std::int64_t> at(dims.size(), 0);
    for (double& v : out) {
      std::int64_t k = base;
      for (std::size_t i = 0; i < dims.size(); ++i) k += at[i] * step[i];
      v = values_[std::size_t(k)];
      next_index(at, dims);
    }
    return array(type_, dims, std::move(out));
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
