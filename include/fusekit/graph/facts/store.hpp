// The facts of one graph and the queries on them: facts.hpp says what the facts are. What builds
// them is elsewhere in this folder: the forward pass (pass.hpp) runs the rules of each op family
// (rules/), ONNX's rule for what those leave open, and the checks of schema_check.hpp; the algebra
// of dims is algebra.hpp, the explanations of unknown dims explain.hpp.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fusekit/graph/facts/algebra.hpp"
#include "fusekit/graph/facts/schema_check.hpp"
#include "fusekit/graph/graph.hpp"
#include "fusekit/graph/shape_fact.hpp"
#include "fusekit/graph/sym.hpp"
#include "fusekit/graph/tensor.hpp"

namespace fusekit {

namespace facts_detail {
class rule_context;
class explanation;

// Which of fusekit's own rules answers an op (pass.hpp): its family, and the family's rule.
struct rule_choice {
  enum family_t : std::uint8_t { none, generator, math, tensor, reduction, nn } family = none;
  std::uint8_t rule = 0;
};
}  // namespace facts_detail

class facts {
 public:
  // Tensors larger than this are not folded: masks and weights are not what facts are about.
  static constexpr std::size_t max_elements = 64;

  // The facts of g, built in one forward pass (pass.hpp).
  explicit facts(const graph& g);

  facts(const facts&) = delete;
  facts& operator=(const facts&) = delete;

  const shape_fact& shape(value_id v) const {
    static const shape_fact unknown{};
    return v < shapes_.size() ? shapes_[v] : unknown;
  }
  const content_fact& content(value_id v) const {
    static const content_fact unknown{};
    return v < content_at_.size() && content_at_[v] != none ? contents_[content_at_[v]] : unknown;
  }
  std::optional<std::size_t> rank(value_id v) const {
    const shape_fact& s = shape(v);
    return s.known ? std::optional(s.rank()) : std::nullopt;
  }
  // Dim i of a against dim j of b (negative indices count from the end).
  truth same_dim(value_id a, int i, value_id b, int j) const {
    const sym* x = dim_of(a, i);
    const sym* y = dim_of(b, j);
    return x && y ? equal(*x, *y) : truth::unknown;
  }
  const sym* dim_of(value_id v, int i) const {
    const shape_fact& s = shape(v);
    if (!s.known) return nullptr;
    const int r = int(s.rank());
    if (i < 0) i += r;
    return i >= 0 && i < r ? &s.dims[std::size_t(i)] : nullptr;
  }
  // The one element of a folded scalar (any rank, one element).
  std::optional<double> real_scalar(value_id v) const {
    const content_fact& c = content(v);
    if (!c.known || c.size() != 1) return std::nullopt;
    if (c.real) return c.reals[0];
    if (auto k = c.ints[0].constant()) return double(*k);
    return std::nullopt;
  }
  // Every element of an integer value, where each is proven a number (a shape's, an axes
  // input's, a Slice's bounds): the form a rule reads an operand's ints in.
  std::optional<std::vector<std::int64_t>> ints(value_id v) const {
    const content_fact& c = content(v);
    if (!c.known || c.real) return std::nullopt;
    std::vector<std::int64_t> out;
    out.reserve(c.ints.size());
    for (const sym& e : c.ints) {
      const auto k = e.constant();
      if (!k) return std::nullopt;
      out.push_back(*k);
    }
    return out;
  }

  std::string text(const sym& s) const { return atoms_->text(s); }
  // "[2, S, 64]", "[2, ?, dim 1 of 'x']", "unknown rank".
  std::string shape_text(value_id v) const {
    const shape_fact& s = shape(v);
    if (!s.known) return "unknown rank";
    std::string out = "[";
    for (std::size_t i = 0; i < s.rank(); ++i) out += (i ? ", " : "") + text(s.dims[i]);
    return out + "]";
  }
  // Declarations that contradict what the ops imply, one line each.
  std::span<const std::string> contradictions() const { return contradictions_; }
  // The nodes proven unable to run (dims that do not broadcast, a perm that is no permutation):
  // their outputs stay unknown, and the graph is no model a runtime loads and runs.
  std::span<const node_id> cannot_run() const { return cannot_run_; }

  // Whether v is the same on every run, whatever the model's inputs: a constant, a value whose
  // elements the facts hold, or what a deterministic ai.onnx op computes from such values alone.
  // Where it is larger than the facts hold, an evaluator can still compute it (a shifted
  // window's attention mask, built from constants by ScatterND, Slice, Equal and Where).
  bool fixed(value_id v) const { return v < fixed_.size() && fixed_[v]; }

  // Whether s is a number or an expression of dims the model names (no dim nothing names).
  bool is_named(const sym& s) const { return atoms_->is_named(s); }

  // Where the proof of v's shape broke: the first node on the path back from v whose output the
  // oracle could not know, and why. Empty when the rank is known (explain.hpp).
  std::string why_unknown(value_id v) const;
  // Where the proof of dim i of v broke; empty when the dim is a number or named.
  std::string why_unknown(value_id v, int i) const;

 private:
  friend class facts_detail::rule_context;
  friend class facts_detail::explanation;
  friend const facts& facts_of(const graph& g);

  const graph& g_;
  const facts* parent_ = nullptr;
  std::unique_ptr<facts_detail::atom_table> owned_atoms_;
  facts_detail::atom_table* atoms_;
  std::vector<shape_fact> shapes_;
  // Most values have no known content: each that has one is kept once, where content_at_ says.
  static constexpr std::uint32_t none = UINT32_MAX;
  std::vector<std::uint32_t> content_at_;
  std::vector<content_fact> contents_;
  std::vector<std::string> contradictions_;
  std::vector<node_id> cannot_run_;
  std::vector<bool> fixed_;
  facts_detail::schema_check schemas_;
  // The own rule of each op id the graph uses, looked up on its first node.
  std::vector<std::optional<facts_detail::rule_choice>> rules_;

  // A dim nothing names: equal to itself, and proven equal to nothing else.
  sym fresh(value_id v, std::size_t i) { return atoms_->fresh(g_, v, i); }
  shape_fact unknown_dims(value_id v, std::size_t rank) {
    shape_fact s{true, {}};
    for (std::size_t i = 0; i < rank; ++i) s.dims.push_back(fresh(v, i));
    return s;
  }

  bool computes_from_fixed(node_id n) const;

  // ---- values with no producer: graph inputs, initializers, outer-scope values
  void seed(value_id v) {
    if (g_.is_outer_scope(v) && parent_ != nullptr) {
      const auto [where, id] = g_.definition(v);
      const facts& outer = facts_of(*where);
      shapes_[v] = outer.shape(id);
      set_content(v, outer.content(id));
      return;
    }
    // An initializer that is also a graph input may be overridden: only its declaration holds.
    if (const onnx::TensorProto* t = g_.constant_tensor(v)) {
      shapes_[v].known = true;
      for (std::int64_t d : t->dims()) shapes_[v].dims.push_back(sym::constant(d));
      set_content(v, read(*t));
      return;
    }
    shapes_[v] = declared(v);
  }
  // A small integer vector whose length is known holds that many elements, each unknown until
  // proven: a Concat or Gather of it still folds the elements that are known (a Reshape's target
  // built from a run-time batch and constant head sizes).
  void hold_elements(value_id v) {
    if (content_at_[v] != none || !is_integer(g_.type(v))) return;
    const shape_fact& s = shapes_[v];
    if (!s.known || s.rank() > 1) return;
    const auto length = s.rank() == 0 ? std::optional<std::int64_t>(1) : s.dims[0].constant();
    if (!length || *length < 0 || std::size_t(*length) > max_elements) return;
    set_content(v, {true, false, std::vector<sym>(std::size_t(*length)), {}});
  }
  // Content is kept only with a shape it fits: rules index elements by the dims' strides, and a
  // count the dims contradict (an emptied Constant reshaped to [2, 3]) would be read past its end.
  void set_content(value_id v, content_fact c) {
    if (!c.known || !fits(shapes_[v], c.size())) {
      content_at_[v] = none;
      return;
    }
    content_at_[v] = std::uint32_t(contents_.size());
    contents_.push_back(std::move(c));
  }
  // A declaration may have turned a dim the content was kept under into a number.
  void keep_fitting_content(value_id v) {
    if (content_at_[v] != none && !fits(shapes_[v], contents_[content_at_[v]].size()))
      content_at_[v] = none;
  }
  // Whether `count` elements can be a tensor of shape s: no negative dim, and the dims' product
  // where every dim is a number (a symbolic dim may be any size, 0 included).
  static bool fits(const shape_fact& s, std::size_t count) {
    if (!s.known) return true;
    bool symbolic = false, empty = false;
    std::size_t product = 1;  // capped at count + 1: only equality with count matters
    for (const sym& d : s.dims) {
      const auto k = d.constant();
      if (!k) {
        symbolic = true;
      } else if (*k < 0) {
        return false;
      } else if (*k == 0) {
        empty = true;
      } else {
        const std::uint64_t size = std::uint64_t(*k);
        product = product > count / size ? count + 1 : product * std::size_t(size);
      }
    }
    if (empty) return count == 0;
    return symbolic || product == count;
  }
  content_fact read(const onnx::TensorProto& t) const {
    content_fact c;
    const dtype type = static_cast<dtype>(t.data_type());
    try {
      const std::int64_t n = element_count(t);
      if (n < 0 || n > std::int64_t(max_elements) || !reads_as_numbers(type)) return c;
      const tensor_values values(t, g_.directory());
      c.real = is_float(type);
      for (std::int64_t i = 0; i < values.size(); ++i) {
        if (c.real)
          c.reals.push_back(values.as_double(i));
        else
          c.ints.push_back(sym::constant(values.as_int64(i)));
      }
      c.known = true;
    } catch (const error&) {
      c = {};  // unreadable data is unknown content, not a crash
    }
    return c;
  }

  // The shape the model declares for v (value_info, input, output), dims as facts.
  shape_fact declared(value_id v) {
    const tensor_shape& d = g_.shape(v);
    shape_fact s;
    if (!d.known) return s;
    s.known = true;
    for (std::size_t i = 0; i < d.rank(); ++i) {
      const dim& x = d.dims[i];
      s.dims.push_back(x.is_static()     ? sym::constant(x.size)
                       : x.is_symbolic() ? atoms_->declared_dim(x.symbol)
                                         : fresh(v, i));
    }
    return s;
  }

  // Inferred and declared shapes meet: declarations fill what inference left open; a
  // contradiction makes the shape unknown and is recorded.
  void reconcile(value_id v) {
    const tensor_shape& d = g_.shape(v);
    if (!d.known) return;
    shape_fact& s = shapes_[v];
    if (!s.known) {
      s = declared(v);
      return;
    }
    auto contradiction = [&](const std::string& what) {
      // Appended piece by piece: g++ 12 -O3 misreads "'" + string (-Wrestrict).
      std::string line = "'";
      line += g_.name(v);
      line += "' is declared " + what + " but " + g_.describe(g_.producer(v)) + " makes it " +
              shape_text(v);
      contradictions_.push_back(std::move(line));
      s = {};
    };
    if (d.rank() != s.rank()) return contradiction("with rank " + std::to_string(d.rank()));
    for (std::size_t i = 0; i < d.rank(); ++i) {
      const dim& x = d.dims[i];
      if (x.is_static()) {
        const truth t = equal(s.dims[i], sym::constant(x.size));
        if (t == truth::no)
          return contradiction("with dim " + std::to_string(i) + " = " + std::to_string(x.size));
        if (t == truth::unknown && atoms_->is_fresh(s.dims[i])) s.dims[i] = sym::constant(x.size);
      } else if (x.is_symbolic() && atoms_->is_fresh(s.dims[i])) {
        s.dims[i] = atoms_->declared_dim(x.symbol);
      }
    }
  }

  // The forward pass (pass.hpp): the node's rule, then ONNX's for what it leaves open.
  void infer(node_id n);
  facts_detail::rule_choice own_rule(node_id n);
  void infer_by_schema(node_id n);
  // n's inputs as ONNX's rule is given them.
  std::vector<schema_input> schema_inputs(node_id n) const;
};

// The facts of g, built on first use and kept with it.
inline const facts& facts_of(const graph& g) {
  if (!g.facts_) g.facts_ = std::make_unique<facts>(g);
  return *g.facts_;
}

}  // namespace fusekit
