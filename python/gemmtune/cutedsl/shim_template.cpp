// Shim of one CuTe DSL GEMM instance (generated from python/gemmtune/cutedsl/shim_template.cpp
// by compile.py; @NAME@ markers are filled in). Implements gt_cutedsl_abi.h around the header
// that export_to_c wrote (@PREFIX@.h): problem-term arguments -> the kernel's tensor structs.
// CUDA calls go through the shared runtime library (runtime.cpp, via shim_common.h).
#include "@PREFIX@.h"

#include "gt_cutedsl_abi.h"
#include "shim_common.h"

#define GT_EXPORT __attribute__((visibility("default")))

namespace {

const char kConfig[] = "@CONFIG@";
using gt_shim::aligned;
using gt_shim::kMaxDevices;

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
  switch (gt_shim::enter(args->device, _mlir_@PREFIX@_cuda_init, _mlir_@PREFIX@_cuda_load_to_device)) {
    case gt_shim::kEntered: break;
    case gt_shim::kCudaError: return GT_CUTEDSL_CUDA_ERROR;
    case gt_shim::kLoadFailed: return GT_CUTEDSL_LOAD_FAILED;
  }
  static @PREFIX@_Kernel_Module_t module = {nullptr};  // the wrapper does not read it
  // The persistent grid: one CTA per SM, so SMs / cluster size clusters at once.
  int sms = args->sm_count;
  if (sms <= 0 && !gt_shim::ok(gt_cutedsl_rt_sm_count(args->device, &sms))) return GT_CUTEDSL_CUDA_ERROR;
  const int32_t max_clusters = sms / @CLUSTER_SIZE@ > 0 ? sms / @CLUSTER_SIZE@ : 1;
@FILL@
  if (!gt_shim::launched(cute_dsl_@PREFIX@_wrapper(&module, @CALL_ARGS@, stream))) return GT_CUTEDSL_CUDA_ERROR;
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
      return gt_shim::error_text(status == GT_CUTEDSL_LOAD_FAILED ? "loading the kernel module failed: " : "");
    default: return "unknown status";
  }
}

}  // extern "C"
