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
// deterministic for a given model.
class op_interner {
 public:
  op_interner();

  op_id intern(std::string_view domain, std::string_view name) {
    std::string k = key(canonical_domain(domain), name);
    if (auto it = ids_.find(k); it != ids_.end()) return it->second;
    const op_id id = op_id(known_op_count + extra_.size());
    extra_.push_back({std::string(canonical_domain(domain)), std::string(name)});
    ids_.emplace(std::move(k), id);
    return id;
  }

  std::optional<op_id> find(std::string_view domain, std::string_view name) const {
    if (auto it = ids_.find(key(canonical_domain(domain), name)); it != ids_.end())
      return it->second;
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

  std::unordered_map<std::string, op_id> ids_;
  std::deque<entry> extra_;
};

#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE op_interner::op_interner() {
  for (std::size_t i = 0; i < known_op_count; ++i)
    ids_.emplace(key(known_ops[i].domain, known_ops[i].name), op_id(i));
}
#endif

}  // namespace fusekit
