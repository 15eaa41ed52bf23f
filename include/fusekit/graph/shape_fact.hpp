// What the facts oracle knows of one value: its shape (rank and dims, each static, symbolic or
// unknown) and, for small tensors, its elements.
#pragma once

#include <cstddef>
#include <vector>

#include "fusekit/graph/sym.hpp"

namespace fusekit {

struct shape_fact {
  bool known = false;  // false: not even the rank is known
  std::vector<sym> dims;
  std::size_t rank() const { return dims.size(); }
};

// The elements of a small tensor, row-major: integer and boolean tensors as dims (symbolic where
// they came from a Shape), float tensors as numbers (rounded as the dtype rounds them).
struct content_fact {
  bool known = false;
  bool real = false;
  std::vector<sym> ints;
  std::vector<double> reals;
  std::size_t size() const { return real ? reals.size() : ints.size(); }
};

}  // namespace fusekit
