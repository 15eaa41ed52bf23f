// Constant folding: a node whose every element the facts prove (graph/facts.hpp) becomes an
// initializer, and what only it read goes with it. What exporters leave of a shape computation
// on static dims, Range and ConstantOfShape of known sizes, a Cast of a constant, arithmetic on
// initializers: a TorchScript Swin keeps thousands of such nodes.
//
//   x [1,3,224,224] ── Shape ── Gather(2) ── Unsqueeze ──┐
//                                    Constant [-1] ── Concat ── y ── Reshape
//   ==>
//   initializer y = [224, -1] ── Reshape
//
// Each node of the chain is its own root; the facts prove every one in the same pass, so the
// whole chain folds at once and the nodes upstream that nothing else reads die with it. The
// facts hold elements of tensors of at most facts::max_elements (64), which is the budget: a
// fold never writes a tensor larger than that, however its inputs were written. Integers are
// folded exactly as the facts compute them, and only where every one is a number that fits the
// output's type; floats as the facts round them to the output's type. A value of a symbolic
// dim (a Shape of a batch axis) is no constant and stays. A graph output stays a node, as the
// eliminations' do (forwardable()): its name must live on.
//
//   W [768, 3072] ── Transpose ── Wᵀ ── MatMul   ==>   initializer Wᵀ [3072, 768] ── MatMul
//
// The views of a constant (constant-view-folding), of any size: a Transpose, Reshape, Unsqueeze
// or Flatten of an initializer or Constant, whose output's shape the facts prove, is the same
// elements in another order or under other dims. A constant larger than the facts' budget is
// folded only where the view is its one reader, so that the model never grows: it goes as the
// view's copy comes. What TorchScript writes for every Linear's weight when it does not fold.
//
// No near misses: a node either folds or computes something only the model's inputs decide.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "fusekit/graph/facts.hpp"
#include "fusekit/graph/model_builder.hpp"
#include "fusekit/graph/permutation.hpp"
#include "fusekit/graph/tensor.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"
#include "selfcheck_inputs.hpp"

namespace fusekit::rules {
using namespace pattern;

namespace folding {

// The dims of v when the facts prove every one a number.
inline std::optional<std::vector<std::int64_t>> static_dims(const facts& f, value_id v) {
  const shape_fact& s = f.shape(v);
  if (!s.known) return std::nullopt;
  std::vector<std::int64_t> out;
  for (const sym& d : s.dims) {
    const auto k = d.constant();
    if (!k || *k < 0) return std::nullopt;
    out.push_back(*k);
  }
  return out;
}

// Whether k is a value of integer (or bool) type t.
inline bool fits(std::int64_t k, dtype t) {
  switch (t) {
    case dtype::boolean:
      return k == 0 || k == 1;
    case dtype::int8:
      return k >= INT8_MIN && k <= INT8_MAX;
    case dtype::uint8:
      return k >= 0 && k <= UINT8_MAX;
    case dtype::int16:
      return k >= INT16_MIN && k <= INT16_MAX;
    case dtype::uint16:
      return k >= 0 && k <= UINT16_MAX;
    case dtype::int32:
      return k >= INT32_MIN && k <= INT32_MAX;
    case dtype::uint32:
      return k >= 0 && k <= std::int64_t(UINT32_MAX);
    case dtype::int64:
      return true;
    case dtype::uint64:
      return k >= 0;
    default:
      return false;
  }
}

// The tensor v holds, where the facts prove its every element and its shape, and its type can
// hold what they prove.
inline std::optional<onnx::TensorProto> folded(const graph& g, value_id v) {
  // Most anchors hold no content: told before any dims are gathered.
  const facts& f = facts_of(g);
  const content_fact& c = f.content(v);
  if (!c.known) return std::nullopt;
  const dtype t = g.type(v);
  const auto dims = static_dims(f, v);
  if (!dims) return std::nullopt;
  std::int64_t count = 1;
  for (std::int64_t d : *dims) count *= d;
  if (std::size_t(count) != c.size()) return std::nullopt;
  if (c.real) {
    if (!is_float(t)) return std::nullopt;
    return build::make_tensor({}, t, *dims, c.reals);
  }
  onnx::TensorProto out;
  out.set_data_type(int(t));
  for (std::int64_t d : *dims) out.add_dims(d);
  std::string raw;
  const std::size_t width = t == dtype::boolean ? 1 : dtype_bits(t) / 8;
  for (const sym& e : c.ints) {
    const auto k = e.constant();
    if (!k || !fits(*k, t)) return std::nullopt;
    // Little-endian, as raw_data is: the low bytes of the two's complement.
    for (std::size_t b = 0; b < width; ++b)
      raw.push_back(char((std::uint64_t(*k) >> (8 * b)) & 0xff));
  }
  out.set_raw_data(std::move(raw));
  return out;
}

inline bool folds(const graph& g, node_id n) {
  for (value_id v : g.outputs(n))
    if (v != no_id && !folded(g, v)) return false;
  return true;
}

template <class P>
constexpr auto root(P node) {
  return node
      .where("its every element proven by the facts, of a static shape its type holds", folds)
      .forwardable();
}

inline truth held(const facts& f, value_id v) {
  return f.content(v).known ? truth::yes : truth::unknown;
}

// An input whose elements the facts hold: what a fold reads.
inline constexpr auto known = any().proven_value("held by the facts", held);

// Whether a view of a constant can be written as one, read without its elements: a constant in
// the model's own file (a copy of one in an external file would point there), no larger than
// the budget unless the view is its one reader, of dims the facts prove; a Transpose's elements
// stored as raw bytes, or in a field every element of which reads exactly as a double.
inline bool views_a_constant(const graph& g, node_id n) {
  const value_id in = g.input(n, 0), out = g.output(n, 0);
  const onnx::TensorProto* from = g.constant_tensor(in);
  // Most views read no constant: told before any dims are gathered.
  if (from == nullptr || is_external(*from) || g.type(out) != dtype(from->data_type()))
    return false;
  const auto dims = static_dims(facts_of(g), out);
  if (!dims) return false;
  const std::int64_t count = element_count(*from);
  std::int64_t written = 1;
  for (std::int64_t d : *dims) written *= d;
  if (count != written || (count > std::int64_t(facts::max_elements) &&
                           (g.consumers(in).size() != 1 || g.is_graph_output(in))))
    return false;
  if (g.op_type(n) != "Transpose") return true;
  const auto perm = transpose_perm(g, n);
  const dtype t = dtype(from->data_type());
  const std::size_t width = t == dtype::boolean ? 1 : dtype_bits(t) / 8;
  const bool exact_as_double = t != dtype::int64 && t != dtype::uint64 && reads_as_numbers(t);
  return perm && perm->size() == std::size_t(from->dims_size()) && width > 0 &&
         (from->has_raw_data() ? from->raw_data().size() == std::size_t(count) * width
                               : exact_as_double);
}

// The tensor a view of a constant holds (views_a_constant): its elements under the output's
// dims, reordered by a Transpose's perm.
inline onnx::TensorProto viewed(const graph& g, node_id n) {
  const onnx::TensorProto& from = *g.constant_tensor(g.input(n, 0));
  const std::vector<std::int64_t> dims = *static_dims(facts_of(g), g.output(n, 0));
  if (g.op_type(n) != "Transpose") {
    onnx::TensorProto t = from;
    t.clear_dims();
    for (std::int64_t d : dims) t.add_dims(d);
    return t;
  }
  const permutation perm = *transpose_perm(g, n);
  const std::size_t rank = dims.size();
  std::vector<std::int64_t> in_strides(rank, 1);
  for (std::size_t i = rank; i-- > 1;) in_strides[i - 1] = in_strides[i] * from.dims(int(i));
  // Output element k, at index `at`, reads the input at the index `at` permutes back.
  const std::int64_t count = element_count(from);
  std::vector<std::int64_t> read_at(static_cast<std::size_t>(count));
  std::vector<std::int64_t> at(rank, 0);
  for (std::int64_t& source : read_at) {
    source = 0;
    for (std::size_t i = 0; i < rank; ++i) source += at[i] * in_strides[std::size_t(perm[i])];
    for (std::size_t i = rank; i-- > 0;) {
      if (++at[i] < dims[i]) break;
      at[i] = 0;
    }
  }
  const dtype t = dtype(from.data_type());
  if (!from.has_raw_data()) {
    const tensor_values values(from, g.directory());
    std::vector<double> out(read_at.size());
    for (std::size_t k = 0; k < out.size(); ++k) out[k] = values.as_double(read_at[k]);
    return build::make_tensor({}, t, dims, out);
  }
  const std::size_t width = t == dtype::boolean ? 1 : dtype_bits(t) / 8;
  const std::string& raw = from.raw_data();
  std::string out(raw.size(), '\0');
  for (std::size_t k = 0; k < read_at.size(); ++k)
    std::memcpy(out.data() + k * width, raw.data() + std::size_t(read_at[k]) * width, width);
  onnx::TensorProto result;
  result.set_data_type(from.data_type());
  for (std::int64_t d : dims) result.add_dims(d);
  result.set_raw_data(std::move(out));
  return result;
}

}  // namespace folding

struct constant_folding {
  static constexpr std::string_view name = "constant-folding";
  // Below every fusion, as the eliminations are: a fusion that reads the chain itself takes it.
  static constexpr int priority = -1;
  // The ops whose elements the facts compute (graph/facts/rules). An input is `known` where a
  // tensor of any shape and float type runs; one the op reads as axes, bounds, sizes or integers
  // is a capture that the sources below write (the root's check decides either way).
  static constexpr auto pattern = any_of(
      // shapes and their arithmetic
      folding::root(op<"Shape">(any())),
      folding::root(op<"Gather">(capture<"data">, capture<"indices">)),
      folding::root(op<"Unsqueeze">(folding::known, capture<"axes">)),
      folding::root(op<"Squeeze">(capture<"squeezed">, maybe(capture<"axes">))),
      folding::root(op<"Concat">(all<"xs">(folding::known))),
      folding::root(op<"Slice">(capture<"data">, capture<"starts">, capture<"ends">,
                                maybe(capture<"axes">), maybe(capture<"steps">))),
      folding::root(op<"Reshape">(folding::known, capture<"shape">)),
      folding::root(op<"Transpose">(folding::known)),
      folding::root(op<"Expand">(folding::known, capture<"dims">)),
      // generators
      folding::root(op<"Range">(capture<"start">, capture<"limit">, capture<"delta">)),
      folding::root(op<"ConstantOfShape">(capture<"dims">)),
      // casts and selections
      folding::root(op<"Cast">(folding::known)),
      folding::root(op<"CastLike">(folding::known, any())),
      folding::root(op<"Where">(folding::known, folding::known, folding::known)),
      // arithmetic and comparisons: integers (shapes) symbolically, floats as numbers
      folding::root(op<"Neg">(folding::known)), folding::root(op<"Sqrt">(folding::known)),
      folding::root(op<"Reciprocal">(folding::known)),
      folding::root(op<"Add">(folding::known, folding::known)),
      folding::root(op<"Sub">(folding::known, folding::known)),
      folding::root(op<"Mul">(folding::known, folding::known)),
      folding::root(op<"Div">(folding::known, folding::known)),
      folding::root(op<"Pow">(folding::known, folding::known)),
      folding::root(op<"Mod">(capture<"i">, capture<"j">)),
      folding::root(op<"Equal">(capture<"i">, capture<"j">)));
  static constexpr auto sources =
      pattern::sources(source<"axes">(written<selfcheck_inputs::int64_vector<0>>),
                       source<"squeezed">(written<selfcheck_inputs::vector_of<1>>),
                       source<"data">(written<selfcheck_inputs::vector_of<3>>),
                       source<"indices">(written<selfcheck_inputs::int64_scalar<1>>),
                       source<"starts">(written<selfcheck_inputs::int64_vector<0>>),
                       source<"ends">(written<selfcheck_inputs::int64_vector<1>>),
                       source<"steps">(written<selfcheck_inputs::int64_vector<1>>),
                       source<"shape">(written<selfcheck_inputs::int64_vector<-1>>),
                       source<"dims">(written<selfcheck_inputs::int64_vector<3>>),
                       source<"i">(written<selfcheck_inputs::int64_vector<7>>),
                       source<"j">(written<selfcheck_inputs::int64_vector<3>>),
                       source<"start">(written<selfcheck_inputs::int64_scalar<0>>),
                       source<"limit">(written<selfcheck_inputs::int64_scalar<6>>),
                       source<"delta">(written<selfcheck_inputs::int64_scalar<2>>));

  static bool resembles(const graph&, node_id) { return false; }
  static void emit(const graph& g, const auto& m, rewrite::emitter& e) {
    e.replace_root(e.constant(*folding::folded(g, g.output(m.root(), 0))));
  }
};

struct constant_view_folding {
  static constexpr std::string_view name = "constant-view-folding";
  static constexpr int priority = -1;
  static constexpr auto view = [](auto node) {
    return node
        .where("a view of the constant whose output's shape the facts prove",
               folding::views_a_constant)
        .forwardable();
  };
  static constexpr auto pattern = any_of(
      view(op<"Transpose">(constant<"c">)), view(op<"Reshape">(constant<"c">, capture<"shape">)),
      view(op<"Unsqueeze">(constant<"c">, capture<"axes">)), view(op<"Flatten">(constant<"c">)));
  static constexpr auto sources =
      pattern::sources(source<"shape">(written<selfcheck_inputs::int64_vector<-1>>),
                       source<"axes">(written<selfcheck_inputs::int64_vector<0>>));

  static bool resembles(const graph&, node_id) { return false; }
  static void emit(const graph& g, const auto& m, rewrite::emitter& e) {
    e.replace_root(e.constant(folding::viewed(g, m.root())));
  }
};

}  // namespace fusekit::rules
