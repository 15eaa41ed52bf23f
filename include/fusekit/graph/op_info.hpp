// An op of the op table: its domain, name and how many inputs it takes.
#pragma once

#include <climits>
#include <string_view>

namespace fusekit {

inline constexpr int variadic = INT_MAX;

// Input counts are the widest over all opset versions of the op (Clip had 1 input, has 3).
struct op_info {
  std::string_view domain;
  std::string_view name;
  int min_inputs;
  int max_inputs;
};

}  // namespace fusekit
