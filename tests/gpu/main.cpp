// GPU tests: skipped as a whole (exit 77, which ctest reports as "skipped") without a device.
#include <gtest/gtest.h>

#include <cstdio>

#include "core/cuda.hpp"

int main(int argc, char** argv) {
  std::string why;
  if (!gemmtune::cuda_device_present(&why)) {
    std::printf("GPU tests skipped: no CUDA device (%s)\n", why.c_str());
    return 77;
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
