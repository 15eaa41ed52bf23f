// The facts' rules of ONNX's math and logical ops (onnx/defs/math, onnx/defs/logical): the
// activations and other ops whose output has their input's shape (Neg, Abs, Sqrt and Reciprocal of
// a folded tensor fold too; ONNX Runtime's FastGelu and QuickGelu, activations of com.microsoft,
// with them), the broadcasting ops of two or more operands, Expand, MatMul, Gemm, Einsum, CumSum.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fusekit/graph/facts/rule_context.hpp"

namespace fusekit::facts_detail {

// Clip of held elements to its bounds (inputs from opset 11, attributes before), each bound
// absent or a held scalar; an unknown element or bound leaves nothing held.
inline content_fact clipped(rule_context& cx, node_id n, const content_fact& x) {
  const auto bound = [&](std::size_t slot, const char* attribute,
                         double none) -> std::optional<double> {
    if (cx.g.opset("") < 11)
      return double(cx.g.attribute_float(n, attribute).value_or(float(none)));
    const value_id v = cx.g.input(n, slot);
    if (v == no_id) return none;
    const content_fact& c = cx.content(v);
    if (!c.known || c.size() != 1) return std::nullopt;
    if (c.real) return c.reals[0];
    const auto k = c.ints[0].constant();
    return k ? std::optional<double>(double(*k)) : std::nullopt;
  };
  const auto low = bound(1, "min", -INFINITY), high = bound(2, "max", INFINITY);
  if (!low || !high) return {};
  content_fact c = x;
  for (double& e : c.reals) e = std::min(std::max(e, *low), *high);
  // Integers compared as they are: a bound of an integer Clip is one of their type.
  for (sym& e : c.ints) {
    const auto k = e.constant();
    if (!k) return {};
    if (double(*k) < *low) e = sym::constant(std::int64_t(*low));
    if (double(*k) > *high) e = sym::constant(std::int64_t(*high));
  }
  return c;
}

// The output has the input's shape; Neg, Abs, Sqrt, Reciprocal, Ceil, Floor, Round and Clip of a
// folded tensor fold too.
inline void infer_unary(rule_context& cx, node_id n, std::string_view op) {
  content_fact c;
  const content_fact& x = cx.in_content(n, 0);
  if (x.known && in(op, {"Neg", "Abs", "Sqrt", "Reciprocal", "Ceil", "Floor", "Round", "Clip"})) {
    c = x;
    if (op == "Clip") {
      c = clipped(cx, n, x);
    } else if (in(op, {"Ceil", "Floor", "Round"})) {
      // Of floats alone: timm's TensorFlow-style "same" padding, ceil(size / stride), as numbers.
      if (!c.real) return cx.set(n, 0, cx.in_shape(n, 0));
      for (double& e : c.reals)
        e = op == "Ceil" ? std::ceil(e) : op == "Floor" ? std::floor(e) : std::nearbyint(e);
    } else if (op == "Neg") {
      for (sym& e : c.ints) e = sym::constant(0) - e;
      for (double& e : c.reals) e = -e;
    } else if (op == "Abs") {
      // torch.export writes expand(b, 1, -1, -1) as Expand(x, Abs(shape)): a -1 keeps the dim
      // as a 1 does, and a dim is its own magnitude. An expression of unknown sign stays open.
      for (sym& e : c.ints) {
        const sym negated = sym::constant(0) - e;
        // The lowest int64 has no magnitude: Abs wraps it to itself.
        if (const auto k = e.constant())
          e = sym::constant(*k < 0 && *k != std::numeric_limits<std::int64_t>::min() ? -*k : *k);
        else if (is_non_negative(negated))
          e = negated;
        else if (!is_non_negative(e))
          e = sym::unknown();
      }
      for (double& e : c.reals) e = std::fabs(e);
    } else {
      if (!c.real) c = as_reals(c);
      for (double& e : c.reals) e = op == "Sqrt" ? std::sqrt(e) : 1.0 / e;
      round_all(c, cx.g.type(cx.out(n)));
    }
  }
  cx.set(n, 0, cx.in_shape(n, 0), std::move(c));
}

// Element-wise arithmetic on folded contents: integers symbolically, floats as numbers.
inline content_fact fold_elementwise(rule_context& cx, node_id n, std::string_view op,
                                     const shape_fact& s) {
  // Every op folded here combines two.
  if (cx.g.inputs(n).size() != 2) return {};
  const auto size = foldable_count(cx, n, s);
  if (!size) return {};
  const bool real = is_float(cx.g.type(cx.out(n)));
  content_fact r{true, real, {}, {}};
  for (std::size_t k = 0; k < *size; ++k) {
    auto element = [&](std::size_t i) -> const content_fact& { return cx.in_content(n, i); };
    auto pick = [&](std::size_t i) { return element(i).size() == 1 ? 0 : k; };
    const content_fact& a = element(0);
    const content_fact& b = element(1);
    if (real) {
      const content_fact ra = a.real ? a : as_reals(a);
      const content_fact rb = b.real ? b : as_reals(b);
      if (!ra.known || !rb.known) return {};
      const double x = ra.reals[pick(0)], y = rb.reals[pick(1)];
      double z;
      if (op == "Add")
        z = x + y;
      else if (op == "Sub")
        z = x - y;
      else if (op == "Mul")
        z = x * y;
      else if (op == "Div")
        z = x / y;
      else if (op == "Pow")
        z = std::pow(x, y);
      else
        return {};
      r.reals.push_back(rounded_to(z, cx.g.type(cx.out(n))));
      continue;
    }
    if (a.real || b.real) return {};
    const sym& x = a.ints[pick(0)];
    const sym& y = b.ints[pick(1)];
    if (op == "Add") {
      r.ints.push_back(x + y);
    } else if (op == "Sub") {
      r.ints.push_back(x - y);
    } else if (op == "Mul") {
      r.ints.push_back(x * y);
    } else if (op == "Div" || op == "Mod") {
      const auto a = x.constant(), d = y.constant();
      if (a && d && *d != 0 && *a >= 0 && *d > 0) {
        // Both known and non-negative: truncation and floor agree (torch's chunk sizes).
        r.ints.push_back(sym::constant(op == "Div" ? *a / *d : *a % *d));
      } else if (op == "Div") {
        // A symbolic dividend: fold only quotients that are whole.
        const sym q = exact_quotient(x, y);
        r.ints.push_back(q.known() && q.denominator() == 1 && d ? q : sym::unknown());
      } else {
        r.ints.push_back(sym::unknown());
      }
    } else if (op == "Equal") {
      truth t = equal(x, y);
      // A dim is never negative: torch's expand writes Where(Equal(shape, -1), 1, shape).
      if (t == truth::unknown && ((is_negative_constant(x) && is_non_negative(y)) ||
                                  (is_negative_constant(y) && is_non_negative(x))))
        t = truth::no;
      r.ints.push_back(t == truth::unknown ? sym::unknown() : sym::constant(t == truth::yes));
    } else {
      return {};
    }
  }
  return r;
}

inline void infer_elementwise(rule_context& cx, node_id n, std::string_view op) {
  // Sum, Max and Min take any number of inputs, the others two: checked here too, for the opsets
  // no schema checks.
  if (cx.g.inputs(n).size() != 2 && !in(op, {"Sum", "Max", "Min"})) return cx.cannot_run();
  std::vector<const shape_fact*> shapes;
  for (value_id v : cx.g.inputs(n)) shapes.push_back(&cx.shape(v));
  if (shapes.empty()) return;
  shape_fact s = cx.broadcast(shapes, cx.out(n));
  cx.set(n, 0, s, fold_elementwise(cx, n, op, s));
}

// The elements of x broadcast to s, where every dim of both is a number and x's elements are held:
// a mask's rows and columns expanded to a square.
inline content_fact broadcast_content(const content_fact& data, const shape_fact& x,
                                      const shape_fact& s) {
  if (!data.known || !x.known || !s.known || x.rank() > s.rank()) return {};
  const std::size_t rank = s.rank();
  std::vector<std::size_t> out(rank), in(rank, 1);
  std::size_t count = 1, read = 1;
  for (std::size_t i = 0; i < rank; ++i) {
    const auto k = s.dims[i].constant();
    if (!k || *k < 0) return {};
    out[i] = std::size_t(*k);
    count *= out[i];
    if (count > facts::max_elements) return {};
  }
  for (std::size_t i = 0; i < x.rank(); ++i) {
    const auto k = x.dims[i].constant();
    if (!k || *k < 0) return {};
    in[rank - x.rank() + i] = std::size_t(*k);
    read *= std::size_t(*k);
  }
  if (read != data.size()) return {};
  std::vector<std::size_t> stride(rank, 1);
  for (std::size_t i = rank; i-- > 1;) stride[i - 1] = stride[i] * in[i];
  content_fact c{true, data.real, {}, {}};
  std::vector<std::size_t> at(rank, 0);
  for (std::size_t k = 0; k < count; ++k) {
    std::size_t from = 0;
    for (std::size_t i = 0; i < rank; ++i) from += (in[i] == 1 ? 0 : at[i]) * stride[i];
    if (c.real)
      c.reals.push_back(data.reals[from]);
    else
      c.ints.push_back(data.ints[from]);
    for (std::size_t i = rank; i-- > 0;) {
      if (++at[i] < out[i]) break;
      at[i] = 0;
    }
  }
  return c;
}

inline void infer_expand(rule_context& cx, node_id n) {
  const shape_fact& x = cx.in_shape(n, 0);
  const content_fact& target = cx.in_content(n, 1);
  if (!x.known || !target.known || target.real) return;
  shape_fact t{true, {}};
  for (std::size_t i = 0; i < target.ints.size(); ++i) {
    if (is_negative_constant(target.ints[i])) return cx.cannot_run();  // no dim is negative
    t.dims.push_back(target.ints[i].known() ? target.ints[i] : cx.fresh(cx.out(n), i));
  }
  const shape_fact* both[] = {&x, &t};
  shape_fact s = cx.broadcast(both, cx.out(n));
  content_fact c = broadcast_content(cx.in_content(n, 0), x, s);
  cx.set(n, 0, std::move(s), std::move(c));
}

inline void infer_matmul(rule_context& cx, node_id n) {
  const shape_fact& a = cx.in_shape(n, 0);
  const shape_fact& b = cx.in_shape(n, 1);
  if (!a.known || !b.known) return;
  // numpy's matmul: no scalar operand; a vector is a row (a) or a column (b) whose axis the
  // output drops; a's last dim meets b's next to last.
  if (a.rank() == 0 || b.rank() == 0) return cx.cannot_run();
  const sym& ka = a.dims.back();
  const sym& kb = b.dims[b.rank() == 1 ? 0 : b.rank() - 2];
  if (ka.constant() && kb.constant() && equal(ka, kb) != truth::yes) return cx.cannot_run();
  shape_fact batch_a{true, {a.dims.begin(), a.dims.end() - std::min<std::size_t>(a.rank(), 2)}};
  shape_fact batch_b{true, {b.dims.begin(), b.dims.end() - std::min<std::size_t>(b.rank(), 2)}};
  const shape_fact* both[] = {&batch_a, &batch_b};
  shape_fact s = cx.broadcast(both, cx.out(n));
  if (a.rank() >= 2) s.dims.push_back(a.dims[a.rank() - 2]);
  if (b.rank() >= 2) s.dims.push_back(b.dims[b.rank() - 1]);
  cx.set(n, 0, std::move(s));
}

inline void infer_gemm(rule_context& cx, node_id n) {
  const shape_fact& a = cx.in_shape(n, 0);
  const shape_fact& b = cx.in_shape(n, 1);
  if (!a.known || !b.known || a.rank() != 2 || b.rank() != 2) return;
  const bool ta = cx.g.attribute_int(n, "transA").value_or(0) != 0;
  const bool tb = cx.g.attribute_int(n, "transB").value_or(0) != 0;
  cx.set(n, 0, {true, {a.dims[ta ? 1 : 0], b.dims[tb ? 0 : 1]}});
}

// Einsum in explicit form ("bhqd,bhkd->bhqk"): each output letter takes the dim it labels in
// the inputs. Implicit outputs and ellipses are left unknown.
inline void infer_einsum(rule_context& cx, node_id n) {
  const onnx::AttributeProto* eq = cx.g.attribute(n, "equation").attribute;
  if (eq == nullptr) return;
  std::string text;
  for (char ch : eq->s())
    if (ch != ' ') text += ch;
  const auto arrow = text.find("->");
  if (arrow == std::string::npos || text.find("...") != std::string::npos) return;
  std::unordered_map<char, sym> dims;
  std::size_t slot = 0, start = 0;
  const std::string operands = text.substr(0, arrow);
  while (start <= operands.size()) {
    const auto comma = operands.find(',', start);
    const std::string labels =
        operands.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const shape_fact& x = cx.in_shape(n, slot++);
    if (!x.known || x.rank() != labels.size()) return;
    for (std::size_t i = 0; i < labels.size(); ++i) {
      auto [it, fresh_label] = dims.try_emplace(labels[i], x.dims[i]);
      if (!fresh_label && it->second.is_constant(1)) it->second = x.dims[i];
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (slot != cx.g.inputs(n).size()) return cx.cannot_run();  // one term per input
  shape_fact s{true, {}};
  for (char label : text.substr(arrow + 2)) {
    const auto it = dims.find(label);
    if (it == dims.end()) return;
    s.dims.push_back(it->second);
  }
  cx.set(n, 0, std::move(s));
}

// This family's rules, and which answers op (none when the family has no rule for it).
enum class math_rule : std::uint8_t {
  none,
  unary,
  elementwise,
  expand,
  matmul,
  gemm,
  einsum,
  cumsum
};
inline math_rule math_rule_for(std::string_view op) {
  if (in(op, {"Neg",
              "Abs",
              "Sqrt",
              "Reciprocal",
              "Exp",
              "Log",
              "Erf",
              "Tanh",
              "Sigmoid",
              "Relu",
              "Gelu",
              "FastGelu",
              "QuickGelu",
              "Sin",
              "Cos",
              "Floor",
              "Ceil",
              "Round",
              "Sign",
              "Not",
              "Clip",
              "LeakyRelu",
              "Softplus",
              "Softsign",
              "Mish",
              "Elu",
              "Selu",
              "Celu",
              "HardSigmoid",
              "HardSwish",
              "ThresholdedRelu",
              "Softmax",
              "LogSoftmax"}))
    return math_rule::unary;
  if (in(op, {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod", "Sum", "Equal", "Less",
              "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor", "BitwiseAnd",
              "BitwiseOr"}))
    return math_rule::elementwise;
  if (op == "Expand") return math_rule::expand;
  if (op == "MatMul") return math_rule::matmul;
  if (op == "Gemm") return math_rule::gemm;
  if (op == "Einsum") return math_rule::einsum;
  if (op == "CumSum") return math_rule::cumsum;
  return math_rule::none;
}
inline void run_math_rule(rule_context& cx, node_id n, math_rule rule) {
  switch (rule) {
    case math_rule::none:
      return;
    case math_rule::unary:
      return infer_unary(cx, n, cx.g.op_type(n));
    case math_rule::elementwise:
      return infer_elementwise(cx, n, cx.g.op_type(n));
    case math_rule::expand:
      return infer_expand(cx, n);
    case math_rule::matmul:
      return infer_matmul(cx, n);
    case math_rule::gemm:
      return infer_gemm(cx, n);
    case math_rule::einsum:
      return infer_einsum(cx, n);
    case math_rule::cumsum:
      return cx.set(n, 0, cx.in_shape(n, 0));
  }
}

}  // namespace fusekit::facts_detail
