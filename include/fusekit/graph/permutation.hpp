// Transposes as permutations: a node's perm as ONNX defines it, two composed into one, and the
// identity, for rules that fold or drop Transposes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fusekit/graph/facts.hpp"
#include "fusekit/graph/graph.hpp"

namespace fusekit {

using permutation = std::vector<std::int64_t>;

// A Transpose's perm: its attribute, or where it states none the axes of its input reversed, as
// many as the facts prove it has. nullopt where neither is known, or the perm is no permutation.
inline std::optional<permutation> transpose_perm(const graph& g, node_id n) {
  permutation p;
  if (const auto given = g.attribute_ints(n, "perm")) {
    p.assign(given->begin(), given->end());
  } else if (const auto rank = facts_of(g).rank(g.input(n, 0))) {
    for (std::int64_t i = std::int64_t(*rank); i-- > 0;) p.push_back(i);
  } else {
    return std::nullopt;
  }
  std::vector<bool> seen(p.size(), false);
  for (std::int64_t a : p) {
    if (a < 0 || a >= std::int64_t(p.size()) || seen[std::size_t(a)]) return std::nullopt;
    seen[std::size_t(a)] = true;
  }
  return p;
}

// What Transpose(perm = outer) of Transpose(perm = inner) does in one: output dim i is the
// inner's input dim inner[outer[i]].
inline permutation compose(const permutation& inner, const permutation& outer) {
  permutation p;
  for (std::int64_t i : outer) p.push_back(inner.at(std::size_t(i)));
  return p;
}

inline bool is_identity(const permutation& p) {
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i] != std::int64_t(i)) return false;
  return true;
}

}  // namespace fusekit
