// A Pad of zeros before a Conv is folded into the Conv's own pads, which pad with zeros too:
//
//   x ── Pad(pads, 0) ── Conv(W, b?) ── y   ==>   x ── Conv(W, b?, pads + Pad's) ── y
//
// Exact where the Pad is of constant mode and a proven zero fill (or none), its pads proven for
// every axis (a Pad naming its axes, opset 18 on, is left as it is), none negative (a crop) and
// none on batch or channels, and the Conv states its pads (no auto_pad, which would pad again
// from the padded size): every output element then reads the same window of the same
// zero-padded input. TensorFlow-style "same" padding (timm's tf_ models, converted Keras models)
// writes such a Pad before each strided Conv; a runtime that sees it pads the whole activation
// into a fresh tensor first.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "fusekit/graph/facts.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"
#include "fusekit/rewrite/rule.hpp"
#include "selfcheck_inputs.hpp"

namespace fusekit::rules {
using namespace pattern;

struct pad_into_conv {
  static constexpr std::string_view name = "pad-into-conv";
  static constexpr int priority = -1;

  // The Conv's pads with the Pad's added, where the fold is exact (above).
  static std::optional<std::vector<std::int64_t>> merged_pads(const graph& g, node_id conv) {
    const facts& f = facts_of(g);
    // The root's condition is asked before its inputs are matched: the Pad is not known yet.
    const node_id pad = g.input(conv, 0) == no_id ? no_id : g.producer(g.input(conv, 0));
    if (pad == no_id || g.op_type(pad) != "Pad" || !g.domain(pad).empty() ||
        g.input(pad, 0) == no_id || g.input(pad, 1) == no_id)
      return std::nullopt;
    const auto rank = f.rank(g.input(pad, 0));
    if (!rank || *rank < 3) return std::nullopt;
    const std::size_t spatial = *rank - 2;
    if (g.attribute_string(pad, "mode").value_or("constant") != "constant") return std::nullopt;
    if (g.attribute_string(conv, "auto_pad").value_or("NOTSET") != "NOTSET") return std::nullopt;
    if (g.input(pad, 2) != no_id && f.real_scalar(g.input(pad, 2)) != 0.0) return std::nullopt;
    const content_fact& p = f.content(g.input(pad, 1));
    if (!p.known || p.real || p.ints.size() != 2 * *rank) return std::nullopt;
    std::vector<std::int64_t> out(2 * spatial, 0);
    if (const auto own = g.attribute_ints(conv, "pads")) {
      if (own->size() != out.size()) return std::nullopt;
      out.assign(own->begin(), own->end());
    }
    for (std::size_t axis = 0; axis < *rank; ++axis) {
      const auto begin = p.ints[axis].constant(), end = p.ints[axis + *rank].constant();
      if (!begin || !end || *begin < 0 || *end < 0) return std::nullopt;
      if (axis < 2) {
        if (*begin != 0 || *end != 0) return std::nullopt;
        continue;
      }
      out[axis - 2] += *begin;
      out[axis - 2 + spatial] += *end;
    }
    return out;
  }

  // No near miss, as for the eliminations: most Pads before a Conv are folds or reflections.
  static constexpr auto pattern =
      op<"Conv">(op<"Pad">(capture<"x">, capture<"pads">, maybe(capture<"fill">)), capture<"w">,
                 maybe(capture<"b">))
          .where("of pads the Conv's own can state",
                 [](const graph& g, node_id n) { return merged_pads(g, n).has_value(); });

  // One pad before and after each spatial axis of x, none on batch and channels.
  struct spatial_pads {
    static auto write(auto& w) {
      const std::size_t rank = w.dims("x")->size();
      std::vector<double> pads(2 * rank, 1.0);
      for (std::size_t side : {std::size_t{0}, rank}) pads[side] = pads[side + 1] = 0.0;
      return w.initializer(dtype::int64, {std::int64_t(2 * rank)}, pads);
    }
  };
  static constexpr auto sources =
      pattern::sources(source<"pads">(written<spatial_pads>),
                       source<"fill">(written<selfcheck_inputs::scalar_of_type<0>>));

  static bool resembles(const graph&, node_id) { return false; }

  static void emit(const graph& g, const auto& m, rewrite::emitter& e) {
    std::vector<std::string> inputs{e.value(get<"x">(m)), e.value(get<"w">(m))};
    if (has<"b">(m)) inputs.push_back(e.value(get<"b">(m)));
    e.replace_root(
        e.copy(m.root(), std::move(inputs), {build::attr("pads", *merged_pads(g, m.root()))}));
  }
};

}  // namespace fusekit::rules
