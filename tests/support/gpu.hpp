// GPU test helpers.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "core/cuda.hpp"

// Skips the calling test when no CUDA device is usable (tests/gpu/main.cpp already skips the
// whole binary; this keeps a test correct when linked elsewhere).
#define REQUIRE_GPU()                                                                       \
  do {                                                                                      \
    std::string why_;                                                                       \
    if (!::gemmtune::cuda_device_present(&why_)) GTEST_SKIP() << "no CUDA device: " << why_; \
  } while (0)
