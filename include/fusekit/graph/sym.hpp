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

  static sym unknown() { return {}; }
  static sym constant(std::int64_t c) {
    if (c == lowest) return unknown();
    sym s;
    s.known_ = true;
    if (c != 0) s.terms_.push_back({c, {}});
    return s;
  }
  static sym atom(atom_id a) {
    sym s;
    s.known_ = true;
    s.terms_.push_back({1, {{a, 1}}});
    return s;
  }

  bool known() const { return known_; }
  std::optional<std::int64_t> constant() const {
    if (!known_ || denominator_ != 1) return std::nullopt;
    if (terms_.empty()) return 0;
    if (terms_.size() == 1 && terms_[0].factors.empty()) return terms_[0].coefficient;
    return std::nullopt;
  }
  bool is_constant(std::int64_t c) const { return constant() == c; }
  std::int64_t denominator() const { return denominator_; }
  const std::vector<term>& terms() const { return terms_; }

  friend sym operator+(const sym& a, const sym& b) { return combine(a, b, 1); }
  friend sym operator-(const sym& a, const sym& b) { return combine(a, b, -1); }
  friend sym operator*(const sym& a, const sym& b) {
    if (!a.known_ || !b.known_) return unknown();
    sym out;
    out.known_ = true;
    if (!mul(a.denominator_, b.denominator_, out.denominator_)) return unknown();
    for (const term& x : a.terms_)
      for (const term& y : b.terms_) {
        term t{0, merge(x.factors, y.factors, 1)};
        if (!mul(x.coefficient, y.coefficient, t.coefficient)) return unknown();
        out.terms_.push_back(std::move(t));
      }
    return out.normalised();
  }
  // a / b where b is one term that divides every term of a (coefficients may leave a
  // denominator: N/2); unknown otherwise. For quotients the model guarantees to be exact: a
  // Reshape's -1, an even Split.
  friend sym exact_quotient(const sym& a, const sym& b) {
    if (!a.known_ || !b.known_ || b.terms_.size() != 1) return unknown();
    const term& d = b.terms_[0];
    sym out;
    out.known_ = true;
    // (A/da) / (c·M/db) = (A·db) / (da·c·M)
    std::int64_t den = 0;
    if (!mul(a.denominator_, d.coefficient, den)) return unknown();
    for (const term& x : a.terms_) {
      term t{0, merge(x.factors, d.factors, -1)};
      for (const factor& f : t.factors)
        if (f.power < 0) return unknown();
      if (!mul(x.coefficient, b.denominator_, t.coefficient)) return unknown();
      out.terms_.push_back(std::move(t));
    }
    if (den < 0) {
      den = -den;
      for (term& t : out.terms_) t.coefficient = -t.coefficient;
    }
    out.denominator_ = den;
    return out.normalised();
  }

  friend truth equal(const sym& a, const sym& b) {
    if (!a.known_ || !b.known_) return truth::unknown;
    const sym d = a - b;
    if (!d.known_) return truth::unknown;
    if (d.terms_.empty()) return truth::yes;
    // Atoms are sizes, fixed for a run: a nonzero constant difference is a proof.
    if (d.constant() || (d.terms_.size() == 1 && d.terms_[0].factors.empty())) return truth::no;
    return truth::unknown;
  }
  bool operator==(const sym& o) const {
    if (known_ != o.known_ || denominator_ != o.denominator_ || terms_.size() != o.terms_.size())
      return false;
    for (std::size_t i = 0; i < terms_.size(); ++i)
      if (terms_[i].coefficient != o.terms_[i].coefficient ||
          terms_[i].factors != o.terms_[i].factors)
        return false;
    return true;
  }

  // "2·S + T", "N/2", "?" — atom names from `name(atom)`.
  template <class Names>
  std::string text(const Names& name) const {
    if (!known_) return "?";
    if (terms_.empty()) return "0";
    std::string out;
    for (std::size_t i = 0; i < terms_.size(); ++i) {
      const term& t = terms_[i];
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
    if (denominator_ != 1) {
      if (terms_.size() > 1) {
        out.insert(out.begin(), '(');
        out += ')';
      }
      out += '/';
      out += std::to_string(denominator_);
    }
    return out;
  }

 private:
  // A polynomial this long is no longer a dimension worth reasoning about.
  static constexpr std::size_t max_terms = 32;

  bool known_ = false;
  std::int64_t denominator_ = 1;
  std::vector<term> terms_;  // sorted by factors, merged, no zero coefficients

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

  static sym combine(const sym& a, const sym& b, int sign) {
    if (!a.known_ || !b.known_) return unknown();
    sym out;
    out.known_ = true;
    if (!mul(a.denominator_, b.denominator_, out.denominator_)) return unknown();
    for (const term& t : a.terms_) {
      term x{0, t.factors};
      if (!mul(t.coefficient, b.denominator_, x.coefficient)) return unknown();
      out.terms_.push_back(std::move(x));
    }
    for (const term& t : b.terms_) {
      term x{0, t.factors};
      if (!mul(t.coefficient, sign * a.denominator_, x.coefficient)) return unknown();
      out.terms_.push_back(std::move(x));
    }
    return out.normalised();
  }

  sym normalised() {
    std::sort(terms_.begin(), terms_.end(),
              [](const term& x, const term& y) { return less(x.factors, y.factors); });
    std::vector<term> merged;
    for (term& t : terms_) {
      if (!merged.empty() && merged.back().factors == t.factors) {
        if (!add(merged.back().coefficient, t.coefficient, merged.back().coefficient))
          return unknown();
      } else {
        merged.push_back(std::move(t));
      }
    }
    std::erase_if(merged, [](const term& t) { return t.coefficient == 0; });
    if (merged.size() > max_terms) return unknown();
    std::int64_t g = denominator_;
    for (const term& t : merged) g = std::gcd(g, t.coefficient);
    if (g > 1) {
      denominator_ /= g;
      for (term& t : merged) t.coefficient /= g;
    }
    if (merged.empty()) denominator_ = 1;
    terms_ = std::move(merged);
    return std::move(*this);
  }
};

}  // namespace fusekit
