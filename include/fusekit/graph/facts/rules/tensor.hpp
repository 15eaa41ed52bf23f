// The facts' rules of ONNX's tensor ops (onnx/defs/tensor): Cast, Identity and the other ops whose
// output has their input's shape, Where, Transpose, Reshape, Concat, Slice, Split, Gather, Squeeze
// and Unsqueeze, Shape, Tile, Pad. Small folded tensors go through the ops that move elements
// (a Shape, the Slice of it, a pad table reversed by a Transpose).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "fusekit/graph/facts/rule_context.hpp"

namespace fusekit::facts_detail {

// An integer cast to another integer type, where the facts know the result exactly: a number
// the type holds (a bool the number's truth), a symbolic size only into int64 (a dim past
// int32's range would wrap, and nothing bounds it).
inline sym integer_cast(const sym& e, dtype to) {
  if (const auto k = e.constant()) {
    if (to == dtype::boolean) return sym::constant(*k != 0);
    std::int64_t lo = std::numeric_limits<std::int64_t>::min() + 1,
                 hi = std::numeric_limits<std::int64_t>::max();
    switch (to) {
      case dtype::int8:
        lo = -128, hi = 127;
        break;
      case dtype::uint8:
        lo = 0, hi = 255;
        break;
      case dtype::int16:
        lo = -32768, hi = 32767;
        break;
      case dtype::uint16:
        lo = 0, hi = 65535;
        break;
      case dtype::int32:
        lo = std::numeric_limits<std::int32_t>::min(),
        hi = std::numeric_limits<std::int32_t>::max();
        break;
      case dtype::uint32:
        lo = 0, hi = std::numeric_limits<std::uint32_t>::max();
        break;
      case dtype::uint64:
        lo = 0;
        break;
      default:
        break;
    }
    return *k >= lo && *k <= hi ? e : sym{};
  }
  return to == dtype::int64 ? e : sym{};
}

inline void infer_cast(rule_context& cx, node_id n) {
  const dtype to = cx.g.type(cx.out(n));
  const content_fact& x = cx.in_content(n, 0);
  content_fact c;
  if (x.known && to != dtype::undefined) {
    if (is_float(to)) {
      c = x.real ? x : as_reals(x);
      round_all(c, to);
    } else if (!x.real) {
      c = x;
      for (sym& e : c.ints) e = integer_cast(e, to);
    } else {
      c = {true, false, {}, {}};
      for (double e : x.reals) {
        if (!std::isfinite(e) || std::fabs(e) > 9e15) {
          c = {};
          break;
        }
        c.ints.push_back(sym::constant(std::int64_t(std::trunc(e))));
      }
    }
  }
  cx.set(n, 0, cx.in_shape(n, 0), std::move(c));
}

// No value twice (a perm): quadratic, as ranks are small, and allocation-free.
inline bool distinct(std::span<const std::int64_t> xs) {
  for (std::size_t i = 0; i < xs.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (xs[i] == xs[j]) return false;
  return true;
}

// The dims of x when every one is a number.
inline std::optional<std::vector<std::size_t>> static_dims(const shape_fact& x) {
  if (!x.known) return std::nullopt;
  std::vector<std::size_t> out;
  for (const sym& d : x.dims) {
    const auto k = d.constant();
    if (!k || *k < 0) return std::nullopt;
    out.push_back(std::size_t(*k));
  }
  return out;
}

inline std::vector<std::size_t> strides(const std::vector<std::size_t>& sizes) {
  std::vector<std::size_t> out(sizes.size(), 1);
  for (std::size_t i = sizes.size(); i-- > 1;) out[i - 1] = out[i] * sizes[i];
  return out;
}

// Calls f with every index of a tensor of these sizes, row-major.
template <class F>
void for_each_index(const std::vector<std::size_t>& sizes, F f) {
  for (std::size_t d : sizes)
    if (d == 0) return;
  std::vector<std::size_t> at(sizes.size(), 0);
  while (true) {
    f(at);
    std::size_t i = sizes.size();
    while (i > 0 && ++at[i - 1] == sizes[i - 1]) at[--i] = 0;
    if (i == 0) return;
  }
}

inline void copy_element(const content_fact& from, std::size_t i, content_fact& to) {
  if (from.real)
    to.reals.push_back(from.reals[i]);
  else
    to.ints.push_back(from.ints[i]);
}

// Where picks each element from input 1 or 2 by input 0's flag: folded where every flag is known.
inline content_fact fold_where(rule_context& cx, node_id n, const shape_fact& s) {
  const auto size = foldable_count(cx, n, s);
  if (!size) return {};
  const bool real = is_float(cx.g.type(cx.out(n)));
  content_fact r{true, real, {}, {}};
  for (std::size_t k = 0; k < *size; ++k) {
    auto pick = [&](std::size_t i) { return cx.in_content(n, i).size() == 1 ? 0 : k; };
    const content_fact& cond = cx.in_content(n, 0);
    if (cond.real) return {};
    const auto flag = cond.ints[pick(0)].constant();
    if (!flag) return {};
    const std::size_t from = *flag ? 1 : 2;
    const content_fact& chosen = cx.in_content(n, from);
    if (chosen.real != real) return {};
    copy_element(chosen, pick(from), r);
  }
  return r;
}

inline void infer_where(rule_context& cx, node_id n) {
  // Three inputs: checked here too, for the opsets no schema checks.
  if (cx.g.inputs(n).size() != 3) return cx.cannot_run();
  const shape_fact* shapes[] = {&cx.in_shape(n, 0), &cx.in_shape(n, 1), &cx.in_shape(n, 2)};
  shape_fact s = cx.broadcast(shapes, cx.out(n));
  cx.set(n, 0, s, fold_where(cx, n, s));
}

inline void infer_transpose(rule_context& cx, node_id n) {
  const shape_fact& x = cx.in_shape(n, 0);
  if (!x.known) return;
  std::vector<std::int64_t> perm;
  if (auto p = cx.g.attribute_ints(n, "perm")) {
    perm.assign(p->begin(), p->end());
  } else {
    for (std::size_t i = x.rank(); i-- > 0;) perm.push_back(std::int64_t(i));
  }
  if (perm.size() != x.rank() || !distinct(perm)) return cx.cannot_run();  // each axis once
  shape_fact s{true, {}};
  for (std::int64_t p : perm) {
    if (p < 0 || p >= std::int64_t(x.rank())) return cx.cannot_run();
    s.dims.push_back(x.dims[std::size_t(p)]);
  }
  // A small folded tensor permutes too (TorchScript reverses pad pairs with a Transpose).
  content_fact c;
  const content_fact& data = cx.in_content(n, 0);
  const auto sizes = static_dims(x);
  if (data.known && sizes) {
    const std::vector<std::size_t> in_strides = strides(*sizes);
    std::vector<std::size_t> out_sizes;
    for (std::int64_t p : perm) out_sizes.push_back((*sizes)[std::size_t(p)]);
    c = {true, data.real, {}, {}};
    for_each_index(out_sizes, [&](const std::vector<std::size_t>& at) {
      std::size_t from = 0;
      for (std::size_t i = 0; i < at.size(); ++i) from += at[i] * in_strides[std::size_t(perm[i])];
      copy_element(data, from, c);
    });
  }
  cx.set(n, 0, std::move(s), std::move(c));
}

// The number of elements of a shape whose every dim is a number and whose product fits int64;
// -1 for any other.
inline std::int64_t static_count(std::span<const sym> dims) {
  std::int64_t count = 1;
  for (const sym& d : dims) {
    const auto k = d.constant();
    if (!k || *k < 0 || __builtin_mul_overflow(count, *k, &count)) return -1;
  }
  return count;
}

// The element count of `dims` over that of `others`, for a Reshape's -1. A dim both hold cancels
// first: a sum the Reshape keeps (1 + past, a decode step's keys) divides no product of single
// terms, and the same dim on both sides is exactly 1 of the quotient.
inline sym count_over(std::span<const sym> dims, std::span<const sym> others) {
  std::vector<sym> numerator(dims.begin(), dims.end()), denominator;
  for (const sym& d : others) {
    const auto same = std::find(numerator.begin(), numerator.end(), d);
    if (d.known() && same != numerator.end())
      numerator.erase(same);
    else
      denominator.push_back(d);
  }
  return exact_quotient(product(numerator), product(denominator));
}

inline void infer_reshape(rule_context& cx, node_id n) {
  const shape_fact& x = cx.in_shape(n, 0);
  const content_fact& target = cx.in_content(n, 1);
  const content_fact& data = cx.in_content(n, 0);
  if (!target.known || target.real) {
    // The rank is the length of the shape input, when that is known (a target longer than any
    // folded vector is no rank worth following).
    const shape_fact& t = cx.in_shape(n, 1);
    if (t.known && t.rank() == 1)
      if (auto len = t.dims[0].constant();
          len && *len >= 0 && std::uint64_t(*len) <= facts::max_elements)
        cx.set(n, 0, cx.opaque(n, 0, std::size_t(*len)));
    return;
  }
  const bool allowzero = cx.g.attribute_int(n, "allowzero").value_or(0) != 0;
  shape_fact s{true, {}};
  std::optional<std::size_t> inferred;
  bool zero = false;
  for (std::size_t i = 0; i < target.ints.size(); ++i) {
    const sym& d = target.ints[i];
    if (d.is_constant(0) && !allowzero) {
      if (!x.known) return cx.set(n, 0, cx.opaque(n, 0, target.ints.size()));
      if (i >= x.rank()) return cx.cannot_run();  // copies a dim the input does not have
      s.dims.push_back(x.dims[i]);
    } else if (d.is_constant(-1)) {
      if (inferred) return cx.cannot_run();  // two -1
      inferred = i;
      s.dims.push_back(sym::unknown());
    } else if (is_negative_constant(d)) {
      return cx.cannot_run();  // no dim is negative
    } else if (d.known()) {
      zero = zero || d.is_constant(0);
      s.dims.push_back(d);
    } else {
      s.dims.push_back(cx.fresh(cx.out(n), i));
    }
  }
  if (inferred && zero) return cx.cannot_run();  // with allowzero, a 0 leaves -1 nothing to solve
  const std::int64_t count = x.known ? static_count(x.dims) : -1;
  if (inferred) {
    std::vector<sym> others;
    for (std::size_t i = 0; i < s.rank(); ++i)
      if (i != *inferred) others.push_back(s.dims[i]);
    const std::int64_t rest = static_count(others);
    if (count >= 0 && rest > 0 && count % rest != 0) return cx.cannot_run();  // no whole -1
    const sym q = x.known ? count_over(x.dims, others) : sym::unknown();
    s.dims[*inferred] = q.known() ? q : cx.fresh(cx.out(n), *inferred);
  } else if (const std::int64_t made = static_count(s.dims);
             count >= 0 && made >= 0 && count != made) {
    return cx.cannot_run();  // the element counts differ
  }
  cx.set(n, 0, std::move(s), data);  // reshaping keeps the elements, in order
}

inline void infer_concat(rule_context& cx, node_id n) {
  const auto inputs = cx.g.inputs(n);
  if (inputs.empty()) return;
  const shape_fact& first = cx.shape(inputs[0]);
  if (!first.known) return;
  const auto axis = axis_index(cx.g.attribute_int(n, "axis").value_or(0), first.rank());
  if (!axis) return;
  shape_fact s = first;
  content_fact c{true, cx.content(inputs[0]).real, {}, {}};
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const shape_fact& x = cx.shape(inputs[k]);
    if (!x.known || x.rank() != first.rank()) return;
    // The other dims agree, or the model cannot run (compared where both are numbers).
    for (std::size_t i = 0; i < x.rank(); ++i)
      if (const auto a = first.dims[i].constant(), b = x.dims[i].constant();
          i != *axis && a && b && *a != *b)
        return cx.cannot_run();
    if (k > 0) s.dims[*axis] = s.dims[*axis] + x.dims[*axis];
    const content_fact& e = cx.content(inputs[k]);
    if (!e.known || first.rank() != 1 || e.real != c.real) c = {};
    if (c.known) {
      c.ints.insert(c.ints.end(), e.ints.begin(), e.ints.end());
      c.reals.insert(c.reals.end(), e.reals.begin(), e.reals.end());
    }
  }
  if (!s.dims[*axis].known()) s.dims[*axis] = cx.fresh(cx.out(n), *axis);
  cx.set(n, 0, std::move(s), std::move(c));
}

// No axis named twice (-1 and rank - 1 are one axis); one out of range is left to the caller.
inline bool distinct_axes(std::span<const std::int64_t> axes, std::size_t rank) {
  for (std::size_t i = 0; i < axes.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (const auto a = axis_index(axes[i], rank); a && a == axis_index(axes[j], rank))
        return false;
  return true;
}

// Clamped start and length of one sliced axis, when the numbers allow it.
inline std::optional<std::pair<std::int64_t, std::int64_t>> slice_range(std::int64_t size,
                                                                        std::int64_t start,
                                                                        std::int64_t end,
                                                                        std::int64_t step) {
  if (step == 0 || size < 0) return std::nullopt;
  auto clamp = [&](std::int64_t i) {
    if (i < 0) i += size;
    if (step > 0) return std::clamp<std::int64_t>(i, 0, size);
    return std::clamp<std::int64_t>(i, -1, size - 1);
  };
  const std::int64_t b = clamp(start), e = clamp(end);
  // ⌈distance / |step|⌉, written so that no step (the lowest int64 included) overflows.
  const std::uint64_t distance = step > 0 ? std::uint64_t(std::max<std::int64_t>(e - b, 0))
                                          : std::uint64_t(std::max<std::int64_t>(b - e, 0));
  const std::uint64_t stride = step > 0 ? std::uint64_t(step) : 0 - std::uint64_t(step);
  const std::int64_t len = distance == 0 ? 0 : std::int64_t((distance - 1) / stride + 1);
  return std::pair{b, len};
}

// The length of x[start:end] (step 1) along a dim of size d when a bound is symbolic, unknown
// where the facts cannot write it. From the start: the whole dim when the end is proven to reach
// it, else min(end, d). To the end from a start proven at least 0 (a decoder's past length):
// max(0, d − start). From a start proven negative, −k (T5's last S rows): the last min(k, d),
// and all d when k is d, whatever d is (x[−0:] is x).
inline sym symbolic_slice_length(rule_context& cx, const sym& d, const sym& start, const sym& end) {
  if (!start.known() || !end.known()) return {};
  const auto e = end.constant();
  const bool to_the_end =
      equal(end, d) == truth::yes || (e && *e >= std::numeric_limits<std::int32_t>::max());
  if (start.is_constant(0)) {
    if (!is_non_negative(end)) return {};
    return to_the_end ? d : cx.atoms().minimum(end, d);
  }
  if (!to_the_end) return {};
  if (is_non_negative(start)) return cx.atoms().at_least_zero(d - start);
  const sym k = sym::constant(0) - start;
  if (equal(k, d) == truth::yes) return d;
  if (is_non_negative(k - sym::constant(1))) return cx.atoms().minimum(k, d);
  return {};
}

inline void infer_slice(rule_context& cx, node_id n) {
  const shape_fact& x = cx.in_shape(n, 0);
  if (!x.known) return;
  const auto starts = cx.bounds_of(n, 1, "starts");
  const auto ends = cx.bounds_of(n, 2, "ends");
  if (!starts || !ends || starts->size() != ends->size())
    return cx.set(n, 0, cx.opaque(n, 0, x.rank()));
  std::vector<std::int64_t> axes, steps(starts->size(), 1);
  if (auto a = cx.ints_of(n, 3, "axes")) {
    axes = *a;
  } else if (cx.g.input(n, 3) != no_id) {
    return cx.set(n, 0, cx.opaque(n, 0, x.rank()));  // which axes are sliced is not known
  } else {
    for (std::size_t i = 0; i < starts->size(); ++i) axes.push_back(std::int64_t(i));
  }
  std::vector<bool> known_step(starts->size(), true);
  if (cx.g.input(n, 4) != no_id) {
    const content_fact& c = cx.in_content(n, 4);
    if (!c.known || c.real || c.size() != starts->size())
      return cx.set(n, 0, cx.opaque(n, 0, x.rank()));
    for (std::size_t k = 0; k < c.ints.size(); ++k) {
      const auto step = c.ints[k].constant();
      known_step[k] = step.has_value();
      steps[k] = step.value_or(1);
    }
  }
  if (axes.size() != starts->size() || steps.size() != starts->size()) return;
  if (!distinct_axes(axes, x.rank())) return cx.cannot_run();
  shape_fact s = x;
  const content_fact& data = cx.in_content(n, 0);
  content_fact c;
  // Where each output axis starts in the input, and its step.
  std::vector<std::int64_t> first(x.rank(), 0), stride(x.rank(), 1);
  for (std::size_t k = 0; k < axes.size(); ++k) {
    const auto axis = axis_index(axes[k], x.rank());
    if (!axis) return;
    const auto b = (*starts)[k].constant(), e = (*ends)[k].constant();
    const std::int64_t step = steps[k];
    if (!known_step[k]) {
      s.dims[*axis] = cx.fresh(cx.out(n), *axis);
      continue;
    }
    if (!b || !e) {
      const sym length =
          step == 1 ? symbolic_slice_length(cx, x.dims[*axis], (*starts)[k], (*ends)[k]) : sym{};
      s.dims[*axis] = length.known() ? length : cx.fresh(cx.out(n), *axis);
      continue;
    }
    const auto size = x.dims[*axis].constant();
    const bool whole = step == 1 && *b == 0 && *e >= std::numeric_limits<std::int32_t>::max();
    if (whole) continue;
    if (!size) {
      s.dims[*axis] = cx.fresh(cx.out(n), *axis);
      continue;
    }
    const auto range = slice_range(*size, *b, *e, step);
    if (!range) return;
    s.dims[*axis] = sym::constant(range->second);
    first[*axis] = range->first;
    stride[*axis] = step;
  }
  // A Slice of a small folded tensor (Shape → Slice, a reversed pad table) folds too.
  const auto in_sizes = static_dims(x);
  const auto out_sizes = static_dims(s);
  if (data.known && in_sizes && out_sizes) {
    const std::vector<std::size_t> in_strides = strides(*in_sizes);
    c = {true, data.real, {}, {}};
    for_each_index(*out_sizes, [&](const std::vector<std::size_t>& at) {
      std::int64_t from = 0;
      for (std::size_t i = 0; i < at.size(); ++i)
        from += (first[i] + std::int64_t(at[i]) * stride[i]) * std::int64_t(in_strides[i]);
      copy_element(data, std::size_t(from), c);
    });
  }
  cx.set(n, 0, std::move(s), std::move(c));
}

inline void infer_split(rule_context& cx, node_id n) {
  const shape_fact& x = cx.in_shape(n, 0);
  if (!x.known) return;
  const auto axis = axis_index(cx.g.attribute_int(n, "axis").value_or(0), x.rank());
  if (!axis) return;
  const std::size_t outputs = cx.g.outputs(n).size();
  const std::int64_t parts = std::int64_t(outputs);
  if (outputs == 0) return cx.cannot_run();
  const sym& whole = x.dims[*axis];
  const auto length = whole.constant();
  // Sizes from the input (opset 13 on) or the attribute: each at least 0, one per output, and
  // together the whole axis; sizes known only at run time leave each part's length open.
  const bool given = cx.g.input(n, 1) != no_id || cx.g.attribute(n, "split");
  const auto sizes = cx.ints_of(n, 1, "split");
  if (sizes) {
    std::int64_t total = 0;
    if (sizes->size() != outputs) return cx.cannot_run();
    for (std::int64_t k : *sizes)
      if (k < 0 || __builtin_add_overflow(total, k, &total)) return cx.cannot_run();
    if (length && *length != total) return cx.cannot_run();
  }
  // Equal parts otherwise: a whole quotient before opset 18; from 18 on, num_outputs parts of
  // ⌈d / n⌉, the last what is left.
  const bool ceiling = cx.g.opset("") >= 18;
  if (!given && ceiling && cx.g.attribute_int(n, "num_outputs").value_or(parts) != parts)
    return cx.cannot_run();
  std::int64_t chunk = 0, last = 0;
  if (!given && length) {
    chunk = *length / parts + (*length % parts != 0);
    last = *length - chunk * (parts - 1);
    if (ceiling ? last <= 0 : last != chunk) return cx.cannot_run();
  }
  for (std::size_t k = 0; k < outputs; ++k) {
    shape_fact s = x;
    sym& d = s.dims[*axis];
    if (sizes) {
      d = sym::constant((*sizes)[k]);
    } else if (given) {
      d = sym::unknown();
    } else if (length) {
      d = sym::constant(k + 1 == outputs ? last : chunk);
    } else {
      d = exact_quotient(whole, sym::constant(parts));
      if (ceiling && d.denominator() != 1) d = sym::unknown();  // ⌈d / n⌉ is no quotient
    }
    if (!d.known() && cx.g.output(n, k) != no_id) d = cx.fresh(cx.g.output(n, k), *axis);
    cx.set(n, k, std::move(s));
  }
}

inline void infer_gather(rule_context& cx, node_id n) {
  const shape_fact& x = cx.in_shape(n, 0);
  const shape_fact& idx = cx.in_shape(n, 1);
  if (!x.known || !idx.known) return;
  const auto axis = axis_index(cx.g.attribute_int(n, "axis").value_or(0), x.rank());
  if (!axis) return;
  shape_fact s{true, {x.dims.begin(), x.dims.begin() + std::ptrdiff_t(*axis)}};
  s.dims.insert(s.dims.end(), idx.dims.begin(), idx.dims.end());
  s.dims.insert(s.dims.end(), x.dims.begin() + std::ptrdiff_t(*axis) + 1, x.dims.end());
  content_fact c;
  const content_fact& data = cx.in_content(n, 0);
  const auto indices = cx.constant_ints(n, 1);
  if (x.rank() == 1 && data.known && indices) {
    c = {true, data.real, {}, {}};
    for (std::int64_t i : *indices) {
      if (i < 0) i += std::int64_t(data.size());
      if (i < 0 || i >= std::int64_t(data.size())) return cx.set(n, 0, std::move(s));
      if (data.real)
        c.reals.push_back(data.reals[std::size_t(i)]);
      else
        c.ints.push_back(data.ints[std::size_t(i)]);
    }
  }
  cx.set(n, 0, std::move(s), std::move(c));
}

inline void infer_squeeze(rule_context& cx, node_id n, bool unsqueeze) {
  const shape_fact& x = cx.in_shape(n, 0);
  if (!x.known) return;
  const auto axes = cx.ints_of(n, 1, "axes");
  if (!axes && cx.g.input(n, 1) != no_id) return;  // axes known only at run time
  shape_fact s{true, {}};
  if (unsqueeze) {
    if (!axes) return;
    const std::size_t rank = x.rank() + axes->size();
    std::vector<bool> inserted(rank, false);
    for (std::int64_t a : *axes) {
      const auto i = axis_index(a, rank);
      if (!i || inserted[*i]) return cx.cannot_run();
      inserted[*i] = true;
    }
    for (std::size_t i = 0, k = 0; i < rank; ++i)
      s.dims.push_back(inserted[i] ? sym::constant(1) : x.dims[k++]);
  } else {
    std::vector<bool> removed(x.rank(), false);
    if (axes) {
      for (std::int64_t a : *axes) {
        const auto i = axis_index(a, x.rank());
        // Each axis once, and of size 1 where its size is a number, or the model cannot run.
        if (!i || removed[*i] || (x.dims[*i].constant() && !x.dims[*i].is_constant(1)))
          return cx.cannot_run();
        removed[*i] = true;
      }
    } else {
      for (std::size_t i = 0; i < x.rank(); ++i) {
        if (!x.dims[i].constant()) return;  // which dims are 1 is not known
        removed[i] = x.dims[i].is_constant(1);
      }
    }
    for (std::size_t i = 0; i < x.rank(); ++i)
      if (!removed[i]) s.dims.push_back(x.dims[i]);
  }
  cx.set(n, 0, std::move(s), cx.in_content(n, 0));
}

inline void infer_shape(rule_context& cx, node_id n) {
  const shape_fact& x = cx.in_shape(n, 0);
  if (!x.known) return;
  const std::int64_t rank = std::int64_t(x.rank());
  auto bound = [&](std::int64_t i) {
    return std::clamp<std::int64_t>(i < 0 ? i + rank : i, 0, rank);
  };
  const std::int64_t start = bound(cx.g.attribute_int(n, "start").value_or(0));
  const std::int64_t end = bound(cx.g.attribute_int(n, "end").value_or(rank));
  content_fact c{true, false, {}, {}};
  for (std::int64_t i = start; i < end; ++i) c.ints.push_back(x.dims[std::size_t(i)]);
  const sym length = sym::constant(std::int64_t(c.ints.size()));
  cx.set(n, 0, {true, {length}}, std::move(c));
}

inline void infer_tile(rule_context& cx, node_id n) {
  const shape_fact& x = cx.in_shape(n, 0);
  const content_fact& repeats = cx.in_content(n, 1);
  if (!x.known || !repeats.known || repeats.real || repeats.size() != x.rank()) return;
  shape_fact s{true, {}};
  for (std::size_t i = 0; i < x.rank(); ++i) {
    if (is_negative_constant(repeats.ints[i])) return cx.cannot_run();  // no count is negative
    const sym d = x.dims[i] * repeats.ints[i];
    s.dims.push_back(d.known() ? d : cx.fresh(cx.out(n), i));
  }
  cx.set(n, 0, std::move(s));
}

// Pad: each padded axis grows by its two pads (negative pads crop). Pads from the attribute
// (before opset 11) or the input; the axes they apply to from input 3 (opset 18), else all.
inline void infer_pad(rule_context& cx, node_id n) {
  const shape_fact& x = cx.in_shape(n, 0);
  if (!x.known) return;
  const auto pads = cx.g.input(n, 1) != no_id ? cx.bounds_of(n, 1, "") : cx.bounds_of(n, 1, "pads");
  std::vector<std::int64_t> axes;
  if (cx.g.input(n, 3) != no_id) {
    const auto a = cx.constant_ints(n, 3);
    if (!a) return cx.set(n, 0, cx.opaque(n, 0, x.rank()));
    axes = *a;
  } else {
    for (std::size_t i = 0; i < x.rank(); ++i) axes.push_back(std::int64_t(i));
  }
  if (!pads || pads->size() != 2 * axes.size()) return cx.set(n, 0, cx.opaque(n, 0, x.rank()));
  if (!distinct_axes(axes, x.rank())) return cx.cannot_run();
  shape_fact s = x;
  for (std::size_t k = 0; k < axes.size(); ++k) {
    const auto axis = axis_index(axes[k], x.rank());
    if (!axis) return;
    const sym d = x.dims[*axis] + (*pads)[k] + (*pads)[k + axes.size()];
    if (is_negative_constant(d)) return cx.cannot_run();  // cropped past nothing
    s.dims[*axis] = d.known() ? d : cx.fresh(cx.out(n), *axis);
  }
  cx.set(n, 0, std::move(s));
}

// This family's rules, and which answers op (none when the family has no rule for it).
enum class tensor_rule : std::uint8_t {
  none,
  cast,
  identity,
  same_shape,
  where,
  transpose,
  reshape,
  concat,
  slice,
  split,
  gather,
  squeeze,
  unsqueeze,
  shape,
  tile,
  pad
};
inline tensor_rule tensor_rule_for(std::string_view op) {
  if (in(op, {"Cast", "CastLike"})) return tensor_rule::cast;
  if (op == "Identity") return tensor_rule::identity;
  if (in(op, {"IsNaN", "IsInf", "Trilu"})) return tensor_rule::same_shape;
  if (op == "Where") return tensor_rule::where;
  if (op == "Transpose") return tensor_rule::transpose;
  if (op == "Reshape") return tensor_rule::reshape;
  if (op == "Concat") return tensor_rule::concat;
  if (op == "Slice") return tensor_rule::slice;
  if (op == "Split") return tensor_rule::split;
  if (op == "Gather") return tensor_rule::gather;
  if (op == "Squeeze") return tensor_rule::squeeze;
  if (op == "Unsqueeze") return tensor_rule::unsqueeze;
  if (op == "Shape") return tensor_rule::shape;
  if (op == "Tile") return tensor_rule::tile;
  if (op == "Pad") return tensor_rule::pad;
  return tensor_rule::none;
}
inline void run_tensor_rule(rule_context& cx, node_id n, tensor_rule rule) {
  switch (rule) {
    case tensor_rule::none:
      return;
    case tensor_rule::cast:
      return infer_cast(cx, n);
    case tensor_rule::identity:
      return cx.set(n, 0, cx.in_shape(n, 0), cx.in_content(n, 0));
    case tensor_rule::same_shape:
      return cx.set(n, 0, cx.in_shape(n, 0));
    case tensor_rule::where:
      return infer_where(cx, n);
    case tensor_rule::transpose:
      return infer_transpose(cx, n);
    case tensor_rule::reshape:
      return infer_reshape(cx, n);
    case tensor_rule::concat:
      return infer_concat(cx, n);
    case tensor_rule::slice:
      return infer_slice(cx, n);
    case tensor_rule::split:
      return infer_split(cx, n);
    case tensor_rule::gather:
      return infer_gather(cx, n);
    case tensor_rule::squeeze:
      return infer_squeeze(cx, n, false);
    case tensor_rule::unsqueeze:
      return infer_squeeze(cx, n, true);
    case tensor_rule::shape:
      return infer_shape(cx, n);
    case tensor_rule::tile:
      return infer_tile(cx, n);
    case tensor_rule::pad:
      return infer_pad(cx, n);
  }
}

}  // namespace fusekit::facts_detail
