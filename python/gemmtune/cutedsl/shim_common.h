// What the CuTe DSL instance shims share (gemm_shim.cpp: GEMM, softmax_shim.cpp: softmax):
// the shared runtime library's entry points (runtime.cpp: every CUDA call goes through it, never
// to a cudart of the shim's own), loading the exported module once per process and once per
// device, and the text of the calling thread's latest CUDA error. Included once per shim, after
// the export's header or <cuda_runtime_api.h> (cudaLibrary_t, cudaError_t). No libstdc++ in a
// shim: pthread and snprintf.
// Hashed into every CuTe DSL artifact key (src/backends/cutedsl/compiler.cpp, softmax.cpp).
#pragma once

#include <pthread.h>

#include <cstdint>
#include <cstdio>

extern "C" {
int gt_cutedsl_rt_set_device(int device);
int gt_cutedsl_rt_get_last_error(void);
const char* gt_cutedsl_rt_error_name(int e);
const char* gt_cutedsl_rt_error_string(int e);
int gt_cutedsl_rt_sm_count(int device, int* out);
}

namespace gt_shim {

constexpr int kMaxDevices = 64;  // devices a shim loads its module into (args->device < this)

inline pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
inline bool g_library_loaded = false;  // cuda_init succeeded (the cubin is a cudaLibrary_t)
inline bool g_device_loaded[kMaxDevices] = {};
inline cudaLibrary_t g_library = nullptr;
inline thread_local cudaError_t t_last_error = cudaSuccess;  // for error_text

struct Lock {
  Lock() { pthread_mutex_lock(&g_mu); }
  ~Lock() { pthread_mutex_unlock(&g_mu); }
};

// true when the CUDA status `e` is success; else keeps it for error_text and returns false.
inline bool ok(int e) {
  if (e == cudaSuccess) return true;
  t_last_error = static_cast<cudaError_t>(e);
  return false;
}

enum Entered { kEntered, kCudaError, kLoadFailed };

// Makes `device` (0 <= device < kMaxDevices) current and loads the module there: `init` and
// `load` are the export's _mlir_<prefix>_cuda_init / _cuda_load_to_device (each takes a pointer
// to its argument struct). The module is loaded once per process, and into a device once.
inline Entered enter(int device, void (*init)(void**), void (*load)(void**)) {
  if (!ok(gt_cutedsl_rt_set_device(device))) return kCudaError;
  Lock lock;
  if (!g_library_loaded) {
    cudaLibrary_t* lib = &g_library;
    cudaError_t ret = cudaSuccess;
    struct { cudaLibrary_t** library; cudaError_t* ret; } init_args = {&lib, &ret};
    init(reinterpret_cast<void**>(&init_args));
    if (!ok(ret)) return kLoadFailed;
    g_library_loaded = true;
  }
  if (!g_device_loaded[device]) {
    cudaLibrary_t* lib = &g_library;
    int32_t dev = device;
    cudaError_t ret = cudaSuccess;
    struct { cudaLibrary_t** library; int32_t* device; cudaError_t* ret; } load_args = {&lib, &dev, &ret};
    load(reinterpret_cast<void**>(&load_args));
    if (!ok(ret)) return kLoadFailed;
    g_device_loaded[device] = true;
  }
  return kEntered;
}

// true when the export's wrapper returned 0 (`rc`) and the launch left no CUDA error.
inline bool launched(int32_t rc) { return ok(rc) && ok(gt_cutedsl_rt_get_last_error()); }

// "<prefix><cudaErrorName>: <description>" of the calling thread's latest CUDA error.
inline const char* error_text(const char* prefix) {
  thread_local char buf[512];
  snprintf(buf, sizeof buf, "%s%s: %s", prefix, gt_cutedsl_rt_error_name(t_last_error),
           gt_cutedsl_rt_error_string(t_last_error));
  return buf;
}

inline bool aligned(const void* p, unsigned bytes) { return (reinterpret_cast<uintptr_t>(p) & (bytes - 1u)) == 0; }

}  // namespace gt_shim
