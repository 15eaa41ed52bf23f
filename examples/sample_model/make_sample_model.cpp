// Writes the bundled sample model: make_sample_model OUT.onnx [--external-data]
// With --external-data the weights go to OUT.onnx.data, as exporters store models over 2 GB.
#include <iostream>
#include <string_view>

#include "dit_model.hpp"
#include "fusekit/io/model.hpp"

int main(int argc, char** argv) {
  const bool external = argc == 3 && std::string_view(argv[2]) == "--external-data";
  if (argc != 2 && !external) {
    std::cerr << "usage: make_sample_model OUT.onnx [--external-data]\n";
    return 2;
  }
  try {
    fusekit::save_options options;
    if (external) options.externalize_from = 1024;
    fusekit::save_model({.proto = fusekit::samples::make_dit_model({}), .path = {}}, argv[1],
                        options);
  } catch (const fusekit::error& e) {
    std::cerr << "make_sample_model: " << e.what() << "\n";
    return 1;
  }
}
