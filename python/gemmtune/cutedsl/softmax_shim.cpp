// Shim of one CuTe DSL softmax instance (generated from python/gemmtune/cutedsl/softmax_shim.cpp
// by softmax_compile.py; @NAME@ markers are filled in). Implements softmax_abi.h around the
// header that export_to_c wrote (@PREFIX@.h): problem arguments -> the kernel's tensor structs.
// CUDA calls go through the shared runtime library (runtime.cpp, via shim_common.h).
#include "@PREFIX@.h"

#include "shim_common.h"
#include "softmax_abi.h"

#define GT_EXPORT __attribute__((visibility("default")))

namespace {

const char kConfig[] = "@CONFIG@";
constexpr int64_t kMaxCols = @MAX_COLS@;
constexpr int64_t kLdAlign = @LD_ALIGN@;  // the vector width; 1 for virtual columns (any ld)
using gt_shim::kMaxDevices;

bool aligned16(const void* p) { return gt_shim::aligned(p, 16); }

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
  if (args->ld % kLdAlign != 0) return GT_CUTEDSL_SOFTMAX_MISALIGNED;
  if ((args->x && !aligned16(args->x)) || (args->y && !aligned16(args->y))) return GT_CUTEDSL_SOFTMAX_MISALIGNED;
  return GT_CUTEDSL_SOFTMAX_OK;
}

GT_EXPORT int gt_cutedsl_softmax_run(const GtCutedslSoftmaxArgs* args, cudaStream_t stream) {
  int st = gt_cutedsl_softmax_can_implement(args);
  if (st != GT_CUTEDSL_SOFTMAX_OK) return st;
  if (!args->x || !args->y) return GT_CUTEDSL_SOFTMAX_BAD_ARGS;
  switch (gt_shim::enter(args->device, _mlir_@PREFIX@_cuda_init, _mlir_@PREFIX@_cuda_load_to_device)) {
    case gt_shim::kEntered: break;
    case gt_shim::kCudaError: return GT_CUTEDSL_SOFTMAX_CUDA_ERROR;
    case gt_shim::kLoadFailed: return GT_CUTEDSL_SOFTMAX_LOAD_FAILED;
  }
  static @PREFIX@_Kernel_Module_t module = {nullptr};  // the wrapper does not read it
@FILL@
  if (!gt_shim::launched(cute_dsl_@PREFIX@_wrapper(&module, &tx, &ty, args->scale, stream)))
    return GT_CUTEDSL_SOFTMAX_CUDA_ERROR;
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
      return gt_shim::error_text(status == GT_CUTEDSL_SOFTMAX_LOAD_FAILED ? "loading the kernel module failed: " : "");
    default:
      return "unknown status";
  }
}

}  // extern "C"
