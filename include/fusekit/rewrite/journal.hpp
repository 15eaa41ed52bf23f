// Edits of a model's repeated fields (nodes, initializers, opset imports) made in place and undone
// on demand: elements move by pointer, never by copy; those an edit takes out are kept until the
// run is kept, so a failure anywhere in a run restores the model as it came, or as it was at the
// last checkpoint.
#pragma once

#include <google/protobuf/repeated_ptr_field.h>

#include <algorithm>
#include <memory>
#include <vector>

namespace fusekit::rewrite::detail {

// The field's elements must live on the heap, as every fusekit::model's do (no arena): with an
// arena, protobuf would copy extracted elements and the pointers kept here would go stale.
class journal {
 public:
  journal() = default;
  journal(const journal&) = delete;
  journal& operator=(const journal&) = delete;
  ~journal() {
    if (!kept_) undo();
  }

  // Makes `field` hold `after`, in that order: elements it holds already, and `added`, which it
  // takes over. Everything that may throw happens before the field changes.
  template <class T>
  void replace(google::protobuf::RepeatedPtrField<T>& field, const std::vector<T*>& after,
               std::vector<std::unique_ptr<T>> added) {
    entries_.reserve(entries_.size() + 1);
    entry e{.field = &field,
            .before = {field.pointer_begin(), field.pointer_end()},
            .added = {},
            .removed = {},
            .undo = &undo_as<T>,
            .release = &release_as<T>};
    std::vector<void*> staying(after.begin(), after.end());
    std::sort(staying.begin(), staying.end());
    for (void* p : e.before)
      if (!std::binary_search(staying.begin(), staying.end(), p)) e.removed.push_back(p);
    e.added.reserve(added.size());
    std::vector<T*> scratch(std::size_t(field.size()));
    field.Reserve(int(after.size()));
    // No allocation from here on: the field and the journal change together.
    for (auto& a : added) e.added.push_back(a.release());
    field.ExtractSubrange(0, field.size(), scratch.data());
    for (T* p : after) field.AddAllocated(p);
    entries_.push_back(std::move(e));
  }

  // The edits so far are final, the later ones still undone on failure: what the edits took out
  // is deleted.
  void checkpoint() {
    for (entry& e : entries_) e.release(e);
    entries_.clear();
  }

  // The run succeeded: what the edits took out is deleted.
  void keep() {
    for (entry& e : entries_) e.release(e);
    entries_.clear();
    kept_ = true;
  }

  // Every field back as it was, latest edit first.
  void undo() {
    for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) it->undo(*it);
    entries_.clear();
  }

 private:
  struct entry {
    void* field;
    std::vector<void*> before;   // the field's elements before the edit
    std::vector<void*> added;    // elements the edit created
    std::vector<void*> removed;  // elements of `before` the edit took out: the journal's
    void (*undo)(entry&);
    void (*release)(entry&);
  };

  template <class T>
  static void undo_as(entry& e) {
    auto& field = *static_cast<google::protobuf::RepeatedPtrField<T>*>(e.field);
    std::vector<T*> now(std::size_t(field.size()));
    field.ExtractSubrange(0, field.size(), now.data());
    for (void* p : e.added) delete static_cast<T*>(p);
    for (void* p : e.before) field.AddAllocated(static_cast<T*>(p));
  }

  template <class T>
  static void release_as(entry& e) {
    for (void* p : e.removed) delete static_cast<T*>(p);
  }

  std::vector<entry> entries_;
  bool kept_ = false;
};

}  // namespace fusekit::rewrite::detail
