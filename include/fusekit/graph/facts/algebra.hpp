// The algebra of dims the facts prove with: atoms (a dim the model names, or one nothing names,
// born where an op could not follow it), a dim_param torch.export writes as an expression of
// others, and the expressions sympy writes for a slice's length (Min(S, 64), Max(0, T - P)) named
// as atoms of their own. One table per model, shared by the facts of its graph and of every body
// in it.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fusekit/graph/graph.hpp"
#include "fusekit/graph/sym.hpp"

namespace fusekit::facts_detail {

inline bool is_negative_constant(const sym& s) {
  const auto k = s.constant();
  return k && *k < 0;
}
// Atoms are sizes: a polynomial with no negative coefficient is at least 0.
inline bool is_non_negative(const sym& s) {
  if (!s.known()) return false;
  if (const auto k = s.constant()) return *k >= 0;
  if (s.lone_atom()) return true;
  for (const sym::term& t : s.terms())
    if (t.coefficient < 0) return false;
  return true;
}

// Where an atom comes from: a dim the model names (where null), or dim `dim` of `value` in
// `where`, which an op there could not follow.
struct birth {
  const graph* where = nullptr;
  value_id value = no_id;
  std::uint32_t dim = 0;
};

class atom_table {
 public:
  const std::string& name(atom_id a) const { return names_[a]; }
  const birth& born(atom_id a) const { return born_[a]; }
  std::string text(const sym& s) const {
    return s.text([&](atom_id a) { return names_[a]; });
  }

  // Whether s is a number or an expression of dims the model names (no dim nothing names).
  bool is_named(const sym& s) const {
    if (!s.known()) return false;
    if (s.constant()) return true;
    if (const auto a = s.lone_atom()) return born_[*a].where == nullptr;
    for (const sym::term& t : s.terms())
      for (const sym::factor& x : t.factors)
        if (born_[x.atom].where != nullptr) return false;
    return true;
  }
  // Whether s is one dim nothing names, born where an op could not follow it.
  bool is_fresh(const sym& s) const {
    const std::optional<atom_id> a = s.lone_atom();
    return a && born_[*a].where != nullptr;
  }

  // The atom of a dim the model names: one per name.
  sym named(std::string_view name) {
    auto [it, fresh] = named_.try_emplace(std::string(name), atom_id(names_.size()));
    if (fresh) {
      names_.emplace_back(name);
      born_.emplace_back();
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
  // A dim nothing names, dim i of v in g: equal to itself, and proven equal to nothing else.
  sym fresh(const graph& g, value_id v, std::size_t i) {
    names_.push_back("dim " + std::to_string(i) + " of '" + std::string(g.name(v)) + "'");
    born_.push_back({&g, v, std::uint32_t(i)});
    return sym::atom(atom_id(names_.size() - 1));
  }
  // max(0, x) of a dim difference that may be negative (x[s:] of a dim d takes max(0, d − s)
  // elements): an atom named for the expression as sympy writes it, like a min's.
  sym at_least_zero(const sym& x) {
    if (is_non_negative(x)) return x;
    if (x.constant()) return sym::constant(0);
    if (!is_named(x) || !sympy_reads_alike(x)) return {};
    return named("Max(0, " + text(x) + ")");
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
    minimum_of_.try_emplace(*m.lone_atom(), a, b);
    return m;
  }
  bool is_minimum_with(const sym& m, const sym& x) const {
    const auto a = m.lone_atom();
    if (!a) return false;
    const auto it = minimum_of_.find(*a);
    return it != minimum_of_.end() &&
           (equal(it->second.first, x) == truth::yes || equal(it->second.second, x) == truth::yes);
  }

 private:
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
  // Operands without products or powers print alike here and in sympy.
  static bool sympy_reads_alike(const sym& x) {
    for (const sym::term& t : x.terms())
      if (t.factors.size() > 1 || (t.factors.size() == 1 && t.factors[0].power != 1)) return false;
    return true;
  }

  std::vector<std::string> names_;
  std::vector<birth> born_;
  std::unordered_map<std::string, atom_id> named_;
  std::unordered_map<atom_id, std::pair<sym, sym>> minimum_of_;  // the atoms that are a min
};

}  // namespace fusekit::facts_detail
