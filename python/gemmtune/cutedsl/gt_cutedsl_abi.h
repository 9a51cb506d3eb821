/* The C ABI between gemmtune's CuTe DSL loader (src/backends/cutedsl/) and one compiled CuTe
 * DSL GEMM shared object (python/gemmtune/cutedsl/compile.py: the kernel exported with
 * export_to_c, our shim, the DSL's static runtime and CUDA's static runtime, linked into one
 * .so). This file is compiled into both sides (and hashed into every artifact's key).
 *
 * Every .so exports exactly these functions, with C linkage (everything else is hidden):
 *
 *   int         gt_cutedsl_abi_version(void);                   GT_CUTEDSL_ABI_VERSION
 *   const char* gt_cutedsl_config(void);                        the instance's config text
 *   int         gt_cutedsl_can_implement(const GtCutedslArgs*); GT_CUTEDSL_OK or a status
 *   int         gt_cutedsl_run(const GtCutedslArgs*, cudaStream_t);
 *   const char* gt_cutedsl_status_text(int status);
 *
 * Arguments are in the PROBLEM's terms (gemmtune's GemmProblem):
 *   D[m, n] = act(alpha * sa * sb * (A[m, k] @ B[k, n]) + beta * C[m, n] + bias[n]);
 * block scales (kb = ceil(k / 128), nb = ceil(n / 128); gemmtune/problem.hpp) apply to each
 * 128-deep k block's partial sums;
 * an instance built with swap-AB transposes internally. Pointers are device pointers, 16-byte
 * aligned; leading dimensions in elements, resolved (never 0), 16-byte multiples. run() loads
 * the kernel's module into the device on first use (once per device, thread-safe) and makes
 * args->device current in the .so's own CUDA runtime. CUDA errors: GT_CUTEDSL_CUDA_ERROR, and
 * gt_cutedsl_status_text(status) then names the latest CUDA error of the calling thread.
 */
#ifndef GEMMTUNE_CUTEDSL_ABI_H
#define GEMMTUNE_CUTEDSL_ABI_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GT_CUTEDSL_ABI_VERSION 2

enum {
  GT_CUTEDSL_OK = 0,
  GT_CUTEDSL_BAD_ABI = 1,     /* args->abi_version != GT_CUTEDSL_ABI_VERSION */
  GT_CUTEDSL_BAD_ARGS = 2,    /* a required pointer is null, a size or ld is out of range */
  GT_CUTEDSL_MISALIGNED = 3,  /* a pointer or leading dimension breaks TMA's 16-byte rule */
  GT_CUTEDSL_LOAD_FAILED = 4, /* loading the kernel's module into the device failed */
  GT_CUTEDSL_CUDA_ERROR = 5   /* a CUDA error in the launch; see gt_cutedsl_status_text */
};

/* GtCutedslArgs.flags: launch as a programmatic dependent launch (the kernel may start before the
 * previous kernel on the stream has finished; it reads only the problem's B, the weights, before
 * that kernel completes: the caller promises that kernel does not write B). */
#define GT_CUTEDSL_OVERLAP_PREVIOUS 1
typedef struct GtCutedslArgs {
  int32_t abi_version; /* GT_CUTEDSL_ABI_VERSION */
  int32_t device;      /* CUDA device ordinal the stream belongs to */
  int32_t sm_count;    /* SMs the persistent grid may use (0: query the device) */
  int32_t flags;       /* GT_CUTEDSL_OVERLAP_PREVIOUS or 0 */
  int64_t m, n, k;
  const void* a;        /* [m, k] */
  const void* b;        /* [k, n] */
  const void* c;        /* [m, n]; read only by instances built with C (beta != 0) */
  void* d;              /* [m, n] */
  const void* bias;     /* [n], D's dtype; instances built with bias */
  const float* scale_a; /* fp8: [1] tensorwise, [m] rowwise or [kb, m] block; else unused */
  const float* scale_b; /* fp8: [1] tensorwise, [n] rowwise or [nb, round_up(kb, 4)] block; else unused */
  int64_t lda, ldb, ldc, ldd;
  float alpha, beta;
} GtCutedslArgs;

/* Grouped GEMM instances (gemmtune/grouped.hpp; compile params {"op": "grouped", ...}) export,
 * with C linkage, instead of the gt_cutedsl_* functions above:
 *
 *   int         gt_cutedsl_grouped_abi_version(void);                          GT_CUTEDSL_GROUPED_ABI_VERSION
 *   const char* gt_cutedsl_grouped_config(void);                               the instance's config text
 *   int         gt_cutedsl_grouped_can_implement(const GtCutedslGroupedArgs*); GT_CUTEDSL_OK or a status
 *   int         gt_cutedsl_grouped_run(const GtCutedslGroupedArgs*, cudaStream_t);
 *   const char* gt_cutedsl_grouped_status_text(int status);                    (statuses as above)
 *
 * Group g multiplies its rows of A by its weight B[g] (each [n, k], k contiguous):
 *   D[r, :] = act(alpha * sa * sb * (A[r, :] @ B[g]^T) + bias[g, :])   for each row r of group g
 * The layout (contiguous or masked) is the instance's. A, B and D are packed (row strides k, k
 * and n elements; k and n multiples of 16 bytes' elements), 16-byte aligned. rows: int32 on the
 * GPU, read by the kernel: contiguous, group g owns rows rows[g-1] .. rows[g] - 1 of A and D
 * (rows[-1] = 0; ends clamped to [0, capacity], a group's start to its end); masked, group g's
 * first rows[g] (clamped to [0, capacity]) rows of its capacity. Rows of no group are not
 * written. flags: 0 (no overlapped launch: the split itself may come from the previous kernel).
 */
#define GT_CUTEDSL_GROUPED_ABI_VERSION 1
typedef struct GtCutedslGroupedArgs {
  int32_t abi_version; /* GT_CUTEDSL_GROUPED_ABI_VERSION */
  int32_t device;      /* CUDA device ordinal the stream belongs to */
  int32_t sm_count;    /* SMs the persistent grid may use (0: query the device) */
  int32_t flags;       /* 0 */
  int64_t groups, n, k;
  int64_t capacity;     /* rows of A and D (contiguous) or rows per group (masked), >= 1 */
  const void* a;        /* contiguous [capacity, k]; masked [groups, capacity, k] */
  const void* b;        /* [groups, n, k] */
  void* d;              /* contiguous [capacity, n]; masked [groups, capacity, n] */
  const int32_t* rows;  /* [groups]: ends (contiguous) or counts (masked) */
  const void* bias;     /* [groups, n], D's dtype; instances built with bias */
  const float* scale_a; /* fp8: [1] tensorwise; rowwise one per row of A ([capacity] or [groups, capacity]) */
  const float* scale_b; /* fp8: [groups] tensorwise, [groups, n] rowwise */
  float alpha;
  int32_t reserved;     /* 0 */
} GtCutedslGroupedArgs;

typedef int (*gt_cutedsl_grouped_abi_version_fn)(void);
typedef const char* (*gt_cutedsl_grouped_config_fn)(void);
typedef int (*gt_cutedsl_grouped_can_implement_fn)(const GtCutedslGroupedArgs*);
typedef int (*gt_cutedsl_grouped_run_fn)(const GtCutedslGroupedArgs*, cudaStream_t);
typedef const char* (*gt_cutedsl_grouped_status_text_fn)(int);

typedef int (*gt_cutedsl_abi_version_fn)(void);
typedef const char* (*gt_cutedsl_config_fn)(void);
typedef int (*gt_cutedsl_can_implement_fn)(const GtCutedslArgs*);
typedef int (*gt_cutedsl_run_fn)(const GtCutedslArgs*, cudaStream_t);
typedef const char* (*gt_cutedsl_status_text_fn)(int);

#ifdef __cplusplus
}
#endif

#endif /* GEMMTUNE_CUTEDSL_ABI_H */
