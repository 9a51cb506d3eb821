/* The C ABI between gemmtune's CUTLASS loader (src/backends/cutlass/) and one generated
 * CUTLASS kernel shared object (kernel/sm90_gemm.cuh instantiated by a few generated lines).
 *
 * Every generated .so exports exactly these functions, with C linkage and default visibility
 * (everything else in it, its static CUDA runtime included, is hidden):
 *
 *   int         gt_cutlass_abi_version(void);                  GT_CUTLASS_ABI_VERSION
 *   const char* gt_cutlass_config(void);                       the instance's config text
 *   int         gt_cutlass_can_implement(const GtCutlassArgs*); GT_CUTLASS_OK or a status
 *   size_t      gt_cutlass_workspace(const GtCutlassArgs*);    device bytes run() needs
 *   int         gt_cutlass_run(const GtCutlassArgs*, void* workspace, cudaStream_t);
 *   const char* gt_cutlass_status_text(int status);
 *
 * The tile order (raster, swizzle) is a run-time argument: one compiled instance serves every order.
 *
 * Arguments are always in the PROBLEM's terms (gemmtune's GemmProblem): D[m, n] = act(alpha *
 * sa * sb * (A[m, k] @ B[k, n]) + beta * C[m, n] + bias[n]); an instance built with swap-AB
 * transposes internally. Pointers are device pointers, 16-byte aligned; leading dimensions are
 * in elements and resolved (never 0). The .so carries its own (static) CUDA runtime, so it
 * reports CUDA errors of its launches itself: gt_cutlass_run returns GT_CUTLASS_CUDA_ERROR and
 * gt_cutlass_status_text(status) then names the CUDA error.
 */
#ifndef GEMMTUNE_CUTLASS_ABI_H
#define GEMMTUNE_CUTLASS_ABI_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GT_CUTLASS_ABI_VERSION 4

/* Status codes returned by gt_cutlass_can_implement and gt_cutlass_run. */
enum {
  GT_CUTLASS_OK = 0,
  GT_CUTLASS_BAD_ABI = 1,        /* args->abi_version != GT_CUTLASS_ABI_VERSION */
  GT_CUTLASS_BAD_ARGS = 2,       /* a required pointer is null, a size, ld or tile order is out of range */
  GT_CUTLASS_MISALIGNED = 3,     /* a pointer or leading dimension breaks TMA's 16-byte rule */
  GT_CUTLASS_CANNOT_IMPLEMENT = 4, /* CUTLASS's can_implement said no */
  GT_CUTLASS_INIT_FAILED = 5,    /* CUTLASS's initialize failed (e.g. shared memory attribute) */
  GT_CUTLASS_CUDA_ERROR = 6      /* a CUDA error in the launch; see gt_cutlass_status_text */
};

/* GtCutlassArgs.flags: launch as a programmatic dependent launch (the kernel may start before the
 * previous kernel on the stream has finished; it waits for that kernel before it touches global
 * memory). GEMM instances only; grouped instances refuse flags. */
#define GT_CUTLASS_OVERLAP_PREVIOUS 1
typedef struct GtCutlassArgs {
  int32_t abi_version; /* GT_CUTLASS_ABI_VERSION */
  int32_t device;      /* CUDA device ordinal the stream belongs to */
  int32_t sm_count;    /* SMs the persistent scheduler may use (0: query the device) */
  int32_t raster;      /* the persistent scheduler's tile order, kernel terms: 0 CUTLASS's heuristic
                          (grouped instances: along M), 1 along M, 2 along N */
  int32_t swizzle;     /* tiles per band of that order: 1, 2, 4 or 8 (1 with the heuristic) */
  int32_t flags;       /* GT_CUTLASS_OVERLAP_PREVIOUS or 0 */
  int64_t m, n, k;
  const void* a;       /* [m, k] */
  const void* b;       /* [k, n] */
  const void* c;       /* [m, n]; read only by instances built with C (beta != 0) */
  void* d;             /* [m, n] */
  const void* bias;    /* [n], D's dtype; instances built with bias */
  const float* scale_a; /* fp8: [1] tensorwise, [m] rowwise, or block [kb][m] (kb = ceil(k / 128)); else unused */
  const float* scale_b; /* fp8: [1] tensorwise, [n] rowwise, or block [nb][round_up(kb, 4)]; else unused */
  int64_t lda, ldb, ldc, ldd;
  float alpha, beta;
  /* Grouped instances (sm90_grouped.cuh) only: G groups, B [G, n, k], m the capacity (the rows of
   * A and D, or of each group's part of them in the masked layout), rows [G] on the GPU (cumulative
   * ends, or counts: the instance's layout). GEMM instances ignore them. */
  int32_t groups;
  int32_t reserved2;
  const int32_t* rows;
} GtCutlassArgs;

/* Several instances in one translation unit (src/compile/nvcc.cpp builds a group of misses in one
 * nvcc run: their template instantiations are shared). Each generated instance source puts its
 * instance in namespace GT_CUTLASS_MEMBER, which the group's translation unit defines to a
 * distinct token (m0, m1, ...) before including it; its entry points are then named
 * GT_CUTLASS_MEMBER_ENTRY(gt_cutlass_run) = gt_cutlass_run_m0, ..., with hidden visibility. The
 * shared object of member mK is the group's object linked with a selector,
 * GT_CUTLASS_EXPORT_MEMBER(mK), which exports mK's entry points under the names above: every
 * member's .so carries the whole group's kernels and answers for its own instance only. */
#define GT_CUTLASS_CAT_(a, b) a##_##b
#define GT_CUTLASS_CAT(a, b) GT_CUTLASS_CAT_(a, b)
#define GT_CUTLASS_MEMBER_ENTRY(fn) GT_CUTLASS_CAT(fn, GT_CUTLASS_MEMBER)
#define GT_CUTLASS_SELECT_(ret, fn, params, args, member)                                          \
  ret GT_CUTLASS_CAT(fn, member) params;                                                          \
  __attribute__((visibility("default"))) ret fn params { return GT_CUTLASS_CAT(fn, member) args; }
#define GT_CUTLASS_EXPORT_MEMBER(member)                                                          \
  GT_CUTLASS_SELECT_(int, gt_cutlass_abi_version, (void), (), member)                             \
  GT_CUTLASS_SELECT_(const char*, gt_cutlass_config, (void), (), member)                          \
  GT_CUTLASS_SELECT_(int, gt_cutlass_can_implement, (const GtCutlassArgs* g), (g), member)        \
  GT_CUTLASS_SELECT_(size_t, gt_cutlass_workspace, (const GtCutlassArgs* g), (g), member)         \
  GT_CUTLASS_SELECT_(int, gt_cutlass_run, (const GtCutlassArgs* g, void* ws, cudaStream_t s), (g, ws, s), member) \
  GT_CUTLASS_SELECT_(const char*, gt_cutlass_status_text, (int st), (st), member)

typedef int (*gt_cutlass_abi_version_fn)(void);
typedef const char* (*gt_cutlass_config_fn)(void);
typedef int (*gt_cutlass_can_implement_fn)(const GtCutlassArgs*);
typedef size_t (*gt_cutlass_workspace_fn)(const GtCutlassArgs*);
typedef int (*gt_cutlass_run_fn)(const GtCutlassArgs*, void*, cudaStream_t);
typedef const char* (*gt_cutlass_status_text_fn)(int);

#ifdef __cplusplus
}
#endif

#endif /* GEMMTUNE_CUTLASS_ABI_H */
