// The bundled rule library, in one call: what `fusekit fuse` runs.
#pragma once

#include <array>
#include <string_view>

#include "dit.hpp"
#include "fusekit/rewrite/driver.hpp"

namespace fusekit::rules {

inline rewrite::report fuse_all(model& m, const rewrite::options& opts = {}) {
  return rewrite::fuse<dit_attention_merged, dit_attention>(m, opts);
}

inline constexpr std::array<std::string_view, 2> names = {dit_attention_merged::name,
                                                          dit_attention::name};

}  // namespace fusekit::rules
