// The one exception type fusekit throws: every failure names where it happened.
#pragma once

#include <stdexcept>
#include <string>

namespace fusekit {

// Where an error happened; fields are empty when unknown.
struct error_context {
  std::string file{};
  std::string node{};
  std::string field{};
};

// what() reads
//   "model.onnx: node Softmax 'attn/Softmax_3': input 0: <message>"
// so a command-line user sees the file, the node and the field at once.
class error : public std::runtime_error {
 public:
  using context = error_context;

  error(std::string message, context where = {})
      : std::runtime_error(format(message, where)),
        message_(std::move(message)),
        where_(std::move(where)) {}

  const std::string& message() const { return message_; }
  const std::string& file() const { return where_.file; }
  const std::string& node() const { return where_.node; }
  const std::string& field() const { return where_.field; }

  // The same error with the file filled in; lower layers often do not know it.
  error in_file(std::string file) const {
    context where = where_;
    if (where.file.empty()) where.file = std::move(file);
    return error(message_, std::move(where));
  }

 private:
  static std::string format(const std::string& message, const context& where) {
    std::string text;
    for (const std::string* part : {&where.file, &where.node, &where.field}) {
      if (part->empty()) continue;
      text += *part;
      text += ": ";
    }
    return text + message;
  }

  std::string message_;
  context where_;
};

}  // namespace fusekit
