// What a per-op rule sees of the facts being built: the graph, what is known of a node's inputs,
// and the calls that state what it proves of its outputs. A rule is a free function of its op
// family (rules/*.hpp) taking the context, a reference and a flag made on the stack per node: no
// allocation, no virtual call. Below it, the helpers more than one family uses.
#pragma once

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "fusekit/graph/facts/algebra.hpp"
#include "fusekit/graph/facts/store.hpp"
#include "fusekit/graph/graph.hpp"
#include "fusekit/graph/shape_fact.hpp"
#include "fusekit/graph/sym.hpp"
#include "fusekit/graph/tensor.hpp"

namespace fusekit::facts_detail {

class rule_context {
 public:
  explicit rule_context(facts& f) : g(f.g_), f_(f) {}

  const graph& g;

  const shape_fact& shape(value_id v) const { return f_.shape(v); }
  const content_fact& content(value_id v) const { return f_.content(v); }
  const shape_fact& in_shape(node_id n, std::size_t slot) const { return shape(g.input(n, slot)); }
  const content_fact& in_content(node_id n, std::size_t slot) const {
    return content(g.input(n, slot));
  }
  value_id out(node_id n) const { return g.output(n, 0); }
  std::optional<std::vector<std::int64_t>> constant_ints(node_id n, std::size_t slot) const {
    return f_.ints(g.input(n, slot));
  }
  // Ints from an input (newer opsets) or else from an attribute (older ones).
  std::optional<std::vector<std::int64_t>> ints_of(node_id n, std::size_t slot,
                                                   std::string_view attribute) const {
    if (g.input(n, slot) != no_id) return constant_ints(n, slot);
    if (auto a = g.attribute_ints(n, attribute))
      return std::vector<std::int64_t>(a->begin(), a->end());
    return std::nullopt;
  }
  // Starts and ends from an input (opset 10 on: elements may be symbolic or unknown) or from
  // the attribute (opset 1).
  std::optional<std::vector<sym>> bounds_of(node_id n, std::size_t slot,
                                            std::string_view attribute) const {
    if (const value_id v = g.input(n, slot); v != no_id) {
      const content_fact& c = in_content(n, slot);
      if (!c.known || c.real) return std::nullopt;
      std::vector<sym> out = c.ints;
      // The lowest int64 (the dynamo exporter's "from the start" of a negative-step-free slice)
      // is no dim; for a bound any value below -size means the same, so it is read one above.
      if (const onnx::TensorProto* t = g.constant_tensor(v)) try {
          const tensor_values values(*t, g.directory());
          for (std::size_t i = 0; i < out.size() && std::int64_t(i) < values.size(); ++i)
            if (!out[i].known() &&
                values.as_int64(std::int64_t(i)) == std::numeric_limits<std::int64_t>::min())
              out[i] = sym::constant(std::numeric_limits<std::int64_t>::min() + 1);
        } catch (const error&) {
        }
      return out;
    }
    if (auto a = g.attribute_ints(n, attribute)) {
      std::vector<sym> out;
      for (std::int64_t k : *a) out.push_back(sym::constant(k));
      return out;
    }
    return std::nullopt;
  }
  content_fact read(const onnx::TensorProto& t) const { return f_.read(t); }

  // What the rule proves of output `slot`: its shape and, for small tensors, its elements.
  void set(node_id n, std::size_t slot, shape_fact s, content_fact c = {}) {
    const value_id out = g.output(n, slot);
    if (out == no_id || cannot_run_) return;
    if (c.known && c.size() > facts::max_elements) c = {};
    f_.shapes_[out] = std::move(s);
    f_.set_content(out, std::move(c));
  }
  // An output whose rank is known but whose dims are not.
  shape_fact opaque(node_id n, std::size_t slot, std::size_t rank) {
    const value_id out = g.output(n, slot);
    return out == no_id ? shape_fact{} : f_.unknown_dims(out, rank);
  }
  sym fresh(value_id v, std::size_t i) { return f_.fresh(v, i); }
  atom_table& atoms() { return *f_.atoms_; }

  // Numpy broadcasting of one dim pair: a 1 takes the other; equal dims stay; two other
  // numbers cannot broadcast; anything else is a dim of the output's own.
  sym broadcast_dim(const sym& a, const sym& b, value_id out, std::size_t i) {
    if (a.is_constant(1)) return b;
    if (b.is_constant(1)) return a;
    if (equal(a, b) == truth::yes) return a;
    if (a.constant() && b.constant()) cannot_run();
    // min(x, y) against x: equal when x ≤ y; else the min is y ≠ x and must be 1 for the model
    // to run. Either way the output has x.
    if (atoms().is_minimum_with(a, b)) return b;
    if (atoms().is_minimum_with(b, a)) return a;
    return fresh(out, i);
  }
  shape_fact broadcast(std::span<const shape_fact* const> shapes, value_id out) {
    std::size_t rank = 0;
    for (const shape_fact* s : shapes) {
      if (!s->known) return {};
      rank = std::max(rank, s->rank());
    }
    shape_fact r{true, std::vector<sym>(rank, sym::constant(1))};
    for (const shape_fact* s : shapes)
      for (std::size_t i = 0; i < s->rank(); ++i) {
        const std::size_t k = rank - s->rank() + i;
        r.dims[k] = broadcast_dim(r.dims[k], s->dims[i], out, k);
      }
    return r;
  }

  // The node cannot run (a perm that is no permutation, sizes that do not add up): its outputs
  // stay unknown, whatever ONNX's rule, which checks less, would make of them.
  void cannot_run() { cannot_run_ = true; }
  bool proved_cannot_run() const { return cannot_run_; }

 private:
  facts& f_;
  bool cannot_run_ = false;
};

inline bool in(std::string_view op, std::initializer_list<std::string_view> ops) {
  for (std::string_view o : ops)
    if (o == op) return true;
  return false;
}

inline std::optional<std::size_t> axis_index(std::int64_t axis, std::size_t rank) {
  if (axis < 0) axis += std::int64_t(rank);
  if (axis < 0 || axis >= std::int64_t(rank)) return std::nullopt;
  return std::size_t(axis);
}

inline sym product(std::span<const sym> dims) {
  sym p = sym::constant(1);
  for (const sym& d : dims) p = p * d;
  return p;
}

inline content_fact as_reals(const content_fact& x) {
  content_fact c{x.known, true, {}, {}};
  for (const sym& e : x.ints) {
    const auto k = e.constant();
    if (!k) return {};
    c.reals.push_back(double(*k));
  }
  return c;
}
inline void round_all(content_fact& c, dtype t) {
  for (double& e : c.reals) e = rounded_to(e, t);
}

// How many elements an element-wise result of shape s folds to: s all numbers and small, and
// each input folded, a scalar or of that many elements (what shape arithmetic does).
inline std::optional<std::size_t> foldable_count(const rule_context& cx, node_id n,
                                                 const shape_fact& s) {
  if (!s.known) return std::nullopt;
  std::size_t size = 1;
  for (const sym& d : s.dims) {
    const auto k = d.constant();
    if (!k || *k < 0 || std::size_t(*k) > facts::max_elements) return std::nullopt;
    size *= std::size_t(*k);
    if (size > facts::max_elements) return std::nullopt;
  }
  for (std::size_t i = 0; i < cx.g.inputs(n).size(); ++i) {
    const content_fact& c = cx.in_content(n, i);
    if (!c.known || (c.size() != 1 && c.size() != size)) return std::nullopt;
  }
  return size;
}

}  // namespace fusekit::facts_detail
