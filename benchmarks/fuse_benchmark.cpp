// `fuse` on synthetic F5-TTS-like DiT trunks of 1 to 10,000 layers, end to end and by phase: parse,
// index, match (names, facts, guards, emits and edit checks included), commit, serialise; fuse_run
// is the whole fuse step (every pass) between parse and serialise, fuse_fixpoint its last pass
// alone (the one that finds nothing). Read per-node times
// across sizes (flat means linear) and each phase against parse of the same file; absolute times
// are noise. benchmarks/ratios.py turns a JSON run into the ratios RESULTS.md records.
#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <vector>

#include "dit_model.hpp"
#include "fusekit/io/model.hpp"
#include "fusekit/rewrite/driver.hpp"
#include "fusekit/rules/all.hpp"

namespace {

using namespace fusekit;

const std::string& dit_file(int layers) {
  static std::map<int, std::string> files;
  auto [it, added] = files.try_emplace(layers);
  if (added)
    it->second = detail::serialize_deterministic(samples::make_dit_model({.layers = layers}));
  return it->second;
}

void per_node(benchmark::State& state, const model& m) {
  state.counters["nodes"] = double(m.proto.graph().node_size());
  state.counters["per_node"] = benchmark::Counter(
      double(m.proto.graph().node_size()),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["bytes"] = double(dit_file(int(state.range(0))).size());
}

// The rules fuse_all runs, with their candidates of one pass.
struct one_pass {
  model m;
  std::unique_ptr<graph> g;
  std::unique_ptr<rewrite::name_pool> names;
  std::vector<rewrite::detail::candidate> found;
  rewrite::report out;

  explicit one_pass(const std::string& bytes) : m(parse_model(bytes)) {
    g = std::make_unique<graph>(m);
    names = std::make_unique<rewrite::name_pool>(m.proto);
  }
  void collect() {
    const rules::attention_options attention;
    const rewrite::options run;
    rewrite::detail::attempt_sink sink{run, *names, found, out};
    rewrite::detail::collect(*g, rules::bundled(attention), sink);
  }
};

void fuse_parse(benchmark::State& state) {
  const std::string& bytes = dit_file(int(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(parse_model(bytes));
  per_node(state, parse_model(bytes));
}

void fuse_index(benchmark::State& state) {
  const model m = parse_model(dit_file(int(state.range(0))));
  for (auto _ : state) {
    graph g(m);
    benchmark::DoNotOptimize(g.node_count());
  }
  per_node(state, m);
}

// Names, facts, every rule at every anchor: what a pass costs before it changes anything.
void fuse_match(benchmark::State& state) {
  const std::string& bytes = dit_file(int(state.range(0)));
  for (auto _ : state) {
    state.PauseTiming();
    auto p = std::make_unique<one_pass>(bytes);
    state.ResumeTiming();
    p->names = std::make_unique<rewrite::name_pool>(p->m.proto);
    p->collect();
    benchmark::DoNotOptimize(p->found.size());
    state.PauseTiming();
    p.reset();
    state.ResumeTiming();
  }
  per_node(state, parse_model(bytes));
}

void fuse_commit(benchmark::State& state) {
  const std::string& bytes = dit_file(int(state.range(0)));
  for (auto _ : state) {
    state.PauseTiming();
    auto p = std::make_unique<one_pass>(bytes);
    p->collect();
    const auto chosen = rewrite::detail::select(p->found);
    state.ResumeTiming();
    {
      rewrite::detail::journal edits;
      rewrite::detail::commit(*p->g, p->m.proto, chosen, edits, p->out, *p->names);
      edits.keep();
    }
    state.PauseTiming();
    if (p->out.fusions.size() != std::size_t(state.range(0))) state.SkipWithError("not all fused");
    p.reset();
    state.ResumeTiming();
  }
  per_node(state, parse_model(bytes));
}

void fuse_serialise(benchmark::State& state) {
  model m = parse_model(dit_file(int(state.range(0))));
  rules::fuse_all(m);
  for (auto _ : state) benchmark::DoNotOptimize(detail::serialize_deterministic(m.proto));
  per_node(state, parse_model(dit_file(int(state.range(0)))));
}

// fuse_all from a parsed model to a fused one: every pass, to the fixed point.
void fuse_run(benchmark::State& state) {
  const std::string& bytes = dit_file(int(state.range(0)));
  for (auto _ : state) {
    state.PauseTiming();
    auto m = std::make_unique<model>(parse_model(bytes));
    state.ResumeTiming();
    const auto report = rules::fuse_all(*m);
    state.PauseTiming();
    if (report.fusions.size() != std::size_t(state.range(0))) state.SkipWithError("not all fused");
    m.reset();
    state.ResumeTiming();
  }
  per_node(state, parse_model(bytes));
}

// The pass that proves the fixed point, alone: fuse_all on a model it has fused already indexes
// it, infers its facts and tries every rule at every anchor, and finds nothing. It bounds what
// matching again only near the first pass's edits could save.
void fuse_fixpoint(benchmark::State& state) {
  const std::string& bytes = dit_file(int(state.range(0)));
  model fused = parse_model(bytes);
  rules::fuse_all(fused);
  for (auto _ : state) {
    const auto report = rules::fuse_all(fused);
    if (!report.fusions.empty()) state.SkipWithError("the fused model fused again");
  }
  per_node(state, parse_model(bytes));
}

// Bytes in, bytes out: parse, fuse, serialise.
void fuse_end_to_end(benchmark::State& state) {
  const std::string& bytes = dit_file(int(state.range(0)));
  for (auto _ : state) {
    model m = parse_model(bytes);
    rules::fuse_all(m);
    benchmark::DoNotOptimize(detail::serialize_deterministic(m.proto));
  }
  per_node(state, parse_model(bytes));
}

void sizes(benchmark::internal::Benchmark* b) {
  for (int layers : {1, 10, 100, 1000, 10000}) b->Arg(layers);
  b->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK(fuse_parse)->Apply(sizes);
BENCHMARK(fuse_index)->Apply(sizes);
BENCHMARK(fuse_match)->Apply(sizes);
BENCHMARK(fuse_commit)->Apply(sizes);
BENCHMARK(fuse_serialise)->Apply(sizes);
BENCHMARK(fuse_run)->Apply(sizes);
BENCHMARK(fuse_fixpoint)->Apply(sizes);
BENCHMARK(fuse_end_to_end)->Apply(sizes);
