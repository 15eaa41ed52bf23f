// src/tiled_f16.cu, unchanged, compiled by the host compiler for the emulator.
#include "../../src/tiled_f16.cu"
