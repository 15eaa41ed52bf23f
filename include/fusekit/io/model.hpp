// Loading and saving ONNX models: precise errors for bad files, atomic saves, external data kept
// valid wherever the model is written.
#pragma once

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fusekit/engine.hpp"
#include "fusekit/io/error.hpp"
#include "fusekit/io/external_data.hpp"
#include "fusekit/io/wire_format.hpp"

namespace fusekit {

// IR versions fusekit understands: 3 (ONNX 1.0 with opset imports) to the linked onnx release's.
inline constexpr std::int64_t min_ir_version = 3;
inline constexpr std::int64_t max_ir_version = onnx::IR_VERSION;

struct model {
  onnx::ModelProto proto;
  std::filesystem::path path;  // where it came from; external data is relative to its directory

  std::filesystem::path directory() const { return path.parent_path(); }
};

namespace detail {

inline void for_each_graph(onnx::GraphProto& g, const std::function<void(onnx::GraphProto&)>& f) {
  f(g);
  for (auto& node : *g.mutable_node())
    for (auto& a : *node.mutable_attribute()) {
      if (a.has_g()) for_each_graph(*a.mutable_g(), f);
      for (auto& body : *a.mutable_graphs()) for_each_graph(body, f);
    }
}

inline void for_each_initializer(onnx::ModelProto& m,
                                 const std::function<void(onnx::TensorProto&)>& f) {
  for_each_graph(*m.mutable_graph(), [&](onnx::GraphProto& g) {
    for (auto& t : *g.mutable_initializer()) f(t);
  });
}

// The walk never modifies; protobuf offers no const traversal of nested mutable fields to share.
inline void for_each_initializer(const onnx::ModelProto& m,
                                 const std::function<void(const onnx::TensorProto&)>& f) {
  for_each_initializer(const_cast<onnx::ModelProto&>(m), [&](onnx::TensorProto& t) { f(t); });
}

inline std::string serialize_deterministic(const onnx::ModelProto& m) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.SetSerializationDeterministic(true);
    m.SerializeToCodedStream(&out);
  }
  return bytes;
}

// The same bytes, written as they are made: no copy of the whole model in memory. False when
// protobuf refuses the model (over 2 GiB) or the stream fails.
inline bool serialize_deterministic(const onnx::ModelProto& m, std::ostream& to) {
  google::protobuf::io::OstreamOutputStream stream(&to);
  google::protobuf::io::CodedOutputStream out(&stream);
  out.SetSerializationDeterministic(true);
  return m.SerializeToCodedStream(&out) && !out.HadError();
}

inline error unwritable(const std::filesystem::path& out) {
  return error("cannot serialise the model (over protobuf's 2 GiB, or the write failed)",
               {.file = out.string()});
}

inline bool parse_from(onnx::ModelProto& m, google::protobuf::io::ZeroCopyInputStream& from) {
  google::protobuf::io::CodedInputStream in(&from);
  in.SetTotalBytesLimit(INT_MAX);
  return m.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
}

// Writes beside the target and renames, so a reader never sees a partial file.
class staged_file {
 public:
  explicit staged_file(std::filesystem::path target)
      : target_(std::move(target)),
        temp_(target_.string() + ".tmp" + std::to_string(::getpid())),
        out_(temp_, std::ios::binary | std::ios::trunc) {
    if (!out_)
      throw error("cannot write: " + std::string(std::strerror(errno)), {.file = target_.string()});
  }
  staged_file(const staged_file&) = delete;
  ~staged_file() {
    if (!committed_) {
      out_.close();
      std::error_code ignored;
      std::filesystem::remove(temp_, ignored);
    }
  }
  std::ofstream& stream() { return out_; }
  std::uint64_t position() { return static_cast<std::uint64_t>(out_.tellp()); }
  void close() {
    out_.flush();
    out_.close();
    if (!out_) throw error("write failed (disk full?)", {.file = target_.string()});
  }
  void commit() {
    std::error_code ec;
    std::filesystem::rename(temp_, target_, ec);
    if (ec) throw error("cannot replace: " + ec.message(), {.file = target_.string()});
    committed_ = true;
  }

 private:
  std::filesystem::path target_;
  std::filesystem::path temp_;
  std::ofstream out_;
  bool committed_ = false;
};

inline void copy_bytes(std::ifstream& in, std::ofstream& out, std::uint64_t length) {
  std::vector<char> buffer(std::size_t(1) << 20);
  while (length > 0) {
    const auto chunk = static_cast<std::streamsize>(std::min<std::uint64_t>(length, buffer.size()));
    in.read(buffer.data(), chunk);
    if (in.gcount() != chunk) throw error("external data file ended early");
    out.write(buffer.data(), chunk);
    length -= static_cast<std::uint64_t>(chunk);
  }
}

#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE void set_external(onnx::TensorProto& t, const std::string& location,
                                        std::uint64_t offset, std::uint64_t length) {
  t.clear_external_data();
  t.clear_raw_data();
  t.set_data_location(onnx::TensorProto_DataLocation_EXTERNAL);
  for (const auto& [key, value] : {std::pair<std::string, std::string>{"location", location},
                                   {"offset", std::to_string(offset)},
                                   {"length", std::to_string(length)}}) {
    auto* entry = t.add_external_data();
    entry->set_key(key);
    entry->set_value(value);
  }
}
#else
void set_external(onnx::TensorProto& t, const std::string& location, std::uint64_t offset,
                  std::uint64_t length);
#endif

}  // namespace detail

// Fails, naming the initializer and file, when an external data file is missing or too short.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE void check_external_data(const model& m) {
  detail::for_each_initializer(m.proto, [&](const onnx::TensorProto& t) {
    if (!is_external(t)) return;
    try {
      external_data_size(t, m.directory());
    } catch (const error& e) {
      throw e.in_file(m.path.string());
    }
  });
}
#else
void check_external_data(const model& m);
#endif

namespace detail {

// Whether a file of `size` bytes can hold a model protobuf reads.
inline void check_size(std::uint64_t size, const std::string& file) {
  if (size == 0) throw error("empty file, not an ONNX model", {.file = file});
  if (size > std::uint64_t(INT_MAX))
    throw error("is over 2 GiB; protobuf cannot hold it: store the weights as external data",
                {.file = file});
}

// What a parsed model must hold before anything reads it.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE void check_parsed(const model& m) {
  const std::string file = m.path.string();
  if (!m.proto.has_graph())
    throw error("not an ONNX model: it has no graph", {.file = file, .field = "graph"});
  if (!m.proto.has_ir_version())
    throw error("not an ONNX model: ir_version is missing", {.file = file, .field = "ir_version"});
  const std::int64_t ir = m.proto.ir_version();
  if (ir < min_ir_version || ir > max_ir_version)
    throw error("IR version " + std::to_string(ir) + " is not supported (fusekit reads " +
                    std::to_string(min_ir_version) + " to " + std::to_string(max_ir_version) + ")",
                {.file = file, .field = "ir_version"});
  check_external_data(m);
}
#else
void check_parsed(const model& m);
#endif

}  // namespace detail

// Parses a model held in memory. `path` names it in errors and locates its external data.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE model parse_model(std::string_view bytes,
                                        std::filesystem::path path = "<memory>") {
  const std::string file = path.string();
  detail::check_size(bytes.size(), file);
  model m{.proto = {}, .path = std::move(path)};
  google::protobuf::io::ArrayInputStream in(bytes.data(), static_cast<int>(bytes.size()));
  if (!detail::parse_from(m.proto, in))
    throw error(detail::diagnose_wire_format(bytes), {.file = file});
  detail::check_parsed(m);
  return m;
}
#else
model parse_model(std::string_view bytes, std::filesystem::path path = "<memory>");
#endif

#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE model load_model(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw error("is a directory, not a model file", {.file = path.string()});
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    throw error("cannot open: " + std::string(std::strerror(errno)), {.file = path.string()});
  const std::streamoff size = in.tellg();
  if (size < 0)
    throw error("is not a regular file; fusekit reads models from files", {.file = path.string()});
  detail::check_size(static_cast<std::uint64_t>(size), path.string());
  in.seekg(0);
  // Parsed as it is read: the file's bytes are never all in memory beside the model.
  model m{.proto = {}, .path = path};
  bool parsed = false;
  {
    google::protobuf::io::IstreamInputStream stream(&in);
    parsed = detail::parse_from(m.proto, stream);
  }
  if (in.bad()) throw error("read failed", {.file = path.string()});
  if (!parsed) {
    // Only a model that does not parse is read whole, to say where its bytes go wrong.
    std::string bytes(static_cast<std::size_t>(size), '\0');
    in.clear();
    in.seekg(0);
    in.read(bytes.data(), size);
    if (!in) throw error("read failed", {.file = path.string()});
    throw error(detail::diagnose_wire_format(bytes), {.file = path.string()});
  }
  detail::check_parsed(m);
  return m;
}
#else
model load_model(const std::filesystem::path& path);
#endif

struct save_options {
  // Inline initializers of at least this many raw bytes move to "<model file>.data". Unset: only
  // when the model would not fit protobuf's 2 GiB, and then from 1 KiB up.
  std::optional<std::uint64_t> externalize_from{};
};

// Writes `m` to `out` atomically. External data stays valid: in the model's own directory its
// files are kept as they are; elsewhere the tensors are copied into "<out file name>.data".
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE void save_model(const model& m, const std::filesystem::path& out,
                                      const save_options& options = {}) {
  namespace fs = std::filesystem;
  const fs::path out_dir = out.parent_path();
  const std::string data_name = out.filename().string() + ".data";

  std::optional<std::uint64_t> externalize_from = options.externalize_from;
  if (!externalize_from && m.proto.ByteSizeLong() > std::size_t(INT_MAX)) externalize_from = 1024;

  auto same_directory = [&] {
    std::error_code ec;
    return fs::equivalent(out_dir.empty() ? "." : out_dir,
                          m.directory().empty() ? "." : m.directory(), ec);
  };
  bool has_external = false, writes_target_data = false;
  detail::for_each_initializer(m.proto, [&](const onnx::TensorProto& t) {
    if (!is_external(t)) return;
    has_external = true;
    writes_target_data |= external_data_of(t).location == data_name;
  });
  // Rewrite every external tensor when the files would not be found from `out`, or when new data
  // goes into a file the old references still point at.
  const bool relocate =
      has_external && (!same_directory() || (externalize_from && writes_target_data));

  if (!relocate && !externalize_from) {
    detail::staged_file file(out);
    if (!detail::serialize_deterministic(m.proto, file.stream())) throw detail::unwritable(out);
    file.close();
    file.commit();
    return;
  }

  onnx::ModelProto copy = m.proto;
  detail::staged_file data(out_dir / data_name);
  bool data_used = false;
  try {
    detail::for_each_initializer(copy, [&](onnx::TensorProto& t) {
      if (is_external(t) && relocate) {
        const std::uint64_t length = external_data_size(t, m.directory());
        const external_data_ref ref = external_data_of(t);
        std::ifstream in(m.directory() / ref.location, std::ios::binary);
        in.seekg(static_cast<std::streamoff>(ref.offset));
        const std::uint64_t offset = data.position();
        detail::copy_bytes(in, data.stream(), length);
        detail::set_external(t, data_name, offset, length);
        data_used = true;
      } else if (!is_external(t) && externalize_from && t.has_raw_data() &&
                 t.raw_data().size() >= *externalize_from) {
        const std::uint64_t offset = data.position();
        data.stream().write(t.raw_data().data(), static_cast<std::streamsize>(t.raw_data().size()));
        detail::set_external(t, data_name, offset, t.raw_data().size());
        data_used = true;
      }
    });
  } catch (const error& e) {
    throw e.in_file(m.path.string());
  }
  detail::staged_file file(out);
  if (!detail::serialize_deterministic(copy, file.stream())) throw detail::unwritable(out);
  file.close();
  data.close();
  if (data_used) data.commit();
  file.commit();
}
#else
void save_model(const model& m, const std::filesystem::path& out, const save_options& options = {});
#endif

}  // namespace fusekit
