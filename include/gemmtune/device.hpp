// gemmtune: what the engine knows of its GPU (or of the GPU a precompile targets).
#pragma once

#include <cstdint>
#include <string>

namespace gemmtune {

struct DeviceInfo {
  int index = 0;             // CUDA device index; -1 for a target without a device (precompile)
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  int driver_version = 0;    // cudaDriverGetVersion
  int runtime_version = 0;   // cudaRuntimeGetVersion
  int64_t l2_bytes = 0;
  int64_t global_mem_bytes = 0;
  std::string str() const;
};

// The GPU the kernels are built for when there is none here (precompile, `info` without a
// GPU): an H200-class sm_90a part with `sm_count` SMs, index -1.
DeviceInfo hopper_target(int sm_count = 132);

}  // namespace gemmtune
