// make_decoder_file OUT.onnx LAYERS: writes the synthetic LLaMA-style decoder trunk the
// rule-count benchmark uses, so that a whole `fusekit fuse` process can be measured on it.
#include <cstdlib>
#include <iostream>

#include "fusekit/io/model.hpp"
#include "llama_decoder_model.hpp"

int main(int argc, char** argv) {
  fusekit::samples::decoder_config config;
  if (argc == 3) config.layers = std::atoi(argv[2]);
  if (argc != 3 || config.layers <= 0) {
    std::cerr << "usage: make_decoder_file OUT.onnx LAYERS\n";
    return 2;
  }
  try {
    fusekit::save_model({.proto = fusekit::samples::make_llama_decoder_model(config), .path = {}},
                        argv[1]);
  } catch (const fusekit::error& e) {
    std::cerr << "make_decoder_file: " << e.what() << "\n";
    return 1;
  }
}
