// Op types as small integers. Every ai.onnx op the linked onnx release defines and the ONNX Runtime
// ops the rules emit or match (known_ops.hpp, written at build time from the release's schemas)
// have a fixed id known at compile time, so a pattern's op test is one integer compare and an
// unknown op name can fail to compile. Other ops get ids per model.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "fusekit/engine.hpp"
#include "fusekit/graph/known_ops.hpp"
#include "fusekit/graph/op_info.hpp"

namespace fusekit {

using op_id = std::uint32_t;

inline constexpr std::size_t known_op_count = std::size(known_ops);

// "ai.onnx" and "" name the same domain.
constexpr std::string_view canonical_domain(std::string_view domain) {
  return domain == "ai.onnx" ? std::string_view{} : domain;
}

constexpr std::optional<op_id> find_known_op(std::string_view domain, std::string_view name) {
  domain = canonical_domain(domain);
  for (std::size_t i = 0; i < known_op_count; ++i)
    if (known_ops[i].domain == domain && known_ops[i].name == name) return op_id(i);
  return std::nullopt;
}

// Known ops first, then whatever else a model uses, in order of first appearance: ids are
// deterministic for a given model. The known ops' index is built once for every model: a graph is
// made for each instance a rule's selfcheck judges, thousands of small ones.
class op_interner {
 public:
  op_id intern(std::string_view domain, std::string_view name) {
    std::string k = key(canonical_domain(domain), name);
    if (auto it = known_ids().find(k); it != known_ids().end()) return it->second;
    if (auto it = extra_ids_.find(k); it != extra_ids_.end()) return it->second;
    const op_id id = op_id(known_op_count + extra_.size());
    extra_.push_back({std::string(canonical_domain(domain)), std::string(name)});
    extra_ids_.emplace(std::move(k), id);
    return id;
  }

  std::optional<op_id> find(std::string_view domain, std::string_view name) const {
    const std::string k = key(canonical_domain(domain), name);
    if (auto it = known_ids().find(k); it != known_ids().end()) return it->second;
    if (auto it = extra_ids_.find(k); it != extra_ids_.end()) return it->second;
    return std::nullopt;
  }

  std::string_view domain(op_id id) const {
    return id < known_op_count ? known_ops[id].domain : extra_[id - known_op_count].domain;
  }
  std::string_view name(op_id id) const {
    return id < known_op_count ? known_ops[id].name : extra_[id - known_op_count].name;
  }
  std::size_t size() const { return known_op_count + extra_.size(); }

 private:
  struct entry {
    std::string domain;
    std::string name;
  };
  static std::string key(std::string_view domain, std::string_view name) {
    std::string k(domain);
    k += '\0';
    k += name;
    return k;
  }
  static const std::unordered_map<std::string, op_id>& known_ids();

  std::unordered_map<std::string, op_id> extra_ids_;
  std::deque<entry> extra_;
};

#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE const std::unordered_map<std::string, op_id>& op_interner::known_ids() {
  static const std::unordered_map<std::string, op_id> ids = [] {
    std::unordered_map<std::string, op_id> out;
    for (std::size_t i = 0; i < known_op_count; ++i)
      out.emplace(key(known_ops[i].domain, known_ops[i].name), op_id(i));
    return out;
  }();
  return ids;
}
#endif

}  // namespace fusekit
