// src/tiled_bf16.cu, unchanged, compiled by the host compiler for the emulator.
#include "../../src/tiled_bf16.cu"
