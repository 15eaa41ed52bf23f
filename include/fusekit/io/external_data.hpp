// Tensors whose bytes live outside the .onnx file (TensorProto.data_location == EXTERNAL).
// fusekit never reads them eagerly: a 10 GB model loads in the time it takes to parse its graph.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "fusekit/engine.hpp"
#include "fusekit/io/error.hpp"

namespace fusekit {

struct external_data_ref {
  std::string location;  // relative to the model's directory
  std::uint64_t offset = 0;
  std::optional<std::uint64_t> length;  // absent: to the end of the file
};

inline bool is_external(const onnx::TensorProto& t) {
  return t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL;
}

inline error tensor_error(const onnx::TensorProto& t, std::string message) {
  return error(std::move(message), {.field = "initializer '" + t.name() + "'"});
}

#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE external_data_ref external_data_of(const onnx::TensorProto& t) {
  external_data_ref ref;
  for (const auto& entry : t.external_data()) {
    try {
      if (entry.key() == "location") ref.location = entry.value();
      if (entry.key() == "offset") ref.offset = std::stoull(entry.value());
      if (entry.key() == "length") ref.length = std::stoull(entry.value());
    } catch (const std::exception&) {
      throw tensor_error(
          t, "external_data '" + entry.key() + "' is not a number: '" + entry.value() + "'");
    }
  }
  if (ref.location.empty()) throw tensor_error(t, "external data has no 'location'");
  const std::filesystem::path location(ref.location);
  // As in ONNX Runtime: data must stay inside the model's directory.
  if (location.is_absolute() || *location.lexically_normal().begin() == "..")
    throw tensor_error(
        t, "external data location '" + ref.location + "' leaves the model's directory");
  return ref;
}
#else
external_data_ref external_data_of(const onnx::TensorProto& t);
#endif

// Fails with the file and byte range when the data file is missing or too short.
#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::uint64_t external_data_size(const onnx::TensorProto& t,
                                                       const std::filesystem::path& base_dir) {
  const external_data_ref ref = external_data_of(t);
  const std::filesystem::path file = base_dir / ref.location;
  std::error_code ec;
  const std::uint64_t file_size = std::filesystem::file_size(file, ec);
  if (ec) throw tensor_error(t, "external data file '" + file.string() + "' is missing");
  const std::uint64_t length =
      ref.length.value_or(file_size > ref.offset ? file_size - ref.offset : 0);
  if (ref.offset + length > file_size)
    throw tensor_error(t, "external data file '" + file.string() + "' has " +
                              std::to_string(file_size) + " bytes, the tensor needs bytes " +
                              std::to_string(ref.offset) + ".." +
                              std::to_string(ref.offset + length));
  return length;
}
#else
std::uint64_t external_data_size(const onnx::TensorProto& t, const std::filesystem::path& base_dir);
#endif

#if FUSEKIT_ENGINE_DEFINITIONS
FUSEKIT_ENGINE_INLINE std::string read_external_data(const onnx::TensorProto& t,
                                                     const std::filesystem::path& base_dir) {
  const std::uint64_t length = external_data_size(t, base_dir);
  const external_data_ref ref = external_data_of(t);
  std::ifstream in(base_dir / ref.location, std::ios::binary);
  std::string bytes(length, '\0');
  in.seekg(static_cast<std::streamoff>(ref.offset));
  in.read(bytes.data(), static_cast<std::streamsize>(length));
  if (!in) throw tensor_error(t, "cannot read external data file '" + ref.location + "'");
  return bytes;
}
#else
std::string read_external_data(const onnx::TensorProto& t, const std::filesystem::path& base_dir);
#endif

}  // namespace fusekit
