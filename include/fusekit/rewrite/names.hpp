// Fresh, deterministic names that nothing in the model uses: "<stem>_<k>" with the smallest k not
// taken, in O(1) amortised per name.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fusekit/engine.hpp"
#include "fusekit/graph/name_table.hpp"

namespace fusekit::rewrite {

// A set of 64-bit name hashes, open addressing: eight bytes a slot, no string kept. Two names with
// one hash only make fresh() skip a free name, never hand out a taken one.
class hash_set {
 public:
  // False when the hash was there already.
  bool insert(std::uint64_t h) {
    if (h == empty) h = 1;
    if (2 * (size_ + 1) > slots_.size()) grow();
    for (std::size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i] == h) return false;
      if (slots_[i] == empty) {
        slots_[i] = h;
        ++size_;
        return true;
      }
    }
  }
  void reserve(std::size_t n) {
    while (slots_.size() < 2 * n) grow();
  }

 private:
  static constexpr std::uint64_t empty = 0;

  void grow() {
    std::vector<std::uint64_t> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : 2 * old.size(), empty);
    size_ = 0;
    for (std::uint64_t h : old)
      if (h != empty) insert(h);
  }

  std::vector<std::uint64_t> slots_;
  std::size_t size_ = 0;
};

// Every name the model defines or reads, in every scope: graph inputs, outputs, value_info,
// initializers (sparse ones too), node names, inputs and outputs, If/Loop/Scan bodies and the
// bodies of model-local functions. Node and value names share one space, so a fresh name is
// unambiguous in reports as well as in the graph.
//
// The names are gathered when the first fresh name is asked for, from the model as it is then: a
// run that emits nothing (a model fused already) never reads them.
class name_pool {
 public:
  explicit name_pool(const onnx::ModelProto& m) : model_(&m) {}

  std::string fresh(std::string_view stem);

 private:
  void take(std::string_view name) { taken_.insert(name_hash(name)); }

  void collect_all();

  void collect(const onnx::GraphProto& g) {
    for (const auto& v : g.input()) take(v.name());
    for (const auto& v : g.output()) take(v.name());
    for (const auto& v : g.value_info()) take(v.name());
    for (const auto& t : g.initializer()) take(t.name());
    for (const auto& s : g.sparse_initializer()) {
      take(s.values().name());
      take(s.indices().name());
    }
    for (const auto& node : g.node()) collect(node);
  }

  void collect(const onnx::NodeProto& node) {
    take(node.name());
    for (const auto& v : node.input()) take(v);
    for (const auto& v : node.output()) take(v);
    for (const auto& a : node.attribute()) {
      if (a.has_g()) collect(a.g());
      for (const auto& body : a.graphs()) collect(body);
    }
  }

  const onnx::ModelProto* model_;  // until its names are collected
  hash_set taken_;
  std::unordered_map<std::uint64_t, std::uint64_t> next_;  // per stem: the first k not yet tried
};

#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::string name_pool::fresh(std::string_view stem) {
  if (model_ != nullptr) collect_all();
  // Stems that share a hash share a counter: it only says where to start looking.
  std::uint64_t& k = next_[name_hash(stem)];
  std::string name;
  name.reserve(stem.size() + 8);
  for (;; ++k) {
    name.assign(stem);
    name += '_';
    name += std::to_string(k);
    if (taken_.insert(name_hash(name))) {
      ++k;
      return name;
    }
  }
}

FUSEKIT_ENGINE_INLINE void name_pool::collect_all() {
  const onnx::ModelProto& m = *std::exchange(model_, nullptr);
  taken_.reserve(std::size_t(m.graph().node_size()) * 3 +
                 std::size_t(m.graph().initializer_size()));
  collect(m.graph());
  for (const auto& f : m.functions()) {
    take(f.name());
    for (const auto& v : f.input()) take(v);
    for (const auto& v : f.output()) take(v);
    for (const auto& node : f.node()) collect(node);
  }
}
#endif

}  // namespace fusekit::rewrite
