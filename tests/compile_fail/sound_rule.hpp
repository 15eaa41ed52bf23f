// What the compile-fail cases of a rule's members share: a sound rule, which compiles in every
// build (the control), and which each case derives from to mistype one member.
#pragma once

#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/any_rule.hpp"

using namespace fusekit::pattern;
using fusekit::graph;
using fusekit::node_id;
using fusekit::rewrite::emitter;
using fusekit::rewrite::verdict;

struct sound {
  static constexpr std::string_view name = "sound";
  static constexpr auto pattern = op<"Relu">(capture<"x">);
  static void emit(const graph&, const auto& m, emitter& e) {
    e.replace_root(e.value(get<"x">(m)));
  }
};
const auto sound_rule = fusekit::rewrite::any_rule::of<sound>();
