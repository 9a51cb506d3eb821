// Device discovery.
#include <sstream>

#include "core/cuda.hpp"
#include "core/device.hpp"

namespace gemmtune {

bool cuda_device_present(std::string* why) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    if (why) *why = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    return false;
  }
  if (count == 0) {
    if (why) *why = "no CUDA device found";
    return false;
  }
  return true;
}

DeviceInfo query_device(int index) {
  std::string why;
  if (!cuda_device_present(&why)) GT_THROW_CODE(no_device, "no CUDA device (" + why + ")");
  int count = 0;
  GT_CUDA(cudaGetDeviceCount(&count));
  GT_CHECK_INVALID(index >= 0 && index < count,
           "device: index " + std::to_string(index) + " out of range (" + std::to_string(count) + " devices)");
  cudaDeviceProp prop{};
  GT_CUDA(cudaGetDeviceProperties(&prop, index));
  DeviceInfo d;
  d.index = index;
  d.name = prop.name;
  d.sm_count = prop.multiProcessorCount;
  d.cc_major = prop.major;
  d.cc_minor = prop.minor;
  d.l2_bytes = prop.l2CacheSize;
  d.global_mem_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  GT_CUDA(cudaDriverGetVersion(&d.driver_version));
  GT_CUDA(cudaRuntimeGetVersion(&d.runtime_version));
  return d;
}

DeviceInfo hopper_target(int sm_count) {
  DeviceInfo d;
  d.index = -1;  // not a real device
  d.name = "NVIDIA H200 (target: no GPU used)";
  d.sm_count = sm_count;
  d.cc_major = 9, d.cc_minor = 0;
  d.l2_bytes = int64_t(50) << 20;
  d.global_mem_bytes = int64_t(141) << 30;
  return d;
}

std::string DeviceInfo::str() const {
  std::ostringstream o;
  o << name << " (sm_" << cc_major << cc_minor << ", " << sm_count << " SMs, " << (l2_bytes >> 20) << " MiB L2, "
    << (global_mem_bytes >> 30) << " GiB, driver " << driver_version / 1000 << "." << (driver_version % 1000) / 10
    << ", runtime " << runtime_version / 1000 << "." << (runtime_version % 1000) / 10 << ")";
  return o.str();
}

}  // namespace gemmtune
