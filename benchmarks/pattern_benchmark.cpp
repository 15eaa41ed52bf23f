// Match cost per graph node for the multi-level DiT attention pattern over an F5-TTS-sized trunk,
// with and without explanations. Read the per-node time against graph_benchmark's index and parse
// times from the same run.
#include <benchmark/benchmark.h>

#include "dit_model.hpp"
#include "fusekit/graph/graph.hpp"
#include "fusekit/pattern/pattern.hpp"

namespace {

using namespace fusekit::pattern;

constexpr auto scores = op<"MatMul">(capture<"q">, capture<"kt">);
constexpr auto scaled = commutative(op<"Mul">(optional<"Cast">(scores), constant_scalar<"scale">));
constexpr auto probs = optional<"Cast">(op<"Softmax">(scaled).attr<"axis">(last_axis));
constexpr auto dit = op<"MatMul">(probs, capture<"v">);

struct f5_like {
  onnx::ModelProto model = fusekit::samples::make_dit_model({.layers = 22});
  fusekit::graph g{model};
};

void match_every_anchor(benchmark::State& state) {
  const f5_like m;
  const auto anchors = fusekit::pattern::anchors(dit, m.g);
  std::size_t found = 0;
  for (auto _ : state) {
    found = 0;
    for (fusekit::node_id n : anchors) found += bool(match(dit, m.g, n));
    benchmark::DoNotOptimize(found);
  }
  if (found != 22) state.SkipWithError("expected 22 attention blocks");
  state.counters["per_node"] =
      benchmark::Counter(double(m.g.node_count()), benchmark::Counter::kIsIterationInvariantRate |
                                                       benchmark::Counter::kInvert);
}

void trace_every_anchor(benchmark::State& state) {
  const f5_like m;
  for (auto _ : state) benchmark::DoNotOptimize(trace(dit, m.g));
  state.counters["per_node"] =
      benchmark::Counter(double(m.g.node_count()), benchmark::Counter::kIsIterationInvariantRate |
                                                       benchmark::Counter::kInvert);
}

}  // namespace

BENCHMARK(match_every_anchor)->Unit(benchmark::kMicrosecond);
BENCHMARK(trace_every_anchor)->Unit(benchmark::kMicrosecond);
