// The loader on raw bytes: parse_model must reject anything that is not a model it reads with a
// fusekit::error, and whatever it accepts goes through the whole pipeline (pipeline_check.hpp).
// Seeds: tests/fuzz/corpus/loader (real models and their corruptions). Half the mutations are
// libFuzzer's own byte edits, half structural edits of the model the bytes hold
// (structural_mutations.hpp), which byte edits almost never make of a real model.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <string_view>

#include "pipeline_check.hpp"
#include "structural_mutations.hpp"

extern "C" std::size_t LLVMFuzzerMutate(std::uint8_t* data, std::size_t size, std::size_t max_size);

extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size,
                                               std::size_t max_size, unsigned int seed) {
  std::minstd_rand random(seed);
  onnx::ModelProto m;
  if (random() % 2 == 0 && m.ParseFromArray(data, int(size)) &&
      fusekit::fuzz::mutate_structure(m, [&random](std::size_t n) { return random() % n; })) {
    std::string bytes;
    if (m.SerializeToString(&bytes) && bytes.size() <= max_size) {
      std::memcpy(data, bytes.data(), bytes.size());
      return bytes.size();
    }
  }
  return LLVMFuzzerMutate(data, size, max_size);
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fusekit::model m;
  try {
    m = fusekit::parse_model(std::string_view(reinterpret_cast<const char*>(data), size),
                             "input.onnx");
  } catch (const fusekit::error&) {
    return 0;
  }
  fusekit::rules::attention_options attention;
  // The input's length picks the target, so mutations of one seed exercise both.
  if (size % 2 == 1) attention.fused_target = fusekit::rules::attention_options::target::onnx;
  fusekit::fuzz::fuse_and_check(std::move(m), attention);
  return 0;
}
