// Compile-time strings usable as template arguments: op<"MatMul">, capture<"q">, get<"scale">().
#pragma once

#include <cstddef>
#include <string_view>

namespace fusekit::pattern {

template <std::size_t N>
struct fixed_string {
  char chars[N]{};

  constexpr fixed_string(const char (&text)[N]) {
    for (std::size_t i = 0; i < N; ++i) chars[i] = text[i];
  }
  constexpr std::string_view view() const { return {chars, N - 1}; }
};

}  // namespace fusekit::pattern
