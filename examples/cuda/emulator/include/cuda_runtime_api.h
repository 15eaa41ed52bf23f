// The emulator stands in for CUDA's cuda_runtime_api.h (emulator/device.hpp).
#pragma once
#include "emulator/device.hpp"
