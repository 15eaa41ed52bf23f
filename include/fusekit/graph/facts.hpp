// What the model does not state but its ops imply: every value's rank and dims (static, symbolic,
// or unknown), and the contents of small integer and float tensors (a Shape, the Slice of it,
// the √ of its last entry), inferred forward in one pass in topological order: linear in the
// graph, no recursion, no depth limit.
//
// Facts are proven, never assumed. A dim nothing names gets an atom of its own, so it is equal to
// itself wherever it travels and to nothing else; a dim that cannot be followed is unknown.
// Declared shapes (inputs, outputs, value_info) take part; a declaration that contradicts what
// the ops imply is recorded in contradictions() and the value's shape becomes unknown rather than
// either side being trusted.
//
// `facts_of(g)` builds the facts of a graph on first use and keeps them with it; like the index,
// they describe the graph as it was when they were built.
#pragma once

#include <onnx/defs/schema.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fusekit/graph/contributed_op_schemas.hpp"
#include "fusekit/graph/graph.hpp"
#include "fusekit/graph/schema_inference.hpp"
#include "fusekit/graph/shape_fact.hpp"
#include "fusekit/graph/sym.hpp"
#include "fusekit/graph/tensor.hpp"

namespace fusekit {

class facts {
 public:
  // Tensors larger than this are not folded: masks and weights are not what facts are about.
  static constexpr std::size_t max_elements = 64;

  explicit facts(const graph& g) : g_(g) {
    if (g.parent() == nullptr) {
      owned_atoms_ = std::make_unique<atom_table>();
      atoms_ = owned_atoms_.get();
    } else {
      parent_ = &facts_of(*g.parent());
      atoms_ = parent_->atoms_;
    }
    shapes_.resize(g.value_count());
    content_at_.assign(g.value_count(), none);
    for (value_id v = 0; v < g.value_count(); ++v)
      if (g.producer(v) == no_id) {
        seed(v);
        hold_elements(v);
      }
    for (node_id n : g.topological_order()) {
      infer(n);
      for (value_id out : g.outputs(n))
        if (out != no_id) {
          reconcile(out);
          keep_fitting_content(out);
          hold_elements(out);
        }
    }
  }

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

  std::string text(const sym& s) const {
    return s.text([&](atom_id a) { return atoms_->names[a]; });
  }
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

  // Whether s is a number or an expression of dims the model names (no dim nothing names).
  bool is_named(const sym& s) const {
    if (!s.known()) return false;
    if (s.constant()) return true;
    if (const auto a = s.lone_atom()) return atoms_->born[*a].where == nullptr;
    for (const sym::term& t : s.terms())
      for (const sym::factor& x : t.factors)
        if (atoms_->born[x.atom].where != nullptr) return false;
    return true;
  }

  // Where the proof of v's shape broke: the first node on the path back from v whose output the
  // oracle could not know, and why. Empty when the rank is known.
  std::string why_unknown(value_id v) const {
    if (shape(v).known) return {};
    return "'" + std::string(g_.name(v)) + "' has unknown rank: " + why_shape(v, max_steps);
  }
  // Where the proof of dim i of v broke; empty when the dim is a number or named.
  std::string why_unknown(value_id v, int i) const {
    if (!shape(v).known) return why_unknown(v);
    const sym* d = dim_of(v, i);
    if (d == nullptr || is_named(*d)) return {};
    std::string out = "dim " + std::to_string(i) + " of '" + std::string(g_.name(v)) + "' is ";
    // A dim nothing names was born where an op could not follow it.
    const auto a = d->lone_atom();
    if (!a) return out + text(*d) + ", which holds a dim nothing names";
    const birth& b = atoms_->born[*a];
    out += "unknown: ";
    if (b.where != &g_) return out + atoms_->names[*a];
    if (b.value != v)
      out += "it is dim " + std::to_string(b.dim) + " of '" + std::string(g_.name(b.value)) + "': ";
    return out + why_dim(b.value, b.dim, max_steps);
  }

 private:
  // How far back an explanation walks before it stops with "…".
  static constexpr int max_steps = 6;

  // Where an atom comes from: a dim the model names (where null), or dim `dim` of `value` in
  // `where`, which an op there could not follow.
  struct birth {
    const graph* where = nullptr;
    value_id value = no_id;
    std::uint32_t dim = 0;
  };
  struct atom_table {
    std::vector<std::string> names;
    std::vector<birth> born;
    std::unordered_map<std::string, atom_id> named;
    std::unordered_map<atom_id, std::pair<sym, sym>> minimum_of;  // the atoms that are a min
  };

  const graph& g_;
  const facts* parent_ = nullptr;
  std::unique_ptr<atom_table> owned_atoms_;
  atom_table* atoms_;
  std::vector<shape_fact> shapes_;
  // Most values have no known content: each that has one is kept once, where content_at_ says.
  static constexpr std::uint32_t none = UINT32_MAX;
  std::vector<std::uint32_t> content_at_;
  std::vector<content_fact> contents_;
  std::vector<std::string> contradictions_;
  // The schema of each op id the graph uses, looked up on its first node.
  struct op_schema {
    bool resolved = false;
    const onnx::OpSchema* schema = nullptr;  // null: no schema to hold the node to
    std::vector<std::string_view> required;  // its required attributes
  };
  std::vector<op_schema> schemas_;
  bool cannot_run_ = false;  // of the node being inferred

  friend const facts& facts_of(const graph& g);

  // ---- atoms
  sym named(std::string_view name) {
    auto [it, fresh] = atoms_->named.try_emplace(std::string(name), atom_id(atoms_->names.size()));
    if (fresh) {
      atoms_->names.emplace_back(name);
      atoms_->born.emplace_back();
    }
    return sym::atom(it->second);
  }
  // A dim_param torch.export writes as an expression of others ("s69 + 1", "2*s53"): the
  // exporter's statement of how the dims relate, read as that expression, so that a mask of
  // "s69 + 1" keys is one key longer than a cache of "s69". Only that printed form is read
  // (" + " and " - " between terms, "*" between factors): "seq-len", "batch size", a lone name or
  // number ("2") stay names.
  sym declared_dim(std::string_view text) {
    if (auto e = expression(text)) return *e;
    return named(text);
  }
  std::optional<sym> expression(std::string_view text) {
    auto identifier = [](char c, bool first) {
      return std::isalpha(static_cast<unsigned char>(c)) || c == '_' ||
             (!first && std::isdigit(static_cast<unsigned char>(c)));
    };
    bool an_operator = false;
    sym total = sym::constant(0);
    std::size_t i = 0;
    for (int sign = 1;;) {
      sym product = sym::constant(1);
      for (;;) {
        std::size_t j = i;
        sym factor;
        if (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) {
          while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
          if (j - i > 15) return std::nullopt;
          factor = sym::constant(std::stoll(std::string(text.substr(i, j - i))));
        } else if (j < text.size() && identifier(text[j], true)) {
          while (j < text.size() && identifier(text[j], false)) ++j;
          factor = named(text.substr(i, j - i));
        } else {
          return std::nullopt;
        }
        product = product * factor;
        i = j;
        if (i == text.size() || text[i] != '*') break;
        an_operator = true;
        ++i;
      }
      total = sign > 0 ? total + product : total - product;
      if (i == text.size()) break;
      const std::string_view op = text.substr(i, 3);
      if (op != " + " && op != " - ") return std::nullopt;
      sign = op == " + " ? 1 : -1;
      an_operator = true;
      i += 3;
    }
    if (!an_operator || !total.known()) return std::nullopt;
    return total;
  }
  // max(0, x) of a dim difference that may be negative (x[s:] of a dim d takes max(0, d − s)
  // elements): an atom named for the expression as sympy writes it, like a min's.
  sym at_least_zero(const sym& x) {
    if (is_non_negative(x)) return x;
    if (x.constant()) return sym::constant(0);
    if (!is_named(x) || !sympy_reads_alike(x)) return {};
    return named("Max(0, " + text(x) + ")");
  }
  // Operands without products or powers print alike here and in sympy.
  static bool sympy_reads_alike(const sym& x) {
    for (const sym::term& t : x.terms())
      if (t.factors.size() > 1 || (t.factors.size() == 1 && t.factors[0].power != 1)) return false;
    return true;
  }
  // min(a, b) of two dims, both named or numbers: an atom named for the expression, so that the
  // same min wherever it arises is one dim, with its operands kept for broadcasting.
  sym minimum(const sym& a, const sym& b) {
    if (const auto x = a.constant(), y = b.constant(); x && y)
      return sym::constant(std::min(*x, *y));
    // Named for the expression as sympy reads it: operands without products or powers.
    if (!is_named(a) || !is_named(b) || !sympy_reads_alike(a) || !sympy_reads_alike(b)) return {};
    const std::string ta = text(a), tb = text(b);
    const sym m = named("Min(" + std::min(ta, tb) + ", " + std::max(ta, tb) + ")");
    atoms_->minimum_of.try_emplace(*m.lone_atom(), a, b);
    return m;
  }
  bool is_minimum_with(const sym& m, const sym& x) const {
    const auto a = m.lone_atom();
    if (!a) return false;
    const auto it = atoms_->minimum_of.find(*a);
    return it != atoms_->minimum_of.end() &&
           (equal(it->second.first, x) == truth::yes || equal(it->second.second, x) == truth::yes);
  }
  // Atoms are sizes: a polynomial with no negative coefficient is at least 0.
  static bool is_negative_constant(const sym& s) {
    const auto k = s.constant();
    return k && *k < 0;
  }
  static bool is_non_negative(const sym& s) {
    if (!s.known()) return false;
    if (const auto k = s.constant()) return *k >= 0;
    if (s.lone_atom()) return true;
    for (const sym::term& t : s.terms())
      if (t.coefficient < 0) return false;
    return true;
  }

  // A dim nothing names: equal to itself, and proven equal to nothing else.
  sym fresh(value_id v, std::size_t i) {
    atoms_->names.push_back("dim " + std::to_string(i) + " of '" + std::string(g_.name(v)) + "'");
    atoms_->born.push_back({&g_, v, std::uint32_t(i)});
    return sym::atom(atom_id(atoms_->names.size() - 1));
  }
  shape_fact unknown_dims(value_id v, std::size_t rank) {
    shape_fact s{true, {}};
    for (std::size_t i = 0; i < rank; ++i) s.dims.push_back(fresh(v, i));
    return s;
  }

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
  // Every element is a number or a named dim.
  bool folded(value_id v) const {
    const content_fact& c = content(v);
    if (!c.known) return false;
    for (const sym& e : c.ints)
      if (!e.known()) return false;
    return true;
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
                       : x.is_symbolic() ? declared_dim(x.symbol)
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
        if (t == truth::unknown && is_fresh(s.dims[i])) s.dims[i] = sym::constant(x.size);
      } else if (x.is_symbolic() && is_fresh(s.dims[i])) {
        s.dims[i] = declared_dim(x.symbol);
      }
    }
  }
  bool is_fresh(const sym& s) const {
    const std::optional<atom_id> a = s.lone_atom();
    return a && atoms_->born[*a].where != nullptr;
  }

  // ---- explanations: each step names a node and the input it could not know
  // The inputs whose values decide an op's output shape.
  static bool reads_shape_from(std::string_view op, std::size_t slot) {
    if (op == "ConstantOfShape") return slot == 0;
    if (op == "Range") return slot <= 2;
    if (op == "Slice") return slot >= 1;
    if (op == "Pad" || op == "Resize") return slot >= 1;
    if (in(op, {"Reshape", "Expand", "Tile", "Unsqueeze", "Squeeze", "Split", "TopK", "OneHot",
                "Upsample", "CenterCropPad"}) ||
        op.starts_with("Reduce"))
      return slot == 1;
    return false;
  }
  std::string step(node_id n, std::size_t slot, value_id u, std::string_view what) const {
    return g_.describe(n) + " reads input " + std::to_string(slot) + " '" +
           std::string(g_.name(u)) + "', " + std::string(what);
  }
  std::string origin(value_id v, std::string_view what) const {
    if (g_.is_outer_scope(v))
      return "'" + std::string(g_.name(v)) + "' comes from an enclosing graph";
    if (g_.is_graph_input(v))
      return "graph input '" + std::string(g_.name(v)) + "' " + std::string(what);
    return "'" + std::string(g_.name(v)) + "' has no producer";
  }
  std::string no_rule(node_id n) const {
    const std::string domain(g_.domain(n));
    if (!domain.empty() && domain != "com.microsoft")
      return g_.describe(n) + " is of domain '" + domain + "', whose ops fusekit does not know";
    return g_.describe(n) + " has no shape rule fusekit or ONNX (opsets to " +
           std::to_string(schema_registry_opset()) + ") proves at opset " +
           std::to_string(g_.opset(domain)) + " for these inputs";
  }
  std::string why_shape(value_id v, int steps) const {
    if (steps == 0) return "…";
    const node_id n = g_.producer(v);
    if (n == no_id) return origin(v, "is declared without a shape");
    const auto inputs = g_.inputs(n);
    if (!inputs.empty() && inputs[0] == no_id) return g_.describe(n) + " has no input 0";
    if (std::string flaw = flaw_text(n); !flaw.empty()) return flaw;
    for (std::size_t k = 0; k < inputs.size(); ++k)
      if (inputs[k] != no_id && !shape(inputs[k]).known)
        return step(n, k, inputs[k], "of unknown rank: ") + why_shape(inputs[k], steps - 1);
    for (std::size_t k = 0; k < inputs.size(); ++k)
      if (inputs[k] != no_id && reads_shape_from(g_.op_type(n), k) && !folded(inputs[k]))
        return step(n, k, inputs[k], "whose value is not folded: ") +
               why_content(inputs[k], steps - 1);
    return no_rule(n);
  }
  // How n breaks its schema; empty when it does not.
  std::string flaw_text(node_id n) const {
    const op_schema* s = schema_of(n);
    if (s == nullptr) return {};
    const schema_flaw flaw = flaw_of(n, *s);
    const onnx::NodeProto& node = g_.node(n);
    auto range = [](int low, int high) {
      if (low == high) return std::to_string(low);
      if (high == std::numeric_limits<int>::max()) return "at least " + std::to_string(low);
      return std::to_string(low) + " to " + std::to_string(high);
    };
    const std::string schema = "its schema at opset " + std::to_string(g_.opset(g_.domain(n)));
    switch (flaw.kind) {
      case schema_flaw::well_formed:
        return {};
      case schema_flaw::input_count:
        return g_.describe(n) + " has " + std::to_string(node.input_size()) + " inputs, " + schema +
               " takes " + range(s->schema->min_input(), s->schema->max_input());
      case schema_flaw::missing_input:
        return g_.describe(n) + " omits input " + std::to_string(flaw.slot) + ", which " + schema +
               " requires";
      case schema_flaw::output_count:
        return g_.describe(n) + " has " + std::to_string(node.output_size()) + " outputs, " +
               schema + " gives " + range(s->schema->min_output(), s->schema->max_output());
      case schema_flaw::attribute_type: {
        const onnx::AttributeProto& a = *flaw.attribute;
        return g_.describe(n) + " sets attribute '" + a.name() + "' as " +
               onnx::AttributeProto_AttributeType_Name(a.type()) + ", " + schema + " types it " +
               onnx::AttributeProto_AttributeType_Name(s->schema->attributes().at(a.name()).type);
      }
      case schema_flaw::missing_attribute:
        return g_.describe(n) + " lacks attribute '" + std::string(flaw.name) + "', which " +
               schema + " requires";
    }
    return {};
  }
  std::string why_content(value_id v, int steps) const {
    if (steps == 0) return "…";
    if (!shape(v).known) return why_shape(v, steps);
    const node_id n = g_.producer(v);
    if (n == no_id) return origin(v, "is known only at run time");
    if (std::string flaw = flaw_text(n); !flaw.empty()) return flaw;
    const auto inputs = g_.inputs(n);
    const std::string_view op = g_.op_type(n);
    // A Shape's value is its input's dims, whatever its elements are.
    if (op == "Shape" && !inputs.empty() && inputs[0] != no_id)
      return g_.describe(n) + " reads '" + std::string(g_.name(inputs[0])) + "', whose dims are " +
             shape_text(inputs[0]);
    for (std::size_t k = 0; k < inputs.size(); ++k)
      if (inputs[k] != no_id && !folded(inputs[k]))
        return step(n, k, inputs[k], "whose value is not folded: ") +
               why_content(inputs[k], steps - 1);
    return g_.describe(n) + " is not folded by fusekit (" +
           (shape(v).known ? shape_text(v) : std::string("unknown rank")) + ")";
  }
  std::string why_dim(value_id v, std::uint32_t i, int steps) const {
    if (steps == 0) return "…";
    const node_id n = g_.producer(v);
    if (n == no_id) return origin(v, "declares it without a number or a name");
    if (std::string flaw = flaw_text(n); !flaw.empty()) return flaw;
    const auto inputs = g_.inputs(n);
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      if (inputs[k] == no_id || !reads_shape_from(g_.op_type(n), k)) continue;
      const content_fact& c = content(inputs[k]);
      if (!c.known)
        return step(n, k, inputs[k], "whose value is not folded: ") +
               why_content(inputs[k], steps - 1);
      if (!c.real && i < c.ints.size() && !is_named(c.ints[i]))
        return step(n, k, inputs[k],
                    "whose element " + std::to_string(i) + " is " +
                        (c.ints[i].known() ? text(c.ints[i]) : "not folded") + ": ") +
               why_content(inputs[k], steps - 1);
    }
    return g_.describe(n) + " cannot prove dim " + std::to_string(i) + " of its output " +
           shape_text(v) + " from its inputs " + inputs_text(n);
  }
  std::string inputs_text(node_id n) const {
    std::string out;
    for (value_id u : g_.inputs(n))
      if (u != no_id) out += (out.empty() ? "" : ", ") + shape_text(u);
    return out;
  }

  // ---- what a node's schema guarantees
  // The rules, fusekit's and ONNX's, read a node as its schema describes it. A node that breaks
  // its schema (a Where without its third input, a perm given as one int, a Concat without its
  // axis) gets unknown facts: what it computes, if it runs at all, is no rule's to say. Checked as
  // onnx's checker checks it: the counts of inputs and outputs, every input the schema requires
  // present, each attribute the schema names of the schema's type, every required one set.
  struct schema_flaw {
    enum kind_t : std::uint8_t {
      well_formed,
      input_count,
      missing_input,
      output_count,
      attribute_type,
      missing_attribute
    } kind = well_formed;
    int slot = 0;                                     // of missing_input
    const onnx::AttributeProto* attribute = nullptr;  // of attribute_type
    std::string_view name;                            // of missing_attribute
  };
  // ai.onnx ops of the opsets the linked onnx release knows (a newer opset may have changed the
  // schema) and ONNX Runtime's, as the checker holds them.
  const op_schema& resolve_schema(node_id n) {
    const op_id op = g_.op(n);
    if (op >= schemas_.size()) schemas_.resize(std::max<std::size_t>(op + 1, g_.ops().size()));
    op_schema& s = schemas_[op];
    if (s.resolved) return s;
    s.resolved = true;
    const std::string domain(g_.domain(n));
    const std::int64_t opset = g_.opset(domain);
    if (opset <= 0 || (domain.empty() && opset > schema_registry_opset())) return s;
    if (!domain.empty() && domain != "com.microsoft") return s;
    s.schema = schemas().GetSchema(std::string(g_.op_type(n)), int(opset), domain);
    if (s.schema != nullptr)
      for (const auto& [name, attribute] : s.schema->attributes())
        if (attribute.required) s.required.push_back(name);
    return s;
  }
  // The schema op ids resolved while the facts were built; none for a node they never reached.
  const op_schema* schema_of(node_id n) const {
    const op_id op = g_.op(n);
    return op < schemas_.size() && schemas_[op].resolved ? &schemas_[op] : nullptr;
  }
  schema_flaw flaw_of(node_id n, const op_schema& s) const {
    if (s.schema == nullptr) return {};
    const onnx::OpSchema& schema = *s.schema;
    const onnx::NodeProto& node = g_.node(n);
    if (node.input_size() < schema.min_input() || node.input_size() > schema.max_input())
      return {schema_flaw::input_count, 0, nullptr, {}};
    const auto& formal = schema.inputs();
    for (int i = 0; i < node.input_size() && !formal.empty(); ++i)
      if (node.input(i).empty() &&
          formal[std::min(std::size_t(i), formal.size() - 1)].GetOption() == onnx::OpSchema::Single)
        return {schema_flaw::missing_input, i, nullptr, {}};
    if (node.output_size() < schema.min_output() || node.output_size() > schema.max_output())
      return {schema_flaw::output_count, 0, nullptr, {}};
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (!a.ref_attr_name().empty()) continue;  // a function's attribute, typed where it is called
      const auto it = schema.attributes().find(a.name());
      if (it != schema.attributes().end() && it->second.type != a.type())
        return {schema_flaw::attribute_type, 0, &a, {}};
    }
    for (std::string_view name : s.required) {
      bool set = false;
      for (const onnx::AttributeProto& a : node.attribute()) set = set || a.name() == name;
      if (!set) return {schema_flaw::missing_attribute, 0, nullptr, name};
    }
    return {};
  }

  // ---- inference per op
  const shape_fact& in_shape(node_id n, std::size_t slot) const { return shape(g_.input(n, slot)); }
  const content_fact& in_content(node_id n, std::size_t slot) const {
    return content(g_.input(n, slot));
  }
  std::optional<std::vector<std::int64_t>> constant_ints(node_id n, std::size_t slot) const {
    const content_fact& c = in_content(n, slot);
    if (!c.known || c.real) return std::nullopt;
    std::vector<std::int64_t> out;
    for (const sym& s : c.ints) {
      const auto k = s.constant();
      if (!k) return std::nullopt;
      out.push_back(*k);
    }
    return out;
  }
  // Ints from an input (newer opsets) or else from an attribute (older ones).
  std::optional<std::vector<std::int64_t>> ints_of(node_id n, std::size_t slot,
                                                   std::string_view attribute) const {
    if (g_.input(n, slot) != no_id) return constant_ints(n, slot);
    if (auto a = g_.attribute_ints(n, attribute))
      return std::vector<std::int64_t>(a->begin(), a->end());
    return std::nullopt;
  }
  void set(node_id n, std::size_t slot, shape_fact s, content_fact c = {}) {
    const value_id out = g_.output(n, slot);
    if (out == no_id) return;
    if (c.known && c.size() > max_elements) c = {};
    shapes_[out] = std::move(s);
    set_content(out, std::move(c));
  }
  // An output whose rank is known but whose dims are not.
  shape_fact opaque(node_id n, std::size_t slot, std::size_t rank) {
    const value_id out = g_.output(n, slot);
    return out == no_id ? shape_fact{} : unknown_dims(out, rank);
  }

  static bool in(std::string_view op, std::initializer_list<std::string_view> ops) {
    for (std::string_view o : ops)
      if (o == op) return true;
    return false;
  }

  // No value twice (a perm): quadratic, as ranks are small, and allocation-free.
  static bool distinct(std::span<const std::int64_t> xs) {
    for (std::size_t i = 0; i < xs.size(); ++i)
      for (std::size_t j = 0; j < i; ++j)
        if (xs[i] == xs[j]) return false;
    return true;
  }
  // No axis named twice (-1 and rank - 1 are one axis); one out of range is left to the caller.
  static bool distinct_axes(std::span<const std::int64_t> axes, std::size_t rank) {
    for (std::size_t i = 0; i < axes.size(); ++i)
      for (std::size_t j = 0; j < i; ++j)
        if (const auto a = axis_index(axes[i], rank); a && a == axis_index(axes[j], rank))
          return false;
    return true;
  }
  static std::optional<std::size_t> axis_index(std::int64_t axis, std::size_t rank) {
    if (axis < 0) axis += std::int64_t(rank);
    if (axis < 0 || axis >= std::int64_t(rank)) return std::nullopt;
    return std::size_t(axis);
  }

  // Numpy broadcasting of one dim pair: a 1 takes the other; equal dims stay; anything else is
  // a dim of the output's own.
  sym broadcast_dim(const sym& a, const sym& b, value_id out, std::size_t i) {
    if (a.is_constant(1)) return b;
    if (b.is_constant(1)) return a;
    if (equal(a, b) == truth::yes) return a;
    // min(x, y) against x: equal when x ≤ y; else the min is y ≠ x and must be 1 for the model
    // to run. Either way the output has x.
    if (is_minimum_with(a, b)) return b;
    if (is_minimum_with(b, a)) return a;
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

  void infer(node_id n) {
    if (flaw_of(n, resolve_schema(n)).kind != schema_flaw::well_formed) return;
    cannot_run_ = false;
    infer_own(n);
    if (cannot_run_) return;
    for (value_id v : g_.outputs(n))
      if (v != no_id && !shapes_[v].known) return infer_by_schema(n);
  }

  // A node its rule proves cannot run (a perm that is no permutation, sizes that do not add up):
  // its outputs stay unknown, whatever ONNX's rule, which checks less, would make of them.
  void cannot_run() { cannot_run_ = true; }

  // ONNX's own rule, for the outputs fusekit's rules left unknown.
  void infer_by_schema(node_id n) {
    if (!g_.domain(n).empty()) return;
    std::vector<schema_input> inputs;
    inputs.reserve(g_.inputs(n).size());
    for (value_id v : g_.inputs(n)) {
      if (v == no_id) {
        inputs.emplace_back();
        continue;
      }
      inputs.push_back({true, g_.type(v), &shape(v), &content(v), g_.constant_tensor(v)});
    }
    const auto result = schema_shapes(g_.node(n), g_.opset(""), inputs);
    if (!result) return;
    for (std::size_t k = 0; k < result->size() && k < g_.outputs(n).size(); ++k) {
      const value_id v = g_.output(n, k);
      if (v == no_id || shapes_[v].known || !(*result)[k]) continue;
      shape_fact s{true, std::move(*(*result)[k])};
      for (std::size_t i = 0; i < s.rank(); ++i)
        if (!s.dims[i].known()) s.dims[i] = fresh(v, i);
      shapes_[v] = std::move(s);
    }
  }

  void infer_own(node_id n) {
    if (!g_.domain(n).empty() && g_.domain(n) != "com.microsoft") return;
    const std::string_view op = g_.op_type(n);
    const value_id out = g_.output(n, 0);
    if (out == no_id) return;
    if (op == "Constant") {
      if (const onnx::TensorProto* t = g_.constant_tensor(out)) {
        shape_fact s{true, {}};
        for (std::int64_t d : t->dims()) s.dims.push_back(sym::constant(d));
        set(n, 0, std::move(s), read(*t));
      }
      return;
    }
    if (in(op, {"Cast", "CastLike"})) return infer_cast(n);
    if (in(op, {"Identity",
                "Softmax",
                "LogSoftmax",
                "Neg",
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
                "IsNaN",
                "IsInf",
                "Not",
                "Trilu",
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
                "Dropout",
                "LayerNormalization",
                "RMSNormalization",
                "SimplifiedLayerNormalization",
                "SkipLayerNormalization",
                "SkipSimplifiedLayerNormalization",
                "RotaryEmbedding"}))
      return infer_unary(n, op);
    if (in(op, {"Add",
                "Sub",
                "Mul",
                "Div",
                "Pow",
                "Where",
                "Equal",
                "Less",
                "LessOrEqual",
                "Greater",
                "GreaterOrEqual",
                "And",
                "Or",
                "Xor",
                "Max",
                "Min",
                "Mod",
                "Sum",
                "BitwiseAnd",
                "BitwiseOr"}))
      return infer_elementwise(n, op);
    if (op == "MatMul") return infer_matmul(n);
    if (op == "Gemm") return infer_gemm(n);
    if (op == "Transpose") return infer_transpose(n);
    if (op == "Reshape") return infer_reshape(n);
    if (op == "Concat") return infer_concat(n);
    if (op == "Slice") return infer_slice(n);
    if (op == "Split") return infer_split(n);
    if (op == "Gather") return infer_gather(n);
    if (op == "Expand") return infer_expand(n);
    if (op == "Unsqueeze" || op == "Squeeze") return infer_squeeze(n, op == "Unsqueeze");
    if (op == "Shape") return infer_shape(n);
    if (op == "Range") return infer_range(n);
    if (op == "ConstantOfShape") return infer_constant_of_shape(n);
    if (op == "MultiHeadAttention" || op == "Attention") return infer_attention(n, op);
    if (op.starts_with("Reduce")) return infer_reduce(n);
    if (op == "Einsum") return infer_einsum(n);
    if (op == "Tile") return infer_tile(n);
    if (op == "Flatten") return infer_flatten(n);
    if (op == "CumSum") return set(n, 0, in_shape(n, 0));
    if (op == "Pad") return infer_pad(n);
    if (in(op, {"Conv", "MaxPool", "AveragePool", "LpPool"})) return infer_window(n, op);
  }

  void infer_unary(node_id n, std::string_view op) {
    shape_fact s = in_shape(n, 0);
    content_fact c;
    const content_fact& x = in_content(n, 0);
    if (x.known && in(op, {"Identity", "Neg", "Sqrt", "Reciprocal"})) {
      c = x;
      if (op == "Neg") {
        for (sym& e : c.ints) e = sym::constant(0) - e;
        for (double& e : c.reals) e = -e;
      } else if (op != "Identity") {
        if (!c.real) c = as_reals(c);
        for (double& e : c.reals) e = op == "Sqrt" ? std::sqrt(e) : 1.0 / e;
        round_all(c, g_.type(out(n)));
      }
    }
    set(n, 0, std::move(s), std::move(c));
  }
  value_id out(node_id n) const { return g_.output(n, 0); }

  content_fact as_reals(const content_fact& x) const {
    content_fact c{x.known, true, {}, {}};
    for (const sym& e : x.ints) {
      const auto k = e.constant();
      if (!k) return {};
      c.reals.push_back(double(*k));
    }
    return c;
  }
  static double rounded(double x, dtype t) {
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
  static void round_all(content_fact& c, dtype t) {
    for (double& e : c.reals) e = rounded(e, t);
  }

  // An integer cast to another integer type, where the facts know the result exactly: a number
  // the type holds (a bool the number's truth), a symbolic size only into int64 (a dim past
  // int32's range would wrap, and nothing bounds it).
  static sym integer_cast(const sym& e, dtype to) {
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
  void infer_cast(node_id n) {
    const dtype to = g_.type(out(n));
    const content_fact& x = in_content(n, 0);
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
    set(n, 0, in_shape(n, 0), std::move(c));
  }

  void infer_elementwise(node_id n, std::string_view op) {
    // Where takes three inputs, Sum, Max and Min any number, the others two: checked here too, for
    // the opsets no schema checks.
    const std::size_t arity = g_.inputs(n).size();
    if (op == "Where" ? arity != 3 : arity != 2 && !in(op, {"Sum", "Max", "Min"}))
      return cannot_run();
    std::vector<const shape_fact*> shapes;
    for (value_id v : g_.inputs(n)) shapes.push_back(&shape(v));
    if (shapes.empty()) return;
    shape_fact s = broadcast(shapes, out(n));
    set(n, 0, s, fold_elementwise(n, op, s));
  }

  // Element-wise arithmetic on folded contents: integers symbolically, floats as numbers.
  content_fact fold_elementwise(node_id n, std::string_view op, const shape_fact& s) {
    const std::size_t arity = g_.inputs(n).size();
    // Where picks from inputs 1 and 2, every other op folded here combines two.
    if (!s.known || arity != (op == "Where" ? 3 : 2)) return {};
    std::size_t size = 1;
    for (const sym& d : s.dims) {
      const auto k = d.constant();
      if (!k || *k < 0 || std::size_t(*k) > max_elements) return {};
      size *= std::size_t(*k);
      if (size > max_elements) return {};
    }
    for (std::size_t i = 0; i < arity; ++i) {
      const content_fact& c = in_content(n, i);
      // Only scalars against vectors of the output's size: what shape arithmetic does.
      if (!c.known || (c.size() != 1 && c.size() != size)) return {};
    }
    const bool real = is_float(g_.type(out(n)));
    content_fact r{true, real, {}, {}};
    for (std::size_t k = 0; k < size; ++k) {
      auto element = [&](std::size_t i) -> const content_fact& { return in_content(n, i); };
      auto pick = [&](std::size_t i) { return element(i).size() == 1 ? 0 : k; };
      if (op == "Where") {
        const content_fact& cond = element(0);
        if (cond.real) return {};
        const auto flag = cond.ints[pick(0)].constant();
        if (!flag) return {};
        const content_fact& chosen = element(*flag ? 1 : 2);
        if (chosen.real != real) return {};
        if (real)
          r.reals.push_back(chosen.reals[pick(*flag ? 1 : 2)]);
        else
          r.ints.push_back(chosen.ints[pick(*flag ? 1 : 2)]);
        continue;
      }
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
        r.reals.push_back(rounded(z, g_.type(out(n))));
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

  void infer_matmul(node_id n) {
    const shape_fact& a = in_shape(n, 0);
    const shape_fact& b = in_shape(n, 1);
    // A vector operand drops a dimension; attention never multiplies vectors.
    if (!a.known || !b.known || a.rank() < 2 || b.rank() < 2) return;
    shape_fact batch_a{true, {a.dims.begin(), a.dims.end() - 2}};
    shape_fact batch_b{true, {b.dims.begin(), b.dims.end() - 2}};
    const shape_fact* both[] = {&batch_a, &batch_b};
    shape_fact s = broadcast(both, out(n));
    s.dims.push_back(a.dims[a.rank() - 2]);
    s.dims.push_back(b.dims[b.rank() - 1]);
    set(n, 0, std::move(s));
  }

  void infer_gemm(node_id n) {
    const shape_fact& a = in_shape(n, 0);
    const shape_fact& b = in_shape(n, 1);
    if (!a.known || !b.known || a.rank() != 2 || b.rank() != 2) return;
    const bool ta = g_.attribute_int(n, "transA").value_or(0) != 0;
    const bool tb = g_.attribute_int(n, "transB").value_or(0) != 0;
    set(n, 0, {true, {a.dims[ta ? 1 : 0], b.dims[tb ? 0 : 1]}});
  }

  void infer_transpose(node_id n) {
    const shape_fact& x = in_shape(n, 0);
    if (!x.known) return;
    std::vector<std::int64_t> perm;
    if (auto p = g_.attribute_ints(n, "perm")) {
      perm.assign(p->begin(), p->end());
    } else {
      for (std::size_t i = x.rank(); i-- > 0;) perm.push_back(std::int64_t(i));
    }
    if (perm.size() != x.rank() || !distinct(perm)) return cannot_run();  // each axis once
    shape_fact s{true, {}};
    for (std::int64_t p : perm) {
      if (p < 0 || p >= std::int64_t(x.rank())) return cannot_run();
      s.dims.push_back(x.dims[std::size_t(p)]);
    }
    // A small folded tensor permutes too (TorchScript reverses pad pairs with a Transpose).
    content_fact c;
    const content_fact& data = in_content(n, 0);
    const auto sizes = static_dims(x);
    if (data.known && sizes) {
      const std::vector<std::size_t> in_strides = strides(*sizes);
      std::vector<std::size_t> out_sizes;
      for (std::int64_t p : perm) out_sizes.push_back((*sizes)[std::size_t(p)]);
      c = {true, data.real, {}, {}};
      for_each_index(out_sizes, [&](const std::vector<std::size_t>& at) {
        std::size_t from = 0;
        for (std::size_t i = 0; i < at.size(); ++i)
          from += at[i] * in_strides[std::size_t(perm[i])];
        copy_element(data, from, c);
      });
    }
    set(n, 0, std::move(s), std::move(c));
  }

  // The dims of x when every one is a number.
  static std::optional<std::vector<std::size_t>> static_dims(const shape_fact& x) {
    if (!x.known) return std::nullopt;
    std::vector<std::size_t> out;
    for (const sym& d : x.dims) {
      const auto k = d.constant();
      if (!k || *k < 0) return std::nullopt;
      out.push_back(std::size_t(*k));
    }
    return out;
  }
  static std::vector<std::size_t> strides(const std::vector<std::size_t>& sizes) {
    std::vector<std::size_t> out(sizes.size(), 1);
    for (std::size_t i = sizes.size(); i-- > 1;) out[i - 1] = out[i] * sizes[i];
    return out;
  }
  // Calls f with every index of a tensor of these sizes, row-major.
  template <class F>
  static void for_each_index(const std::vector<std::size_t>& sizes, F f) {
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
  static void copy_element(const content_fact& from, std::size_t i, content_fact& to) {
    if (from.real)
      to.reals.push_back(from.reals[i]);
    else
      to.ints.push_back(from.ints[i]);
  }

  static sym product(std::span<const sym> dims) {
    sym p = sym::constant(1);
    for (const sym& d : dims) p = p * d;
    return p;
  }

  void infer_reshape(node_id n) {
    const shape_fact& x = in_shape(n, 0);
    const content_fact& target = in_content(n, 1);
    const content_fact& data = in_content(n, 0);
    if (!target.known || target.real) {
      // The rank is the length of the shape input, when that is known (a target longer than any
      // folded vector is no rank worth following).
      const shape_fact& t = in_shape(n, 1);
      if (t.known && t.rank() == 1)
        if (auto len = t.dims[0].constant();
            len && *len >= 0 && std::uint64_t(*len) <= max_elements)
          set(n, 0, opaque(n, 0, std::size_t(*len)));
      return;
    }
    const bool allowzero = g_.attribute_int(n, "allowzero").value_or(0) != 0;
    shape_fact s{true, {}};
    std::optional<std::size_t> inferred;
    bool zero = false;
    for (std::size_t i = 0; i < target.ints.size(); ++i) {
      const sym& d = target.ints[i];
      if (d.is_constant(0) && !allowzero) {
        if (!x.known) return set(n, 0, opaque(n, 0, target.ints.size()));
        if (i >= x.rank()) return cannot_run();  // copies a dim the input does not have
        s.dims.push_back(x.dims[i]);
      } else if (d.is_constant(-1)) {
        if (inferred) return cannot_run();  // two -1
        inferred = i;
        s.dims.push_back(sym::unknown());
      } else if (is_negative_constant(d)) {
        return cannot_run();  // no dim is negative
      } else if (d.known()) {
        zero = zero || d.is_constant(0);
        s.dims.push_back(d);
      } else {
        s.dims.push_back(fresh(out(n), i));
      }
    }
    if (inferred && zero) return cannot_run();  // with allowzero, a 0 leaves -1 nothing to solve
    const std::int64_t count = x.known ? static_count(x.dims) : -1;
    if (inferred) {
      std::vector<sym> others;
      for (std::size_t i = 0; i < s.rank(); ++i)
        if (i != *inferred) others.push_back(s.dims[i]);
      const std::int64_t rest = static_count(others);
      if (count >= 0 && rest > 0 && count % rest != 0) return cannot_run();  // no whole -1
      const sym q = x.known ? exact_quotient(product(x.dims), product(others)) : sym::unknown();
      s.dims[*inferred] = q.known() ? q : fresh(out(n), *inferred);
    } else if (const std::int64_t made = static_count(s.dims);
               count >= 0 && made >= 0 && count != made) {
      return cannot_run();  // the element counts differ
    }
    set(n, 0, std::move(s), data);  // reshaping keeps the elements, in order
  }
  // The number of elements of a shape whose every dim is a number and whose product fits int64;
  // -1 for any other.
  static std::int64_t static_count(std::span<const sym> dims) {
    std::int64_t count = 1;
    for (const sym& d : dims) {
      const auto k = d.constant();
      if (!k || *k < 0 || __builtin_mul_overflow(count, *k, &count)) return -1;
    }
    return count;
  }

  void infer_concat(node_id n) {
    const auto inputs = g_.inputs(n);
    if (inputs.empty()) return;
    const shape_fact& first = shape(inputs[0]);
    if (!first.known) return;
    const auto axis = axis_index(g_.attribute_int(n, "axis").value_or(0), first.rank());
    if (!axis) return;
    shape_fact s = first;
    content_fact c{true, false, {}, {}};
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      const shape_fact& x = shape(inputs[k]);
      if (!x.known || x.rank() != first.rank()) return;
      // The other dims agree, or the model cannot run (compared where both are numbers).
      for (std::size_t i = 0; i < x.rank(); ++i)
        if (const auto a = first.dims[i].constant(), b = x.dims[i].constant();
            i != *axis && a && b && *a != *b)
          return cannot_run();
      if (k > 0) s.dims[*axis] = s.dims[*axis] + x.dims[*axis];
      const content_fact& e = content(inputs[k]);
      if (!e.known || first.rank() != 1 || e.real) c = {};
      if (c.known) c.ints.insert(c.ints.end(), e.ints.begin(), e.ints.end());
    }
    if (!s.dims[*axis].known()) s.dims[*axis] = fresh(out(n), *axis);
    set(n, 0, std::move(s), std::move(c));
  }

  // Clamped start and length of one sliced axis, when the numbers allow it.
  static std::optional<std::pair<std::int64_t, std::int64_t>> slice_range(std::int64_t size,
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

  // Starts and ends from an input (opset 10 on: elements may be symbolic or unknown) or from
  // the attribute (opset 1).
  std::optional<std::vector<sym>> bounds_of(node_id n, std::size_t slot,
                                            std::string_view attribute) const {
    if (const value_id v = g_.input(n, slot); v != no_id) {
      const content_fact& c = in_content(n, slot);
      if (!c.known || c.real) return std::nullopt;
      std::vector<sym> out = c.ints;
      // The lowest int64 (the dynamo exporter's "from the start" of a negative-step-free slice)
      // is no dim; for a bound any value below -size means the same, so it is read one above.
      if (const onnx::TensorProto* t = g_.constant_tensor(v)) try {
          const tensor_values values(*t, g_.directory());
          for (std::size_t i = 0; i < out.size() && std::int64_t(i) < values.size(); ++i)
            if (!out[i].known() &&
                values.as_int64(std::int64_t(i)) == std::numeric_limits<std::int64_t>::min())
              out[i] = sym::constant(std::numeric_limits<std::int64_t>::min() + 1);
        } catch (const error&) {
        }
      return out;
    }
    if (auto a = g_.attribute_ints(n, attribute)) {
      std::vector<sym> out;
      for (std::int64_t k : *a) out.push_back(sym::constant(k));
      return out;
    }
    return std::nullopt;
  }

  // The length of x[start:end] (step 1) along a dim of size d when a bound is symbolic, unknown
  // where the facts cannot write it. From the start: the whole dim when the end is proven to reach
  // it, else min(end, d). To the end from a start proven at least 0 (a decoder's past length):
  // max(0, d − start). From a start proven negative, −k (T5's last S rows): the last min(k, d),
  // and all d when k is d, whatever d is (x[−0:] is x).
  sym symbolic_slice_length(const sym& d, const sym& start, const sym& end) {
    if (!start.known() || !end.known()) return {};
    const auto e = end.constant();
    const bool to_the_end =
        equal(end, d) == truth::yes || (e && *e >= std::numeric_limits<std::int32_t>::max());
    if (start.is_constant(0)) {
      if (!is_non_negative(end)) return {};
      return to_the_end ? d : minimum(end, d);
    }
    if (!to_the_end) return {};
    if (is_non_negative(start)) return at_least_zero(d - start);
    const sym k = sym::constant(0) - start;
    if (equal(k, d) == truth::yes) return d;
    if (is_non_negative(k - sym::constant(1))) return minimum(k, d);
    return {};
  }

  void infer_slice(node_id n) {
    const shape_fact& x = in_shape(n, 0);
    if (!x.known) return;
    const auto starts = bounds_of(n, 1, "starts");
    const auto ends = bounds_of(n, 2, "ends");
    if (!starts || !ends || starts->size() != ends->size())
      return set(n, 0, opaque(n, 0, x.rank()));
    std::vector<std::int64_t> axes, steps(starts->size(), 1);
    if (auto a = ints_of(n, 3, "axes")) {
      axes = *a;
    } else if (g_.input(n, 3) != no_id) {
      return set(n, 0, opaque(n, 0, x.rank()));  // which axes are sliced is not known
    } else {
      for (std::size_t i = 0; i < starts->size(); ++i) axes.push_back(std::int64_t(i));
    }
    std::vector<bool> known_step(starts->size(), true);
    if (g_.input(n, 4) != no_id) {
      const content_fact& c = in_content(n, 4);
      if (!c.known || c.real || c.size() != starts->size())
        return set(n, 0, opaque(n, 0, x.rank()));
      for (std::size_t k = 0; k < c.ints.size(); ++k) {
        const auto step = c.ints[k].constant();
        known_step[k] = step.has_value();
        steps[k] = step.value_or(1);
      }
    }
    if (axes.size() != starts->size() || steps.size() != starts->size()) return;
    if (!distinct_axes(axes, x.rank())) return cannot_run();
    shape_fact s = x;
    const content_fact& data = in_content(n, 0);
    content_fact c;
    // Where each output axis starts in the input, and its step.
    std::vector<std::int64_t> first(x.rank(), 0), stride(x.rank(), 1);
    for (std::size_t k = 0; k < axes.size(); ++k) {
      const auto axis = axis_index(axes[k], x.rank());
      if (!axis) return;
      const auto b = (*starts)[k].constant(), e = (*ends)[k].constant();
      const std::int64_t step = steps[k];
      if (!known_step[k]) {
        s.dims[*axis] = fresh(out(n), *axis);
        continue;
      }
      if (!b || !e) {
        const sym length =
            step == 1 ? symbolic_slice_length(x.dims[*axis], (*starts)[k], (*ends)[k]) : sym{};
        s.dims[*axis] = length.known() ? length : fresh(out(n), *axis);
        continue;
      }
      const auto size = x.dims[*axis].constant();
      const bool whole = step == 1 && *b == 0 && *e >= std::numeric_limits<std::int32_t>::max();
      if (whole) continue;
      if (!size) {
        s.dims[*axis] = fresh(out(n), *axis);
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
    set(n, 0, std::move(s), std::move(c));
  }

  void infer_split(node_id n) {
    const shape_fact& x = in_shape(n, 0);
    if (!x.known) return;
    const auto axis = axis_index(g_.attribute_int(n, "axis").value_or(0), x.rank());
    if (!axis) return;
    const std::size_t outputs = g_.outputs(n).size();
    const std::int64_t parts = std::int64_t(outputs);
    if (outputs == 0) return cannot_run();
    const sym& whole = x.dims[*axis];
    const auto length = whole.constant();
    // Sizes from the input (opset 13 on) or the attribute: each at least 0, one per output, and
    // together the whole axis; sizes known only at run time leave each part's length open.
    const bool given = g_.input(n, 1) != no_id || g_.attribute(n, "split");
    const auto sizes = ints_of(n, 1, "split");
    if (sizes) {
      std::int64_t total = 0;
      if (sizes->size() != outputs) return cannot_run();
      for (std::int64_t k : *sizes)
        if (k < 0 || __builtin_add_overflow(total, k, &total)) return cannot_run();
      if (length && *length != total) return cannot_run();
    }
    // Equal parts otherwise: a whole quotient before opset 18; from 18 on, num_outputs parts of
    // ⌈d / n⌉, the last what is left.
    const bool ceiling = g_.opset("") >= 18;
    if (!given && ceiling && g_.attribute_int(n, "num_outputs").value_or(parts) != parts)
      return cannot_run();
    std::int64_t chunk = 0, last = 0;
    if (!given && length) {
      chunk = *length / parts + (*length % parts != 0);
      last = *length - chunk * (parts - 1);
      if (ceiling ? last <= 0 : last != chunk) return cannot_run();
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
      if (!d.known() && g_.output(n, k) != no_id) d = fresh(g_.output(n, k), *axis);
      set(n, k, std::move(s));
    }
  }

  void infer_gather(node_id n) {
    const shape_fact& x = in_shape(n, 0);
    const shape_fact& idx = in_shape(n, 1);
    if (!x.known || !idx.known) return;
    const auto axis = axis_index(g_.attribute_int(n, "axis").value_or(0), x.rank());
    if (!axis) return;
    shape_fact s{true, {x.dims.begin(), x.dims.begin() + std::ptrdiff_t(*axis)}};
    s.dims.insert(s.dims.end(), idx.dims.begin(), idx.dims.end());
    s.dims.insert(s.dims.end(), x.dims.begin() + std::ptrdiff_t(*axis) + 1, x.dims.end());
    content_fact c;
    const content_fact& data = in_content(n, 0);
    const auto indices = constant_ints(n, 1);
    if (x.rank() == 1 && data.known && indices) {
      c = {true, data.real, {}, {}};
      for (std::int64_t i : *indices) {
        if (i < 0) i += std::int64_t(data.size());
        if (i < 0 || i >= std::int64_t(data.size())) return set(n, 0, std::move(s));
        if (data.real)
          c.reals.push_back(data.reals[std::size_t(i)]);
        else
          c.ints.push_back(data.ints[std::size_t(i)]);
      }
    }
    set(n, 0, std::move(s), std::move(c));
  }

  void infer_expand(node_id n) {
    const shape_fact& x = in_shape(n, 0);
    const content_fact& target = in_content(n, 1);
    if (!x.known || !target.known || target.real) return;
    shape_fact t{true, {}};
    for (std::size_t i = 0; i < target.ints.size(); ++i) {
      if (is_negative_constant(target.ints[i])) return cannot_run();  // no dim is negative
      t.dims.push_back(target.ints[i].known() ? target.ints[i] : fresh(out(n), i));
    }
    const shape_fact* both[] = {&x, &t};
    set(n, 0, broadcast(both, out(n)));
  }

  void infer_squeeze(node_id n, bool unsqueeze) {
    const shape_fact& x = in_shape(n, 0);
    if (!x.known) return;
    const auto axes = ints_of(n, 1, "axes");
    if (!axes && g_.input(n, 1) != no_id) return;  // axes known only at run time
    shape_fact s{true, {}};
    if (unsqueeze) {
      if (!axes) return;
      const std::size_t rank = x.rank() + axes->size();
      std::vector<bool> inserted(rank, false);
      for (std::int64_t a : *axes) {
        const auto i = axis_index(a, rank);
        if (!i || inserted[*i]) return cannot_run();
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
            return cannot_run();
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
    set(n, 0, std::move(s), in_content(n, 0));
  }

  void infer_shape(node_id n) {
    const shape_fact& x = in_shape(n, 0);
    if (!x.known) return;
    const std::int64_t rank = std::int64_t(x.rank());
    auto bound = [&](std::int64_t i) {
      return std::clamp<std::int64_t>(i < 0 ? i + rank : i, 0, rank);
    };
    const std::int64_t start = bound(g_.attribute_int(n, "start").value_or(0));
    const std::int64_t end = bound(g_.attribute_int(n, "end").value_or(rank));
    content_fact c{true, false, {}, {}};
    for (std::int64_t i = start; i < end; ++i) c.ints.push_back(x.dims[std::size_t(i)]);
    const sym length = sym::constant(std::int64_t(c.ints.size()));
    set(n, 0, {true, {length}}, std::move(c));
  }

  void infer_range(node_id n) {
    const content_fact& start = in_content(n, 0);
    const content_fact& limit = in_content(n, 1);
    const content_fact& delta = in_content(n, 2);
    if (!start.known || !limit.known || !delta.known || start.size() != 1 || limit.size() != 1 ||
        delta.size() != 1 || start.real || limit.real || delta.real)
      return set(n, 0, opaque(n, 0, 1));
    // Range(0, L, 1) has L elements, whatever L is (none when L is a number below 0).
    if (start.ints[0].is_constant(0) && delta.ints[0].is_constant(1) && limit.ints[0].known() &&
        !is_negative_constant(limit.ints[0])) {
      content_fact c;
      if (const auto l = limit.ints[0].constant();
          l && *l >= 0 && std::size_t(*l) <= max_elements) {
        c = {true, false, {}, {}};
        for (std::int64_t i = 0; i < *l; ++i) c.ints.push_back(sym::constant(i));
      }
      return set(n, 0, {true, {limit.ints[0]}}, std::move(c));
    }
    // Range(P, P + k, d) has ⌈k / d⌉ elements (none below 0) whatever P is: a decoder step's
    // positions, from the past length to the past length plus its new tokens.
    const sym span = limit.ints[0] - start.ints[0];
    const auto k = span.constant(), d = delta.ints[0].constant();
    if (start.ints[0].known() && limit.ints[0].known() && k && d && *d != 0) {
      // Written so that no span or step near the int64 limits overflows.
      const std::int64_t count =
          *d > 0 ? (*k > 0 ? (*k - 1) / *d + 1 : 0) : (*k < 0 ? (*k + 1) / *d + 1 : 0);
      content_fact c;
      if (std::size_t(count) <= max_elements) {
        c = {true, false, {}, {}};
        for (std::int64_t i = 0; i < count; ++i)
          c.ints.push_back(start.ints[0] + sym::constant(i * *d));
      }
      return set(n, 0, {true, {sym::constant(count)}}, std::move(c));
    }
    set(n, 0, opaque(n, 0, 1));
  }

  void infer_constant_of_shape(node_id n) {
    const content_fact& target = in_content(n, 0);
    if (!target.known || target.real) return;
    shape_fact s{true, {}};
    for (std::size_t i = 0; i < target.ints.size(); ++i) {
      if (is_negative_constant(target.ints[i])) return cannot_run();  // no dim is negative
      s.dims.push_back(target.ints[i].known() ? target.ints[i] : fresh(out(n), i));
    }
    content_fact c;
    std::size_t size = 1;
    bool small = true;
    for (const sym& d : s.dims) {
      const auto k = d.constant();
      if (!k || std::uint64_t(*k) > max_elements || (size *= std::size_t(*k)) > max_elements)
        small = false;
      if (!small) break;
    }
    if (small) {
      const onnx::AttributeProto* value = g_.attribute(n, "value").attribute;
      const content_fact fill = value != nullptr && value->has_t()
                                    ? read(value->t())
                                    : content_fact{true, true, {}, {0.0}};
      if (fill.known && fill.size() == 1) {
        c = {true, fill.real, {}, {}};
        if (fill.real)
          c.reals.assign(size, fill.reals[0]);
        else
          c.ints.assign(size, fill.ints[0]);
      }
    }
    set(n, 0, std::move(s), std::move(c));
  }

  // Reduce*: the reduced axes become 1 (keepdims) or go; axes from the input (ReduceSum from
  // opset 13, the others from 18) or the attribute; none given reduces all, unless told not to.
  void infer_reduce(node_id n) {
    const shape_fact& x = in_shape(n, 0);
    if (!x.known) return;
    const bool keep = g_.attribute_int(n, "keepdims").value_or(1) != 0;
    const auto axes = ints_of(n, 1, "axes");
    if (!axes && g_.input(n, 1) != no_id) return;  // axes computed at run time
    std::vector<bool> reduced(x.rank(), !axes || axes->empty());
    if (axes && axes->empty() && g_.attribute_int(n, "noop_with_empty_axes").value_or(0) != 0)
      return set(n, 0, x);
    if (axes)
      for (std::int64_t a : *axes) {
        const auto i = axis_index(a, x.rank());
        if (!i) return;
        reduced[*i] = true;
      }
    shape_fact s{true, {}};
    for (std::size_t i = 0; i < x.rank(); ++i) {
      if (!reduced[i])
        s.dims.push_back(x.dims[i]);
      else if (keep)
        s.dims.push_back(sym::constant(1));
    }
    set(n, 0, std::move(s));
  }

  // Pad: each padded axis grows by its two pads (negative pads crop). Pads from the attribute
  // (before opset 11) or the input; the axes they apply to from input 3 (opset 18), else all.
  void infer_pad(node_id n) {
    const shape_fact& x = in_shape(n, 0);
    if (!x.known) return;
    const auto pads = g_.input(n, 1) != no_id ? bounds_of(n, 1, "") : bounds_of(n, 1, "pads");
    std::vector<std::int64_t> axes;
    if (g_.input(n, 3) != no_id) {
      const auto a = constant_ints(n, 3);
      if (!a) return set(n, 0, opaque(n, 0, x.rank()));
      axes = *a;
    } else {
      for (std::size_t i = 0; i < x.rank(); ++i) axes.push_back(std::int64_t(i));
    }
    if (!pads || pads->size() != 2 * axes.size()) return set(n, 0, opaque(n, 0, x.rank()));
    if (!distinct_axes(axes, x.rank())) return cannot_run();
    shape_fact s = x;
    for (std::size_t k = 0; k < axes.size(); ++k) {
      const auto axis = axis_index(axes[k], x.rank());
      if (!axis) return;
      const sym d = x.dims[*axis] + (*pads)[k] + (*pads)[k + axes.size()];
      if (is_negative_constant(d)) return cannot_run();  // cropped past nothing
      s.dims[*axis] = d.known() ? d : fresh(out(n), *axis);
    }
    set(n, 0, std::move(s));
  }

  // Conv and the pools slide a window over the spatial axes: out = ⌊(in + pads − dilation·(k−1)
  // − 1) / stride⌋ + 1, "SAME" padding ⌈in / stride⌉. A symbolic size stays symbolic where the
  // stride is 1 (no rounding); other strides on a symbolic size leave the dim to ONNX's rule.
  void infer_window(node_id n, std::string_view op) {
    const shape_fact& x = in_shape(n, 0);
    if (!x.known || x.rank() < 3) return;
    const std::size_t spatial = x.rank() - 2;
    std::vector<std::int64_t> kernel;
    if (auto k = g_.attribute_ints(n, "kernel_shape")) kernel.assign(k->begin(), k->end());
    sym channels = x.dims[1];
    if (op == "Conv") {
      const shape_fact& w = in_shape(n, 1);
      if (!w.known || w.rank() != x.rank()) return;
      channels = w.dims[0];
      if (kernel.empty())
        for (std::size_t i = 0; i < spatial; ++i) {
          const auto k = w.dims[2 + i].constant();
          if (!k) return;
          kernel.push_back(*k);
        }
    }
    // One value per spatial axis (two for pads), the default where the attribute is absent.
    auto per_axis = [&](std::string_view attribute, std::size_t count, std::int64_t fallback) {
      const auto a = g_.attribute_ints(n, attribute);
      return !a ? std::vector<std::int64_t>(count, fallback)
                : std::vector<std::int64_t>(a->begin(), a->end());
    };
    const auto strides = per_axis("strides", spatial, 1);
    const auto dilations = per_axis("dilations", spatial, 1);
    const auto pads = per_axis("pads", 2 * spatial, 0);
    if (kernel.size() != spatial || strides.size() != spatial || dilations.size() != spatial ||
        pads.size() != 2 * spatial)
      return cannot_run();
    const std::string_view auto_pad = g_.attribute_string(n, "auto_pad").value_or("NOTSET");
    const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
    if (!same && auto_pad != "NOTSET" && auto_pad != "VALID") return cannot_run();
    if (g_.attribute_int(n, "ceil_mode").value_or(0) != 0) return;
    shape_fact s{true, {x.dims[0], channels}};
    for (std::size_t i = 0; i < spatial; ++i) {
      const sym& d = x.dims[2 + i];
      const std::int64_t stride = strides[i];
      // A window of at least one element, stepped forward, padded outward, or the model cannot run.
      if (stride < 1 || dilations[i] < 1 || kernel[i] < 1 || pads[i] < 0 || pads[i + spatial] < 0)
        return cannot_run();
      // The pads less what a window spans past its first element: the last window starts at
      // in − 1 + padded, and the output holds that over the stride, plus one. No sum overflows.
      std::int64_t reach = 0, padding = 0, padded = 0;
      if (__builtin_mul_overflow(dilations[i], kernel[i] - 1, &reach) ||
          (auto_pad == "NOTSET" && __builtin_add_overflow(pads[i], pads[i + spatial], &padding)) ||
          __builtin_sub_overflow(padding, reach, &padded))
        return cannot_run();
      if (const auto k = d.constant()) {
        std::int64_t span = 0;  // below 0, not even one window fits
        if (__builtin_add_overflow(*k - 1, padded, &span) || (!same && span < 0))
          return cannot_run();
        s.dims.push_back(
            sym::constant(same ? (*k == 0 ? 0 : (*k - 1) / stride + 1) : span / stride + 1));
      } else if (stride == 1) {
        s.dims.push_back(same ? d : d + sym::constant(padded));
      } else {
        s.dims.push_back(fresh(out(n), 2 + i));
      }
    }
    set(n, 0, std::move(s));
  }

  void infer_flatten(node_id n) {
    const shape_fact& x = in_shape(n, 0);
    if (!x.known) return;
    std::int64_t axis = g_.attribute_int(n, "axis").value_or(1);
    if (axis < 0) axis += std::int64_t(x.rank());
    if (axis < 0 || axis > std::int64_t(x.rank())) return;
    const auto split = x.dims.begin() + axis;
    set(n, 0, {true, {product({x.dims.begin(), split}), product({split, x.dims.end()})}});
  }

  void infer_tile(node_id n) {
    const shape_fact& x = in_shape(n, 0);
    const content_fact& repeats = in_content(n, 1);
    if (!x.known || !repeats.known || repeats.real || repeats.size() != x.rank()) return;
    shape_fact s{true, {}};
    for (std::size_t i = 0; i < x.rank(); ++i) {
      if (is_negative_constant(repeats.ints[i])) return cannot_run();  // no count is negative
      const sym d = x.dims[i] * repeats.ints[i];
      s.dims.push_back(d.known() ? d : fresh(out(n), i));
    }
    set(n, 0, std::move(s));
  }

  // Einsum in explicit form ("bhqd,bhkd->bhqk"): each output letter takes the dim it labels in
  // the inputs. Implicit outputs and ellipses are left unknown.
  void infer_einsum(node_id n) {
    const onnx::AttributeProto* eq = g_.attribute(n, "equation").attribute;
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
      const shape_fact& x = in_shape(n, slot++);
      if (!x.known || x.rank() != labels.size()) return;
      for (std::size_t i = 0; i < labels.size(); ++i) {
        auto [it, fresh_label] = dims.try_emplace(labels[i], x.dims[i]);
        if (!fresh_label && it->second.is_constant(1)) it->second = x.dims[i];
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (slot != g_.inputs(n).size()) return cannot_run();  // one term per input
    shape_fact s{true, {}};
    for (char label : text.substr(arrow + 2)) {
      const auto it = dims.find(label);
      if (it == dims.end()) return;
      s.dims.push_back(it->second);
    }
    set(n, 0, std::move(s));
  }

  // Output 0 of the fused attention ops: the query's batch and sequence, the value's head size.
  void infer_attention(node_id n, std::string_view op) {
    const shape_fact& q = in_shape(n, 0);
    const shape_fact& v = in_shape(n, 2);
    if (!q.known || !v.known) return;
    if (op == "MultiHeadAttention" && q.rank() == 3) {
      if (v.rank() == 3) return set(n, 0, {true, {q.dims[0], q.dims[1], v.dims[2]}});
      if (v.rank() == 4) return set(n, 0, {true, {q.dims[0], q.dims[1], v.dims[1] * v.dims[3]}});
    }
    if (op == "Attention" && q.rank() == 4 && v.rank() == 4)
      return set(n, 0, {true, {q.dims[0], q.dims[1], q.dims[2], v.dims[3]}});
  }
};

// The facts of g, built on first use and kept with it.
inline const facts& facts_of(const graph& g) {
  if (!g.facts_) g.facts_ = std::make_unique<facts>(g);
  return *g.facts_;
}

}  // namespace fusekit
