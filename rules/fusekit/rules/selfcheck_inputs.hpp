// Inputs selfcheck writes where a leaf of the instance's float type and the options' shape would
// not run (axes, bounds, sizes, shapes: pattern/sources.hpp), for the rules whose ops read them.
#pragma once

#include <cstdint>
#include <vector>

#include "fusekit/graph/dtype.hpp"

namespace fusekit::rules::selfcheck_inputs {

template <std::int64_t... Values>
struct int64_vector {
  static auto write(auto& w) {
    return w.initializer(dtype::int64, {std::int64_t(sizeof...(Values))}, {double(Values)...});
  }
};
template <std::int64_t Value>
struct int64_scalar {
  static auto write(auto& w) { return w.initializer(dtype::int64, {}, {double(Value)}); }
};
// One int64 per axis of the capture "x", each Value.
template <std::int64_t Value, std::size_t PerAxis = 1>
struct per_axis_of_x {
  static auto write(auto& w) {
    const std::size_t n = PerAxis * w.dims("x")->size();
    return w.initializer(dtype::int64, {std::int64_t(n)}, std::vector<double>(n, double(Value)));
  }
};
// The dims of the capture "x", as a Reshape's target.
struct dims_of_x {
  static auto write(auto& w) {
    const std::vector<std::int64_t> dims = *w.dims("x");
    return w.initializer(dtype::int64, {std::int64_t(dims.size())},
                         std::vector<double>(dims.begin(), dims.end()));
  }
};

// A scalar of the instance's type: a Pad's fill.
template <int Value>
struct scalar_of_type {
  static auto write(auto& w) { return w.initializer(w.type(), {}, {double(Value)}); }
};
// A vector of the instance's type, of Length elements: one, whose axis 0 a Squeeze removes; three,
// to gather from and slice.
template <std::int64_t Length>
struct vector_of {
  static auto write(auto& w) {
    return w.initializer(w.type(), {Length}, std::vector<double>(std::size_t(Length), 0.5));
  }
};

}  // namespace fusekit::rules::selfcheck_inputs
