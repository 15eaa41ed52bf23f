// src/simple.cu, unchanged, compiled by the host compiler for the emulator.
#include "../../src/simple.cu"
