// GPU tests: skipped as a whole (exit 77, which ctest reports as "skipped") without a device.
//
// The binary is also the tuning helper of its own engines (src/engine/isolate.hpp): started as
// `gemmtune_gpu_tests --gemmtune-tuner`, it serves tunes, with the fault-injection backends
// (fault_backend.hpp) registered as in the tests themselves. Tests run with $GEMMTUNE_TUNER set
// to this binary unless the environment names another helper.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/cuda.hpp"
#include "engine/isolate.hpp"
#include "fault_backend.hpp"

int main(int argc, char** argv) {
  gemmtune::gpu_test::register_fault_backends();
  if (argc == 2 && std::strcmp(argv[1], gemmtune::isolate::kTunerArg) == 0) return gemmtune::detail::run_tuner();
  std::string why;
  if (!gemmtune::cuda_device_present(&why)) {
    std::printf("GPU tests skipped: no CUDA device (%s)\n", why.c_str());
    return 77;
  }
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) setenv("GEMMTUNE_TUNER", self.c_str(), /*overwrite=*/0);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
