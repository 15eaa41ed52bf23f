// make_dit_file OUT.onnx LAYERS: writes the synthetic F5-TTS-like DiT trunk the fuse benchmarks
// use, so that a whole `fusekit fuse` process can be measured on it (peak_rss.sh).
#include <cstdlib>
#include <iostream>

#include "dit_model.hpp"
#include "fusekit/io/model.hpp"

int main(int argc, char** argv) {
  if (argc != 3 || std::atoi(argv[2]) <= 0) {
    std::cerr << "usage: make_dit_file OUT.onnx LAYERS\n";
    return 2;
  }
  try {
    fusekit::save_model(
        {.proto = fusekit::samples::make_dit_model({.layers = std::atoi(argv[2])}), .path = {}},
        argv[1]);
  } catch (const fusekit::error& e) {
    std::cerr << "make_dit_file: " << e.what() << "\n";
    return 1;
  }
}
