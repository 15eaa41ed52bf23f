// Names to dense ids without a string or an allocation per name: open addressing over eight-byte
// slots (part of the name's hash and the id), the names themselves read back from wherever the
// caller keeps them. The index resolves every input of every node through one of these: it is
// the index's hottest lookup, and at 16 to 32 bytes a name it takes at most half the memory of a
// node-based hash map.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace fusekit {

// Eight bytes a step (read little-endian whatever the machine, so that fresh names come out the
// same on every platform), each multiplied in; then a final mix so that the low bits, which pick
// the slot, depend on every byte.
inline std::uint64_t name_hash(std::string_view s) {
  auto word = [&](std::size_t at, std::size_t n) {
    std::uint64_t w = 0;
    for (std::size_t k = 0; k < n; ++k)
      w |= std::uint64_t(static_cast<unsigned char>(s[at + k])) << (8 * k);
    return w;
  };
  std::uint64_t h = 0x9e3779b97f4a7c15ull ^ s.size();
  std::size_t at = 0;
  for (; at + 8 <= s.size(); at += 8) {
    h = (h ^ word(at, 8)) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  h = (h ^ word(at, s.size() - at)) * 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

// `NameOf` maps an id given to insert() back to its name (a view that outlives the table).
template <class NameOf>
class name_table {
 public:
  explicit name_table(NameOf name_of) : name_of_(name_of) {}

  void reserve(std::size_t n) {
    std::size_t want = 64;
    while (want < 2 * n) want *= 2;
    if (want > slots_.size()) rehash(want);
  }

  std::optional<std::uint32_t> find(std::string_view name) const {
    if (slots_.empty()) return std::nullopt;
    const std::uint64_t h = name_hash(name);
    for (std::size_t i = h & mask(); slots_[i] != empty; i = (i + 1) & mask())
      if (tag(slots_[i]) == tag_of(h) && name_of_(id(slots_[i])) == name) return id(slots_[i]);
    return std::nullopt;
  }
  bool contains(std::string_view name) const { return find(name).has_value(); }

  // The caller has checked that no id of that name is in the table.
  void insert(std::string_view name, std::uint32_t id) {
    if (2 * (size_ + 1) > slots_.size()) rehash(slots_.empty() ? 64 : 2 * slots_.size());
    place(name_hash(name), id);
    ++size_;
  }

 private:
  static constexpr std::uint64_t empty = 0;

  // A slot: the hash's high 32 bits, then id + 1 (so that no filled slot is `empty`).
  static std::uint32_t tag_of(std::uint64_t h) { return std::uint32_t(h >> 32); }
  static std::uint32_t tag(std::uint64_t slot) { return std::uint32_t(slot >> 32); }
  static std::uint32_t id(std::uint64_t slot) { return std::uint32_t(slot) - 1; }
  std::size_t mask() const { return slots_.size() - 1; }

  void place(std::uint64_t h, std::uint32_t id) {
    std::size_t i = h & mask();
    while (slots_[i] != empty) i = (i + 1) & mask();
    slots_[i] = (std::uint64_t(tag_of(h)) << 32) | (std::uint64_t(id) + 1);
  }

  // Growing needs every hash again: the low bits that pick a slot are not kept.
  void rehash(std::size_t capacity) {
    std::vector<std::uint64_t> old = std::move(slots_);
    slots_.assign(capacity, empty);
    for (std::uint64_t s : old)
      if (s != empty) place(name_hash(name_of_(id(s))), id(s));
  }

  NameOf name_of_;
  std::vector<std::uint64_t> slots_;
  std::size_t size_ = 0;
};

}  // namespace fusekit
