// Shim of one CuTe DSL GEMM instance (generated from python/gemmtune/cutedsl/shim_template.cpp
// by compile.py; @NAME@ markers are filled in). Implements gt_cutedsl_abi.h around the header
// that export_to_c wrote (@PREFIX@.h): problem-term arguments -> the kernel's tensor structs.
// CUDA calls go through the shared runtime library (runtime.cpp), never to a cudart of its own.
#include "@PREFIX@.h"

#include <pthread.h>

#include <cstdio>

#include "gt_cutedsl_abi.h"

#define GT_EXPORT __attribute__((visibility("default")))

extern "C" {
int gt_cutedsl_rt_set_device(int device);
int gt_cutedsl_rt_get_last_error(void);
const char* gt_cutedsl_rt_error_name(int e);
const char* gt_cutedsl_rt_error_string(int e);
int gt_cutedsl_rt_sm_count(int device, int* out);
}

namespace {

const char kConfig[] = "@CONFIG@";
constexpr int kMaxDevices = 64;

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;  // no libstdc++ in this .so
bool g_library_loaded = false;       // cuda_init succeeded (the cubin is a cudaLibrary_t)
bool g_device_loaded[kMaxDevices] = {};
cudaLibrary_t g_library = nullptr;
thread_local cudaError_t t_last_error = cudaSuccess;  // for gt_cutedsl_status_text

// Loads the module (once per process) and into `device` (once per device).
struct Lock {
  Lock() { pthread_mutex_lock(&g_mu); }
  ~Lock() { pthread_mutex_unlock(&g_mu); }
};

int ensure_loaded(int device) {
  Lock lock;
  if (!g_library_loaded) {
    cudaLibrary_t* lib = &g_library;
    cudaError_t ret = cudaSuccess;
    struct { cudaLibrary_t** library; cudaError_t* ret; } init_args = {&lib, &ret};
    _mlir_@PREFIX@_cuda_init(reinterpret_cast<void**>(&init_args));
    if (ret != cudaSuccess) {
      t_last_error = ret;
      return GT_CUTEDSL_LOAD_FAILED;
    }
    g_library_loaded = true;
  }
  if (!g_device_loaded[device]) {
    cudaLibrary_t* lib = &g_library;
    int32_t dev = device;
    cudaError_t ret = cudaSuccess;
    struct { cudaLibrary_t** library; int32_t* device; cudaError_t* ret; } load_args = {&lib, &dev, &ret};
    _mlir_@PREFIX@_cuda_load_to_device(reinterpret_cast<void**>(&load_args));
    if (ret != cudaSuccess) {
      t_last_error = ret;
      return GT_CUTEDSL_LOAD_FAILED;
    }
    g_device_loaded[device] = true;
  }
  return GT_CUTEDSL_OK;
}

// "<prefix><cudaErrorName>: <description>" of the calling thread's latest CUDA error.
const char* error_text(const char* prefix) {
  thread_local char buf[512];
  snprintf(buf, sizeof buf, "%s%s: %s", prefix, gt_cutedsl_rt_error_name(t_last_error),
           gt_cutedsl_rt_error_string(t_last_error));
  return buf;
}

bool aligned(const void* p, unsigned bytes) { return (reinterpret_cast<uintptr_t>(p) & (bytes - 1u)) == 0; }

}  // namespace

extern "C" {

GT_EXPORT int gt_cutedsl_abi_version(void) { return GT_CUTEDSL_ABI_VERSION; }

GT_EXPORT const char* gt_cutedsl_config(void) { return kConfig; }

GT_EXPORT int gt_cutedsl_can_implement(const GtCutedslArgs* args) {
  if (!args) return GT_CUTEDSL_BAD_ARGS;
  if (args->abi_version != GT_CUTEDSL_ABI_VERSION) return GT_CUTEDSL_BAD_ABI;
  const int64_t kMax32 = 2147483647;
  if (args->m < 1 || args->n < 1 || args->k < 1 || args->m > kMax32 || args->n > kMax32 || args->k > kMax32)
    return GT_CUTEDSL_BAD_ARGS;
  if (args->device < 0 || args->device >= kMaxDevices) return GT_CUTEDSL_BAD_ARGS;
@CHECKS@
  return GT_CUTEDSL_OK;
}

GT_EXPORT int gt_cutedsl_run(const GtCutedslArgs* args, cudaStream_t stream) {
  int st = gt_cutedsl_can_implement(args);
  if (st != GT_CUTEDSL_OK) return st;
  if (@REQUIRED@) return GT_CUTEDSL_BAD_ARGS;  // a pointer the instance reads or writes is null
  cudaError_t e = static_cast<cudaError_t>(gt_cutedsl_rt_set_device(args->device));
  if (e != cudaSuccess) {
    t_last_error = e;
    return GT_CUTEDSL_CUDA_ERROR;
  }
  if ((st = ensure_loaded(args->device)) != GT_CUTEDSL_OK) return st;
  static @PREFIX@_Kernel_Module_t module = {nullptr};  // the wrapper does not read it
  // The persistent grid: one CTA per SM, so SMs / cluster size clusters at once.
  int sms = args->sm_count;
  if (sms <= 0 && (e = static_cast<cudaError_t>(gt_cutedsl_rt_sm_count(args->device, &sms))) != cudaSuccess) {
    t_last_error = e;
    return GT_CUTEDSL_CUDA_ERROR;
  }
  const int32_t max_clusters = sms / @CLUSTER_SIZE@ > 0 ? sms / @CLUSTER_SIZE@ : 1;
@FILL@
  int32_t rc = cute_dsl_@PREFIX@_wrapper(&module, @CALL_ARGS@, stream);
  if (rc != 0) {
    t_last_error = static_cast<cudaError_t>(rc);
    return GT_CUTEDSL_CUDA_ERROR;
  }
  if ((e = static_cast<cudaError_t>(gt_cutedsl_rt_get_last_error())) != cudaSuccess) {
    t_last_error = e;
    return GT_CUTEDSL_CUDA_ERROR;
  }
  return GT_CUTEDSL_OK;
}

GT_EXPORT const char* gt_cutedsl_status_text(int status) {
  switch (status) {
    case GT_CUTEDSL_OK: return "ok";
    case GT_CUTEDSL_BAD_ABI: return "ABI version mismatch";
    case GT_CUTEDSL_BAD_ARGS: return "bad arguments (null pointer, size or leading dimension out of range)";
    case GT_CUTEDSL_MISALIGNED: return "a pointer or leading dimension is not 16-byte aligned (TMA)";
    case GT_CUTEDSL_LOAD_FAILED:
    case GT_CUTEDSL_CUDA_ERROR:
      return error_text(status == GT_CUTEDSL_LOAD_FAILED ? "loading the kernel module failed: " : "");
    default: return "unknown status";
  }
}

}  // extern "C"
