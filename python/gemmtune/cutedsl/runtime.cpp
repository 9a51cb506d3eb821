// The CUDA runtime side shared by every CuTe DSL kernel .so of one toolchain (compile.py builds
// it once as libgt_cutedsl_rt_<hash>.so; docs/cutedsl.md "Artifacts"). It holds the DSL's
// libcuda_dialect_runtime_static.a (the _cuda*/_cu* wrappers the exported kernels call) and the
// CUDA toolkit's libcudart_static.a, and exports only those wrappers plus the few calls below
// that the shims need. Each kernel .so lists this library as DT_NEEDED by its soname; the
// loader loads it first, so one copy of the CUDA runtime serves all kernels of the process.
#include <cuda_runtime_api.h>

#define GT_RT_EXPORT extern "C" __attribute__((visibility("default")))

GT_RT_EXPORT int gt_cutedsl_rt_set_device(int device) { return int(cudaSetDevice(device)); }
GT_RT_EXPORT int gt_cutedsl_rt_get_last_error(void) { return int(cudaGetLastError()); }
GT_RT_EXPORT const char* gt_cutedsl_rt_error_name(int e) { return cudaGetErrorName(cudaError_t(e)); }
GT_RT_EXPORT const char* gt_cutedsl_rt_error_string(int e) { return cudaGetErrorString(cudaError_t(e)); }
GT_RT_EXPORT int gt_cutedsl_rt_sm_count(int device, int* out) {
  return int(cudaDeviceGetAttribute(out, cudaDevAttrMultiProcessorCount, device));
}
