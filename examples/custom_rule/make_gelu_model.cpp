// Writes the GELU sample model (gelu_sample.hpp): make_gelu_model OUT.onnx
#include <iostream>

#include "fusekit/io/model.hpp"
#include "gelu_sample.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_gelu_model OUT.onnx\n";
    return 2;
  }
  try {
    fusekit::save_model({.proto = my_rules::sample::make_gelu_model(), .path = {}}, argv[1]);
  } catch (const fusekit::error& e) {
    std::cerr << "make_gelu_model: " << e.what() << "\n";
    return 1;
  }
}
