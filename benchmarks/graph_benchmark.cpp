// Cost of indexing a model against the cost of parsing it: the index must be a small fraction of
// what reading the protobuf already costs. Compare the two lines per size; absolute times are
// noise.
#include <benchmark/benchmark.h>

#include "dit_model.hpp"
#include "fusekit/graph/facts.hpp"
#include "fusekit/graph/graph.hpp"

namespace {

std::string dit_bytes(int layers) {
  return fusekit::detail::serialize_deterministic(
      fusekit::samples::make_dit_model({.layers = layers}));
}

void parse_protobuf(benchmark::State& state) {
  const std::string bytes = dit_bytes(int(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(fusekit::parse_model(bytes));
  state.SetBytesProcessed(std::int64_t(state.iterations() * bytes.size()));
}

void build_index(benchmark::State& state) {
  const fusekit::model m = fusekit::parse_model(dit_bytes(int(state.range(0))));
  for (auto _ : state) {
    fusekit::graph g(m);
    benchmark::DoNotOptimize(g.node_count());
  }
  state.counters["nodes"] = double(m.proto.graph().node_size());
}

// The facts oracle over the whole graph (shapes and folded values for every value), per node:
// it must stay flat as the model grows (one pass, linear).
void infer_facts(benchmark::State& state) {
  const fusekit::model m = fusekit::parse_model(dit_bytes(int(state.range(0))));
  const fusekit::graph g(m);
  for (auto _ : state) {
    fusekit::facts f(g);
    benchmark::DoNotOptimize(f.contradictions().size());
  }
  state.counters["nodes"] = double(g.node_count());
  state.counters["per_node"] =
      benchmark::Counter(double(state.iterations()) * double(g.node_count()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

}  // namespace

BENCHMARK(infer_facts)->Arg(22)->Arg(220)->Arg(2200)->Unit(benchmark::kMicrosecond);
BENCHMARK(parse_protobuf)->Arg(22)->Arg(220)->Unit(benchmark::kMicrosecond);
BENCHMARK(build_index)->Arg(22)->Arg(220)->Unit(benchmark::kMicrosecond);
