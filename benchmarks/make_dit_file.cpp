// make_dit_file OUT.onnx LAYERS [HEADS HEAD_DIM]: writes the synthetic F5-TTS-like DiT trunk the
// fuse benchmarks use (4 heads of 16 unless given), so that a whole `fusekit fuse` process can be
// measured on it (peak_rss.sh).
#include <cstdlib>
#include <iostream>

#include "dit_model.hpp"
#include "fusekit/io/model.hpp"

int main(int argc, char** argv) {
  fusekit::samples::dit_config config;
  if (argc == 3 || argc == 5) {
    config.layers = std::atoi(argv[2]);
    if (argc == 5) config.heads = std::atoi(argv[3]), config.head_dim = std::atoi(argv[4]);
  }
  if ((argc != 3 && argc != 5) || config.layers <= 0 || config.heads <= 0 || config.head_dim <= 0 ||
      config.head_dim % 2 != 0) {
    std::cerr << "usage: make_dit_file OUT.onnx LAYERS [HEADS HEAD_DIM (even)]\n";
    return 2;
  }
  try {
    fusekit::save_model({.proto = fusekit::samples::make_dit_model(config), .path = {}}, argv[1]);
  } catch (const fusekit::error& e) {
    std::cerr << "make_dit_file: " << e.what() << "\n";
    return 1;
  }
}
