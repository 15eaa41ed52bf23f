// The loader on raw bytes: parse_model must reject anything that is not a model it reads with a
// fusekit::error, and whatever it accepts goes through the whole pipeline (pipeline_check.hpp).
// Seeds: tests/fuzz/corpus/loader (real models and their corruptions).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pipeline_check.hpp"

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
