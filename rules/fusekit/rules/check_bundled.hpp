// The library's rules, each checked from its own pattern (fusekit/rewrite/selfcheck.hpp says how):
// what `fusekit selfcheck` runs. Compiled in a library of the tool's own, fusekit_rules_selfcheck,
// so that a program that only fuses does not build the generator.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fusekit/rewrite/selfcheck.hpp"
#include "options.hpp"

namespace fusekit::rules {

// Each rule of `only` (every rule where it is empty) under each of `targets` it emits for, for
// target ort as `on` runs the model (the layer rules' instances then come in the element types
// that provider fuses, bfloat16 left out); a result's rule reads "gelu --target onnx". With
// options::write_to, each rule and target writes its models to a folder of its own below it,
// named as the result.
std::vector<selfcheck::result> check_bundled(const selfcheck::options& o,
                                             std::span<const std::string> only = {},
                                             std::span<const target> targets = every_target,
                                             provider on = provider::cpu);

// Throws fusekit::error, saying so, where this build left the checks out (CMake option
// FUSEKIT_BUNDLED_SELFCHECK=OFF); check_bundled calls it first.
void require_bundled_checks();

// The rules check_bundled checks, in its order: every rule of names(), or a rule added to the
// library would be passed over by `fusekit selfcheck` without a word.
std::vector<std::string_view> checked_rules();

}  // namespace fusekit::rules
