// A Pad before a Conv or a pool is folded into the node's own pads, where they pad with what the
// Pad fills:
//
//   x ── Pad(pads, 0) ── Conv(W, b?) ── y   ==>   x ── Conv(W, b?, pads + Pad's) ── y
//   x ── Pad(pads, −∞) ── MaxPool ── y       ==>   x ── MaxPool(pads + Pad's) ── y
//   x ── Pad(pads, 0) ── AveragePool ── y    ==>   x ── AveragePool(pads + Pad's,
//                                                        count_include_pad 1) ── y
//
// Exact where the Pad is of constant mode and a proven fill (none is zero), its pads proven for
// every axis (a Pad naming its axes, opset 18 on, is left as it is), none negative (a crop) and
// none on batch or channels, and the node states its pads (no auto_pad, which would pad again
// from the padded size): every output element then reads the same window of the same padded
// input. A Conv's pads are zeros; a MaxPool's never win a maximum, as −∞ does not; an
// AveragePool's are zeros counted in each mean with count_include_pad 1, which the fold sets
// where the pool has no pads of its own to count otherwise. A pool is left where a pad would
// reach its window's size (ONNX Runtime refuses such a pool), where its ceil_mode is 1 (its last
// window depends on where the input ends) and a MaxPool whose indices are read (they index the
// padded input). TensorFlow-style "same" padding (timm's tf_ models, converted Keras models)
// writes such a Pad before each strided Conv and pool; a runtime that sees it pads the whole
// activation into a fresh tensor first.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fusekit/graph/facts.hpp"
#include "fusekit/pattern/pattern.hpp"
#include "fusekit/rewrite/emitter.hpp"
#include "fusekit/rewrite/rule.hpp"
#include "selfcheck_inputs.hpp"

namespace fusekit::rules {
using namespace pattern;

namespace pad_folding {

// The pads of n, a Conv or a pool, with those of the Pad it reads added, where the fold is exact
// (above) and n's own pads stand for `fill`.
inline std::optional<std::vector<std::int64_t>> merged_pads(const graph& g, node_id n,
                                                            double fill) {
  const facts& f = facts_of(g);
  // The root's condition is asked before its inputs are matched: the Pad is not known yet.
  const node_id pad = g.input(n, 0) == no_id ? no_id : g.producer(g.input(n, 0));
  if (pad == no_id || g.op_type(pad) != "Pad" || !g.domain(pad).empty() ||
      g.input(pad, 0) == no_id || g.input(pad, 1) == no_id)
    return std::nullopt;
  const auto rank = f.rank(g.input(pad, 0));
  if (!rank || *rank < 3) return std::nullopt;
  const std::size_t spatial = *rank - 2;
  if (g.attribute_string(pad, "mode").value_or("constant") != "constant") return std::nullopt;
  if (g.attribute_string(n, "auto_pad").value_or("NOTSET") != "NOTSET") return std::nullopt;
  const std::optional<double> filled =
      g.input(pad, 2) == no_id ? std::optional<double>(0.0) : f.real_scalar(g.input(pad, 2));
  if (filled != fill) return std::nullopt;
  const auto p = f.ints(g.input(pad, 1));
  if (!p || p->size() != 2 * *rank) return std::nullopt;
  std::vector<std::int64_t> out(2 * spatial, 0);
  if (const auto own = g.attribute_ints(n, "pads")) {
    if (own->size() != out.size()) return std::nullopt;
    out.assign(own->begin(), own->end());
  }
  for (std::size_t axis = 0; axis < *rank; ++axis) {
    const std::int64_t begin = (*p)[axis], end = (*p)[axis + *rank];
    if (begin < 0 || end < 0) return std::nullopt;
    if (axis < 2) {
      if (begin != 0 || end != 0) return std::nullopt;
      continue;
    }
    out[axis - 2] += begin;
    out[axis - 2 + spatial] += end;
  }
  return out;
}

// The pads of a pool the fold can state: a MaxPool's with −∞ filled, an AveragePool's with zeros
// it counts, or may be told to count (it has none of its own); each below the window's size.
inline std::optional<std::vector<std::int64_t>> merged_pool_pads(const graph& g, node_id pool) {
  if (g.attribute_int(pool, "ceil_mode").value_or(0) != 0) return std::nullopt;
  const bool max = g.op_type(pool) == "MaxPool";
  if (max) {
    const value_id indices = g.output(pool, 1);
    if (indices != no_id && (g.is_graph_output(indices) || !g.consumers(indices).empty()))
      return std::nullopt;
  } else if (g.attribute_int(pool, "count_include_pad").value_or(0) == 0) {
    const auto own = g.attribute_ints(pool, "pads");
    if (own && std::any_of(own->begin(), own->end(), [](std::int64_t p) { return p != 0; }))
      return std::nullopt;
  }
  auto out = merged_pads(g, pool, max ? -std::numeric_limits<double>::infinity() : 0.0);
  const auto kernel = g.attribute_ints(pool, "kernel_shape");
  if (!out || !kernel || 2 * kernel->size() != out->size()) return std::nullopt;
  for (std::size_t i = 0; i < out->size(); ++i)
    if ((*out)[i] >= (*kernel)[i % kernel->size()]) return std::nullopt;
  return out;
}

}  // namespace pad_folding

struct pad_into_conv {
  static constexpr std::string_view name = "pad-into-conv";
  static constexpr int priority = -1;

  // No near miss, as for the eliminations: most Pads before a Conv are folds or reflections.
  static constexpr auto pattern =
      op<"Conv">(op<"Pad">(capture<"x">, capture<"pads">, maybe(capture<"fill">)), capture<"w">,
                 maybe(capture<"b">))
          .where("of pads the Conv's own can state", [](const graph& g, node_id n) {
            return pad_folding::merged_pads(g, n, 0.0).has_value();
          });

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
    e.replace_root(e.copy(m.root(), std::move(inputs),
                          {build::attr("pads", *pad_folding::merged_pads(g, m.root(), 0.0))}));
  }
};

namespace pad_folding {

// x of a rank the pads are written for: an image, as a 2-D pool reads.
struct image {
  static auto write(auto& w) { return w.input(w.type(), {2, 3, 8, 8}); }
};
struct minus_infinity {
  static auto write(auto& w) {
    return w.initializer(w.type(), {}, {-std::numeric_limits<double>::infinity()});
  }
};

// The Pad before a pool of op `Pool`, filled as the pool's own pads are (`Fill`, for selfcheck;
// a Pad without fill pads with zeros, which only an AveragePool's are).
template <fixed_string Pool, class Fill>
struct into_pool {
  static constexpr bool zeros = Pool.view() == "AveragePool";
  static constexpr auto padded = [] {
    if constexpr (zeros)
      return op<"Pad">(capture<"x">, capture<"pads">, maybe(capture<"fill">));
    else
      return op<"Pad">(capture<"x">, capture<"pads">, capture<"fill">);
  }();
  static constexpr int priority = -1;
  static constexpr auto pattern = op<Pool>(padded).where(
      "of pads the pool's own can state",
      [](const graph& g, node_id n) { return merged_pool_pads(g, n).has_value(); });
  static constexpr auto sources = pattern::sources(
      source<"x">(written<image>), source<"pads">(written<pad_into_conv::spatial_pads>),
      source<"fill">(written<Fill>));

  static bool resembles(const graph&, node_id) { return false; }

  // An AveragePool counts the pads the Pad wrote: they were elements.
  static void emit(const graph& g, const auto& m, rewrite::emitter& e) {
    const build::attr pads("pads", *merged_pool_pads(g, m.root()));
    const std::string x = e.value(get<"x">(m));
    e.replace_root(zeros ? e.copy(m.root(), {x}, {pads, {"count_include_pad", 1}})
                         : e.copy(m.root(), {x}, {pads}));
  }
};

}  // namespace pad_folding

struct pad_into_max_pool : pad_folding::into_pool<"MaxPool", pad_folding::minus_infinity> {
  static constexpr std::string_view name = "pad-into-max-pool";
};
struct pad_into_average_pool
    : pad_folding::into_pool<"AveragePool", selfcheck_inputs::scalar_of_type<0>> {
  static constexpr std::string_view name = "pad-into-average-pool";
};

}  // namespace fusekit::rules
