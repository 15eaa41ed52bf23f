// Symbolic dimensions: an integer polynomial over atoms (a named dim such as S, or a dim nothing
// names, known only to be fixed) with one positive common denominator, so that S + T, B·N and N/2
// are exact; or unknown. The form is canonical, so equal forms are equal dims. Comparisons answer
// in three values: proven equal, proven different, unknown.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fusekit/engine.hpp"

namespace fusekit {

// The answer of every comparison the facts make: "unknown" is never "equal".
enum class truth : std::uint8_t { no, yes, unknown };

using atom_id = std::uint32_t;

class sym {
 public:
  struct factor {
    atom_id atom;
    int power;
    bool operator==(const factor&) const = default;
  };
  struct term {
    std::int64_t coefficient;
    std::vector<factor> factors;  // sorted by atom
  };

  sym() = default;  // unknown
  static sym unknown() { return {}; }
  static sym constant(std::int64_t c) {
    if (c == lowest) return unknown();
    return sym(form::constant, c);
  }
  static sym atom(atom_id a) { return sym(form::atom, a); }

  bool known() const { return form_ != form::unknown; }
  std::optional<std::int64_t> constant() const {
    if (form_ == form::constant) return value_;
    return std::nullopt;
  }
  bool is_constant(std::int64_t c) const { return constant() == c; }
  // The atom when the dim is exactly one atom (S, not 2·S or S/2).
  std::optional<atom_id> lone_atom() const {
    if (form_ == form::atom) return atom_id(value_);
    return std::nullopt;
  }
  std::int64_t denominator() const { return form_ == form::polynomial ? poly_.denominator : 1; }
  std::size_t term_count() const {
    switch (form_) {
      case form::constant:
        return value_ == 0 ? 0 : 1;
      case form::atom:
        return 1;
      case form::polynomial:
        return poly_.terms.size();
      case form::unknown:
        break;
    }
    return 0;
  }
  std::vector<term> terms() const {
    polynomial scratch;
    return as_polynomial(scratch).terms;
  }

  friend sym operator+(const sym& a, const sym& b) { return combine(a, b, 1); }
  friend sym operator-(const sym& a, const sym& b) { return combine(a, b, -1); }
  friend sym operator*(const sym& a, const sym& b) {
    if (!a.known() || !b.known()) return unknown();
    if (a.form_ == form::constant && b.form_ == form::constant) {
      std::int64_t c = 0;
      return mul(a.value_, b.value_, c) ? constant(c) : unknown();
    }
    polynomial a_scratch, b_scratch;
    const polynomial& x = a.as_polynomial(a_scratch);
    const polynomial& y = b.as_polynomial(b_scratch);
    polynomial out;
    if (!mul(x.denominator, y.denominator, out.denominator)) return unknown();
    for (const term& p : x.terms)
      for (const term& q : y.terms) {
        term t{0, merge(p.factors, q.factors, 1)};
        if (!mul(p.coefficient, q.coefficient, t.coefficient)) return unknown();
        out.terms.push_back(std::move(t));
      }
    return normalised(std::move(out));
  }
  // a / b where b is one term that divides every term of a (coefficients may leave a
  // denominator: N/2); unknown otherwise. For quotients the model guarantees to be exact: a
  // Reshape's -1, an even Split.
  friend sym exact_quotient(const sym& a, const sym& b) {
    if (!a.known() || !b.known() || b.term_count() != 1) return unknown();
    polynomial a_scratch, b_scratch;
    const polynomial& x = a.as_polynomial(a_scratch);
    const polynomial& y = b.as_polynomial(b_scratch);
    const term& d = y.terms[0];
    polynomial out;
    // (A/da) / (c·M/db) = (A·db) / (da·c·M)
    std::int64_t den = 0;
    if (!mul(x.denominator, d.coefficient, den)) return unknown();
    for (const term& p : x.terms) {
      term t{0, merge(p.factors, d.factors, -1)};
      for (const factor& f : t.factors)
        if (f.power < 0) return unknown();
      if (!mul(p.coefficient, y.denominator, t.coefficient)) return unknown();
      out.terms.push_back(std::move(t));
    }
    if (den < 0) {
      den = -den;
      for (term& t : out.terms) t.coefficient = -t.coefficient;
    }
    out.denominator = den;
    return normalised(std::move(out));
  }

  friend truth equal(const sym& a, const sym& b) {
    if (!a.known() || !b.known()) return truth::unknown;
    if (a == b) return truth::yes;
    // Of two differing dims of at most one term each, only two constants are proven different:
    // what the subtraction would find, answered without it, since it allocates and matching
    // (the same_dim predicate) allocates nothing.
    if (a.denominator() == 1 && b.denominator() == 1 && a.term_count() <= 1 && b.term_count() <= 1)
      return a.constant() && b.constant() ? truth::no : truth::unknown;
    const sym d = a - b;
    if (!d.known()) return truth::unknown;
    // Atoms are sizes, fixed for a run: a nonzero constant difference is a proof.
    if (d.form_ == form::constant) return d.is_constant(0) ? truth::yes : truth::no;
    if (d.poly_.terms.size() == 1 && d.poly_.terms[0].factors.empty()) return truth::no;
    return truth::unknown;
  }
  // The forms are canonical: equal dims have equal forms.
  bool operator==(const sym& o) const {
    if (form_ != o.form_ || value_ != o.value_ || poly_.denominator != o.poly_.denominator ||
        poly_.terms.size() != o.poly_.terms.size())
      return false;
    for (std::size_t i = 0; i < poly_.terms.size(); ++i)
      if (poly_.terms[i].coefficient != o.poly_.terms[i].coefficient ||
          poly_.terms[i].factors != o.poly_.terms[i].factors)
        return false;
    return true;
  }

  // "2·S + T", "N/2", "?" — atom names from `name(atom)`.
  template <class Names>
  std::string text(const Names& name) const {
    if (!known()) return "?";
    polynomial scratch;
    const polynomial& p = as_polynomial(scratch);
    if (p.terms.empty()) return "0";
    std::string out;
    for (std::size_t i = 0; i < p.terms.size(); ++i) {
      const term& t = p.terms[i];
      std::int64_t c = t.coefficient;
      if (i > 0)
        out += c < 0 ? " - " : " + ";
      else if (c < 0)
        out += "-";
      c = c < 0 ? -c : c;
      const bool bare = t.factors.empty();
      if (c != 1 || bare) out += std::to_string(c) + (bare ? "" : "·");
      for (std::size_t k = 0; k < t.factors.size(); ++k) {
        if (k > 0) out += "·";
        out += name(t.factors[k].atom);
        if (t.factors[k].power != 1) {
          out += '^';  // appended piece by piece: g++ 12 -O3 misreads "^" + string (-Wrestrict)
          out += std::to_string(t.factors[k].power);
        }
      }
    }
    if (p.denominator != 1) {
      if (p.terms.size() > 1) {
        out.insert(out.begin(), '(');
        out += ')';
      }
      out += '/';
      out += std::to_string(p.denominator);
    }
    return out;
  }

 private:
  // A polynomial this long is no longer a dimension worth reasoning about.
  static constexpr std::size_t max_terms = 32;

  // Most dims are a constant or one atom: those are held without the polynomial's vectors, so a
  // shape is copied, compared and stored without an allocation. Every form is canonical: a
  // polynomial that is a constant or a lone atom is always held as one.
  enum class form : std::uint8_t { unknown, constant, atom, polynomial };
  struct polynomial {
    std::int64_t denominator = 1;
    std::vector<term> terms;  // sorted by factors, merged, no zero coefficients
  };

  form form_ = form::unknown;
  std::int64_t value_ = 0;  // the constant, or the atom
  polynomial poly_;         // of the polynomial form

  sym(form f, std::int64_t value) : form_(f), value_(value) {}

  // The polynomial of this dim: its own, or, for a constant or a lone atom, one written into
  // `scratch`.
  const polynomial& as_polynomial(polynomial& scratch) const {
    switch (form_) {
      case form::constant:
        if (value_ != 0) scratch.terms.push_back({value_, {}});
        return scratch;
      case form::atom:
        scratch.terms.push_back({1, {{atom_id(value_), 1}}});
        return scratch;
      case form::polynomial:
        return poly_;
      case form::unknown:
        break;
    }
    return scratch;
  }

  // Coefficients and denominators stay above the lowest int64, so that negating one (a sign, a
  // gcd, a printed magnitude) never overflows.
  static constexpr std::int64_t lowest = std::numeric_limits<std::int64_t>::min();
  static bool mul(std::int64_t a, std::int64_t b, std::int64_t& out) {
    return !__builtin_mul_overflow(a, b, &out) && out != lowest;
  }
  static bool add(std::int64_t a, std::int64_t b, std::int64_t& out) {
    return !__builtin_add_overflow(a, b, &out) && out != lowest;
  }
  static std::vector<factor> merge(const std::vector<factor>& a, const std::vector<factor>& b,
                                   int sign) {
    std::vector<factor> out;
    std::size_t i = 0, j = 0;
    while (i < a.size() || j < b.size()) {
      if (j == b.size() || (i < a.size() && a[i].atom < b[j].atom)) {
        out.push_back(a[i++]);
      } else if (i == a.size() || b[j].atom < a[i].atom) {
        out.push_back({b[j].atom, sign * b[j].power});
        ++j;
      } else {
        const int p = a[i].power + sign * b[j].power;
        if (p != 0) out.push_back({a[i].atom, p});
        ++i, ++j;
      }
    }
    return out;
  }
  static bool less(const std::vector<factor>& a, const std::vector<factor>& b) {
    return std::lexicographical_compare(
        a.begin(), a.end(), b.begin(), b.end(), [](const factor& x, const factor& y) {
          return x.atom != y.atom ? x.atom < y.atom : x.power < y.power;
        });
  }

  static sym combine(const sym& a, const sym& b, int sign);

  static sym normalised(polynomial p);
};

#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE sym sym::normalised(polynomial p) {
  std::sort(p.terms.begin(), p.terms.end(),
            [](const term& x, const term& y) { return less(x.factors, y.factors); });
  std::vector<term> merged;
  for (term& t : p.terms) {
    if (!merged.empty() && merged.back().factors == t.factors) {
      if (!add(merged.back().coefficient, t.coefficient, merged.back().coefficient))
        return unknown();
    } else {
      merged.push_back(std::move(t));
    }
  }
  std::erase_if(merged, [](const term& t) { return t.coefficient == 0; });
  if (merged.size() > max_terms) return unknown();
  std::int64_t g = p.denominator;
  for (const term& t : merged) g = std::gcd(g, t.coefficient);
  if (g > 1) {
    p.denominator /= g;
    for (term& t : merged) t.coefficient /= g;
  }
  if (merged.empty()) return constant(0);
  if (p.denominator == 1 && merged.size() == 1) {
    const term& t = merged[0];
    if (t.factors.empty()) return constant(t.coefficient);
    if (t.coefficient == 1 && t.factors.size() == 1 && t.factors[0].power == 1)
      return atom(t.factors[0].atom);
  }
  sym out(form::polynomial, 0);
  out.poly_.denominator = p.denominator;
  out.poly_.terms = std::move(merged);
  return out;
}

FUSEKIT_ENGINE_INLINE sym sym::combine(const sym& a, const sym& b, int sign) {
  if (!a.known() || !b.known()) return unknown();
  if (a.form_ == form::constant && b.form_ == form::constant) {
    std::int64_t c = 0;
    if (sign < 0 ? __builtin_sub_overflow(a.value_, b.value_, &c)
                 : __builtin_add_overflow(a.value_, b.value_, &c))
      return unknown();
    return constant(c);
  }
  polynomial a_scratch, b_scratch;
  const polynomial& x = a.as_polynomial(a_scratch);
  const polynomial& y = b.as_polynomial(b_scratch);
  polynomial out;
  if (!mul(x.denominator, y.denominator, out.denominator)) return unknown();
  for (const term& t : x.terms) {
    term p{0, t.factors};
    if (!mul(t.coefficient, y.denominator, p.coefficient)) return unknown();
    out.terms.push_back(std::move(p));
  }
  for (const term& t : y.terms) {
    term p{0, t.factors};
    if (!mul(t.coefficient, sign * x.denominator, p.coefficient)) return unknown();
    out.terms.push_back(std::move(p));
  }
  return normalised(std::move(out));
}
#endif

}  // namespace fusekit
