// Shim of one CuTe DSL softmax instance (generated from python/gemmtune/cutedsl/softmax_shim.cpp
// by softmax_compile.py; @NAME@ markers are filled in). Implements softmax_abi.h around the
// header that export_to_c wrote (@PREFIX@.h): problem arguments -> the kernel's tensor structs.
// CUDA calls go through the shared runtime library (runtime.cpp), never to a cudart of its own.
#include "@PREFIX@.h"

#include <pthread.h>

#include <cstdio>

#include "softmax_abi.h"

#define GT_EXPORT __attribute__((visibility("default")))

extern "C" {
int gt_cutedsl_rt_set_device(int device);
int gt_cutedsl_rt_get_last_error(void);
const char* gt_cutedsl_rt_error_name(int e);
const char* gt_cutedsl_rt_error_string(int e);
}

namespace {

const char kConfig[] = "@CONFIG@";
constexpr int64_t kMaxCols = @MAX_COLS@;
constexpr int64_t kVec = @VEC@;
constexpr int kMaxDevices = 64;

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;  // no libstdc++ in this .so
bool g_library_loaded = false;                     // cuda_init succeeded
bool g_device_loaded[kMaxDevices] = {};
cudaLibrary_t g_library = nullptr;
thread_local cudaError_t t_last_error = cudaSuccess;  // for gt_cutedsl_softmax_status_text

struct Lock {
  Lock() { pthread_mutex_lock(&g_mu); }
  ~Lock() { pthread_mutex_unlock(&g_mu); }
};

// Loads the module (once per process) and into `device` (once per device).
int ensure_loaded(int device) {
  Lock lock;
  if (!g_library_loaded) {
    cudaLibrary_t* lib = &g_library;
    cudaError_t ret = cudaSuccess;
    struct {
      cudaLibrary_t** library;
      cudaError_t* ret;
    } init_args = {&lib, &ret};
    _mlir_@PREFIX@_cuda_init(reinterpret_cast<void**>(&init_args));
    if (ret != cudaSuccess) {
      t_last_error = ret;
      return GT_CUTEDSL_SOFTMAX_LOAD_FAILED;
    }
    g_library_loaded = true;
  }
  if (!g_device_loaded[device]) {
    cudaLibrary_t* lib = &g_library;
    int32_t dev = device;
    cudaError_t ret = cudaSuccess;
    struct {
      cudaLibrary_t** library;
      int32_t* device;
      cudaError_t* ret;
    } load_args = {&lib, &dev, &ret};
    _mlir_@PREFIX@_cuda_load_to_device(reinterpret_cast<void**>(&load_args));
    if (ret != cudaSuccess) {
      t_last_error = ret;
      return GT_CUTEDSL_SOFTMAX_LOAD_FAILED;
    }
    g_device_loaded[device] = true;
  }
  return GT_CUTEDSL_SOFTMAX_OK;
}

const char* error_text(const char* prefix) {
  thread_local char buf[512];
  snprintf(buf, sizeof buf, "%s%s: %s", prefix, gt_cutedsl_rt_error_name(t_last_error),
           gt_cutedsl_rt_error_string(t_last_error));
  return buf;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

extern "C" {

GT_EXPORT int gt_cutedsl_softmax_abi_version(void) { return GT_CUTEDSL_SOFTMAX_ABI_VERSION; }

GT_EXPORT const char* gt_cutedsl_softmax_config(void) { return kConfig; }

GT_EXPORT int gt_cutedsl_softmax_max_cols(void) { return int(kMaxCols); }

// Sizes, ld and the alignment of non-null pointers (asked before any buffer exists).
GT_EXPORT int gt_cutedsl_softmax_can_implement(const GtCutedslSoftmaxArgs* args) {
  if (!args) return GT_CUTEDSL_SOFTMAX_BAD_ARGS;
  if (args->abi_version != GT_CUTEDSL_SOFTMAX_ABI_VERSION) return GT_CUTEDSL_SOFTMAX_BAD_ABI;
  const int64_t kMax32 = 2147483647;
  if (args->rows < 1 || args->cols < 1 || args->rows > kMax32 || args->cols > kMax32 || args->ld < args->cols)
    return GT_CUTEDSL_SOFTMAX_BAD_ARGS;
  if (args->device < 0 || args->device >= kMaxDevices) return GT_CUTEDSL_SOFTMAX_BAD_ARGS;
  if (args->cols > kMaxCols) return GT_CUTEDSL_SOFTMAX_TOO_LONG;
  if (args->ld % kVec != 0) return GT_CUTEDSL_SOFTMAX_MISALIGNED;
  if ((args->x && !aligned16(args->x)) || (args->y && !aligned16(args->y))) return GT_CUTEDSL_SOFTMAX_MISALIGNED;
  return GT_CUTEDSL_SOFTMAX_OK;
}

GT_EXPORT int gt_cutedsl_softmax_run(const GtCutedslSoftmaxArgs* args, cudaStream_t stream) {
  int st = gt_cutedsl_softmax_can_implement(args);
  if (st != GT_CUTEDSL_SOFTMAX_OK) return st;
  if (!args->x || !args->y) return GT_CUTEDSL_SOFTMAX_BAD_ARGS;
  cudaError_t e = static_cast<cudaError_t>(gt_cutedsl_rt_set_device(args->device));
  if (e != cudaSuccess) {
    t_last_error = e;
    return GT_CUTEDSL_SOFTMAX_CUDA_ERROR;
  }
  if ((st = ensure_loaded(args->device)) != GT_CUTEDSL_SOFTMAX_OK) return st;
  static @PREFIX@_Kernel_Module_t module = {nullptr};  // the wrapper does not read it
@FILL@
  int32_t rc = cute_dsl_@PREFIX@_wrapper(&module, &tx, &ty, args->scale, stream);
  if (rc != 0) {
    t_last_error = static_cast<cudaError_t>(rc);
    return GT_CUTEDSL_SOFTMAX_CUDA_ERROR;
  }
  if ((e = static_cast<cudaError_t>(gt_cutedsl_rt_get_last_error())) != cudaSuccess) {
    t_last_error = e;
    return GT_CUTEDSL_SOFTMAX_CUDA_ERROR;
  }
  return GT_CUTEDSL_SOFTMAX_OK;
}

GT_EXPORT const char* gt_cutedsl_softmax_status_text(int status) {
  switch (status) {
    case GT_CUTEDSL_SOFTMAX_OK:
      return "ok";
    case GT_CUTEDSL_SOFTMAX_BAD_ABI:
      return "ABI version mismatch";
    case GT_CUTEDSL_SOFTMAX_BAD_ARGS:
      return "bad arguments (null pointer; rows, cols or ld out of range)";
    case GT_CUTEDSL_SOFTMAX_MISALIGNED:
      return "x or y is not 16-byte aligned, or ld is not a multiple of the instance's vector width";
    case GT_CUTEDSL_SOFTMAX_TOO_LONG:
      return "the row is longer than the instance holds (max_cols)";
    case GT_CUTEDSL_SOFTMAX_LOAD_FAILED:
    case GT_CUTEDSL_SOFTMAX_CUDA_ERROR:
      return error_text(status == GT_CUTEDSL_SOFTMAX_LOAD_FAILED ? "loading the kernel module failed: " : "");
    default:
      return "unknown status";
  }
}

}  // extern "C"
