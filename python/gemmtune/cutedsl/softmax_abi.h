/* The C ABI between gemmtune's CuTe DSL softmax loader (src/backends/cutedsl/softmax.cpp) and
 * one compiled CuTe DSL softmax shared object (python/gemmtune/cutedsl/softmax_compile.py: the
 * kernel of softmax_sm90.py exported with export_to_c, the shim softmax_shim.cpp, linked into a
 * .so that needs the shared CuTe DSL runtime library by soname). Compiled into both sides and
 * hashed into every softmax artifact's key.
 *
 * Every softmax .so exports exactly these functions, with C linkage (everything else is hidden):
 *
 *   int         gt_cutedsl_softmax_abi_version(void);      GT_CUTEDSL_SOFTMAX_ABI_VERSION
 *   const char* gt_cutedsl_softmax_config(void);           the instance's config text (params JSON)
 *   int         gt_cutedsl_softmax_max_cols(void);         the longest row the instance holds
 *   int         gt_cutedsl_softmax_can_implement(const GtCutedslSoftmaxArgs*);
 *   int         gt_cutedsl_softmax_run(const GtCutedslSoftmaxArgs*, cudaStream_t);
 *   const char* gt_cutedsl_softmax_status_text(int status);
 *
 * y[r, c] = softmax_c(scale * x[r, c]) over rows x cols, rows `ld` elements apart in x and y
 * (gemmtune's SoftmaxProblem). x and y are device pointers, 16-byte aligned; an instance with
 * vector width vec > 1 needs ld % vec == 0, unless it reads rows in virtual columns (params
 * "virt": any ld); cols <= max_cols. run() loads the kernel's module
 * into the device on first use (once per device, thread-safe) and makes args->device current in
 * the shared runtime library. CUDA errors: GT_CUTEDSL_SOFTMAX_CUDA_ERROR, and
 * gt_cutedsl_softmax_status_text(status) then names the calling thread's latest CUDA error.
 */
#ifndef GEMMTUNE_CUTEDSL_SOFTMAX_ABI_H
#define GEMMTUNE_CUTEDSL_SOFTMAX_ABI_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GT_CUTEDSL_SOFTMAX_ABI_VERSION 1

enum {
  GT_CUTEDSL_SOFTMAX_OK = 0,
  GT_CUTEDSL_SOFTMAX_BAD_ABI = 1,     /* args->abi_version != GT_CUTEDSL_SOFTMAX_ABI_VERSION */
  GT_CUTEDSL_SOFTMAX_BAD_ARGS = 2,    /* a null pointer; rows, cols or ld out of range */
  GT_CUTEDSL_SOFTMAX_MISALIGNED = 3,  /* x or y not 16-byte aligned, or ld not a multiple of vec (not virt) */
  GT_CUTEDSL_SOFTMAX_LOAD_FAILED = 4, /* loading the kernel's module into the device failed */
  GT_CUTEDSL_SOFTMAX_CUDA_ERROR = 5,  /* a CUDA error in the launch; see the status text */
  GT_CUTEDSL_SOFTMAX_TOO_LONG = 6     /* cols > the instance's max_cols */
};

typedef struct GtCutedslSoftmaxArgs {
  int32_t abi_version; /* GT_CUTEDSL_SOFTMAX_ABI_VERSION */
  int32_t device;      /* CUDA device ordinal the stream belongs to */
  int64_t rows, cols;  /* 1 .. 2^31 - 1 */
  int64_t ld;          /* elements between rows of x and of y (resolved: >= cols) */
  const void* x;       /* [rows, ld], the input dtype */
  void* y;             /* [rows, ld], the output dtype; the padding past cols is never written */
  float scale;         /* applied to x before the softmax (fp32) */
  int32_t reserved;
} GtCutedslSoftmaxArgs;

typedef int (*gt_cutedsl_softmax_abi_version_fn)(void);
typedef const char* (*gt_cutedsl_softmax_config_fn)(void);
typedef int (*gt_cutedsl_softmax_max_cols_fn)(void);
typedef int (*gt_cutedsl_softmax_can_implement_fn)(const GtCutedslSoftmaxArgs*);
typedef int (*gt_cutedsl_softmax_run_fn)(const GtCutedslSoftmaxArgs*, cudaStream_t);
typedef const char* (*gt_cutedsl_softmax_status_text_fn)(int);

#ifdef __cplusplus
}
#endif

#endif /* GEMMTUNE_CUTEDSL_SOFTMAX_ABI_H */
