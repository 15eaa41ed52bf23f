// The pattern DSL in one include:
//
//   using namespace fusekit::pattern;
//   constexpr auto scores = op<"MatMul">(capture<"q">, capture<"kt">);
//   constexpr auto scaled = commutative(op<"Mul">(optional<"Cast">(scores),
//   constant_scalar<"scale">)); constexpr auto probs  =
//   optional<"Cast">(op<"Softmax">(scaled).attr<"axis">(last_axis)); constexpr auto dit    =
//   op<"MatMul">(probs, capture<"v">);
//
//   if (auto m = match(dit, g, node)) use(m.get<"scale">());
#pragma once

#include "fusekit/pattern/captures.hpp"
#include "fusekit/pattern/context.hpp"
#include "fusekit/pattern/examples.hpp"
#include "fusekit/pattern/fixed_string.hpp"
#include "fusekit/pattern/match.hpp"
#include "fusekit/pattern/matchers.hpp"
#include "fusekit/pattern/predicates.hpp"
#include "fusekit/pattern/sources.hpp"
