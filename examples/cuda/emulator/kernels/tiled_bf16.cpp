// The emulator runs what nvcc compiles: src/tiled_bf16.cu itself, for the host compiler.
#include "../../src/tiled_bf16.cu"
