/* gemmtune: the C API (libgemmtune_c.so), for C callers and Python's ctypes.
 *
 *   gt_engine* e;  gt_kernel* k;  char* report;
 *   if (gt_engine_create("{\"cache_path\": \"/tmp/t.sqlite\"}", &e) != GT_OK) puts(gt_last_error());
 *   gt_select(e, "{\"m\": 16, \"n\": 10240, \"k\": 8192}", 0, &k, &report);
 *   gt_kernel_run(k, a, w, NULL, d, NULL, NULL, NULL, stream);
 *   gt_free(report); gt_kernel_destroy(k); gt_engine_destroy(e);
 *
 * Conventions
 *  - Every function but gt_last_error, gt_version and gt_free returns a status: GT_OK (0) or one
 *    of the GT_ERR_* codes below. No C++ exception crosses this boundary.
 *  - After a failed call, gt_last_error() describes it (per thread; the text stays valid until
 *    the next failing call on that thread). Successful calls leave it unchanged.
 *  - Output pointers are set to NULL when a call fails. Strings returned through char** are
 *    malloc'd JSON: release them with gt_free.
 *  - Handles are opaque. A kernel keeps its engine's internals alive: gt_engine_destroy may be
 *    called before gt_kernel_destroy. One engine may be used from several threads (calls on it
 *    are serialized). One kernel must not run on two threads at once (a kernel may cache the
 *    last pointers it was given): load one kernel per thread.
 *  - Problems are JSON objects (fields: m, n, k required; dtype, b_dtype, out_dtype, layout
 *    ("rc": A row-major, B col-major, i.e. D = A @ W^T with W[n,k] row-major as nn.Linear),
 *    d_layout, c_layout, lda, ldb, ldc, ldd, alpha, beta, bias, act, scale, tf32); errors name
 *    the field, e.g. "problem.layout: 'x' is not two layout letters ...". Unknown fields are
 *    errors.
 *  - Engine options are a JSON object, or NULL / "" for defaults (gemmtune/engine_options.hpp;
 *    cache_path, log_level, max_configs, compile_budget and compile fields left out come from the GEMMTUNE_*
 *    variables, docs/compile-stage.md):
 *    cache_path, use_cache, backends (list of names), device, log_to_stderr, log_level (quiet,
 *    warning, info, debug), max_configs (candidates per backend and problem, 0 = the backend's),
 *    compile_budget (candidates per backend a tune may compile, the cost model's best; 0 = the
 *    default 8 or $GEMMTUNE_COMPILE_BUDGET, -1 = no budget),
 *    tune {warmup_ms, min_rounds, max_rounds, round_budget_ms, prune_ratio, tie_tolerance,
 *    tie_rounds, prefer_margin, duel_rounds, duel_window, duels, seed, spin_us, input_sets},
 *    compile {artifacts, workers, nvcc_jobs, timeout_s, load_only (list of cutlass, triton,
 *    cutedsl), python, python_dir, nvcc, cutlass_dir}.
 */
#ifndef GEMMTUNE_C_H
#define GEMMTUNE_C_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define GT_API __declspec(dllexport)
#else
#define GT_API __attribute__((visibility("default")))
#endif

typedef struct gt_engine gt_engine;
typedef struct gt_kernel gt_kernel;
typedef struct gt_softmax_kernel gt_softmax_kernel;
typedef struct gt_grouped_kernel gt_grouped_kernel;

/* A failed call's status is the code of the gemmtune::Error behind it (gemmtune/error.hpp:
 * ErrorCode invalid, no_device, runtime, internal), wherever in the call it was raised; only
 * GT_ERR_ARGUMENT is this API's own. */
enum gt_status {
  GT_OK = 0,
  GT_ERR_ARGUMENT = 1,  /* a NULL handle or output pointer */
  GT_ERR_INVALID = 2,   /* ErrorCode::invalid: bad JSON, an invalid problem or option, an unknown
                           backend name, a malformed GEMMTUNE_* value (the message names the field
                           or variable, without a source location) */
  GT_ERR_NO_DEVICE = 3, /* ErrorCode::no_device: no usable CUDA device */
  GT_ERR_RUNTIME = 4,   /* ErrorCode::runtime: CUDA / backend failure, no correct candidate, bad
                           kernel arguments */
  GT_ERR_INTERNAL = 5   /* ErrorCode::internal, or anything else (out of memory, an exception
                           that is not a gemmtune::Error) */
};

/* The message of the last failed call on this thread; "" if none failed yet. Never NULL. */
GT_API const char* gt_last_error(void);
/* Engine version, e.g. "0.1.0". */
GT_API const char* gt_version(void);
/* Releases a string returned by this API (NULL is fine). */
GT_API void gt_free(void* p);

/* Creates an engine on options_json (NULL or "" for defaults). */
GT_API int gt_engine_create(const char* options_json, gt_engine** out);
/* NULL is fine. Kernels from this engine stay usable until destroyed. */
GT_API int gt_engine_destroy(gt_engine* engine);
/* {"version", "device": {...}, "environment", "backends": [{"name", "status"}], "cache_path"} */
GT_API int gt_engine_info(gt_engine* engine, char** json);

/* The kernel for problem_json: from the cache, or tuned now (force_tune != 0: always tuned,
 * overwriting the cache entry). report_json (may be NULL) receives the TuneReport as JSON:
 * {"op": "gemm", "problem", "problem_json", "canonical", "key", "from_cache", "seconds", "spread",
 *  "notes", "results": [{"backend", "id", "name", "status", "reason", "rel_err", "median_us",
 *  "p20_us", "p80_us", "samples", "compile_s", "winner", "is_default"}]}, results best first
 *  (winner, ok by median, pruned, wrong, failed). A result's fields are the one encoding the CLI's
 *  --json and the tuning cache's export also use. "rel_err" is null when it was not measured
 *  (earlier versions gave -1 here; the softmax report and the CLI always said null). */
GT_API int gt_select(gt_engine* engine, const char* problem_json, int force_tune, gt_kernel** out,
                     char** report_json);
/* A specific candidate (backend and id from a report), prepared, bypassing the cache. */
GT_API int gt_load(gt_engine* engine, const char* problem_json, const char* backend, const char* id,
                   gt_kernel** out);

/* Enqueues D = act(alpha * sa * sb * (A @ B) + beta * C + bias) on `stream` (a cudaStream_t;
 * NULL = the legacy default stream). Device pointers, 16-byte aligned; c only when beta != 0,
 * bias only with bias, scale_a/scale_b only for fp8 with scales ("scale": "block": scale_a
 * [ceil(k/128), m] M-major, scale_b [ceil(n/128), round_up(ceil(k/128), 4)] row-major, as
 * gemmtune/problem.hpp and docs/fp8.md describe). Asynchronous: launch errors
 * are reported, kernel faults surface at the next synchronization. */
GT_API int gt_kernel_run(gt_kernel* kernel, const void* a, const void* b, const void* c, void* d,
                         const void* bias, const float* scale_a, const float* scale_b, void* stream);
/* gt_kernel_run with flags: GT_RUN_OVERLAP_PREVIOUS, a programmatic dependent launch where
 * the kernel supports it (gemmtune::RunOptions::overlap_previous: it may read B before the
 * previous kernel on the stream finishes; the caller promises that kernel does not write B). */
#define GT_RUN_OVERLAP_PREVIOUS 1
GT_API int gt_kernel_run_ex(gt_kernel* kernel, const void* a, const void* b, const void* c, void* d,
                            const void* bias, const float* scale_a, const float* scale_b, void* stream, int flags);
/* gt_kernel_run(kernel, a, b, NULL, d, bias, NULL, NULL, stream) in six arguments: D = A @ B (+ bias,
 * the epilogue of the kernel's problem), no C, no scales. For callers that pay per argument
 * (Python's ctypes converts each one: gemmtune.torch's mm and linear). */
GT_API int gt_kernel_run_abd(gt_kernel* kernel, const void* a, const void* b, void* d, const void* bias, void* stream);
/* NULL is fine. */
GT_API int gt_kernel_destroy(gt_kernel* kernel);
/* {"backend", "id", "name", "can_overlap", "problem", "problem_json", "cache_key", "torch_baseline",
 * "median_us", "torch_baseline_us"}; can_overlap: GT_RUN_OVERLAP_PREVIOUS takes effect (the kernel
 * supports a programmatic dependent launch; otherwise it launches as usual); torch_baseline: the kernel is the cuBLASLt baseline that reproduces torch's
 * own call (a report's is_default candidate where cuBLASLt answered torch's query;
 * docs/cublaslt.md); median_us, torch_baseline_us: the kernel's and that baseline's medians in the
 * last tune of the kernel's problem, from the tuning cache (raced in the same rounds), null where
 * it has none (no cache, the problem not tuned, either not timed). */
GT_API int gt_kernel_describe(gt_kernel* kernel, char** json);

/* Softmax over the last dimension of a [rows, cols] tensor (gemmtune/softmax.hpp). problem_json:
 * {"rows": 4096, "cols": 32768, "ld": 0, "dtype": "bf16", "out_dtype": "bf16", "scale": 1.0}
 * (every field but rows and cols optional; ld 0 = packed). report_json as gt_select's, with
 * "op": "softmax", "problem_json" in these fields, "bytes" (read + written) and each result's
 * "tbps" (bytes / median, TB/s; 0 when not timed; earlier versions spelled it "TBps" and had no
 * "problem_json"). */
GT_API int gt_softmax_select(gt_engine* engine, const char* problem_json, int force_tune, gt_softmax_kernel** out,
                             char** report_json);
/* Enqueues y = softmax(scale * x) on `stream`; x and y device pointers, 16-byte aligned. */
GT_API int gt_softmax_run(gt_softmax_kernel* kernel, const void* x, void* y, void* stream);
/* NULL is fine. */
GT_API int gt_softmax_destroy(gt_softmax_kernel* kernel);
/* {"backend", "id", "name", "problem", "cache_key"} */
GT_API int gt_softmax_describe(gt_softmax_kernel* kernel, char** json);

/* Grouped GEMM for mixture-of-experts layers (gemmtune/grouped.hpp). problem_json:
 * {"groups": 8, "n": 14336, "k": 4096, "rows_per_group": 512, "layout": "contiguous" | "masked",
 *  "dtype": "bf16" | "fp16" | "e4m3", "out_dtype", "scale": "tensorwise" | "rowwise" (fp8; default
 *  rowwise), "act", "bias", "alpha", "skew"} (groups, n, k, rows_per_group required). The cache
 * key holds rows_per_group's power-of-two bucket; the split is read on the GPU at every run.
 * report_json as gt_select's, with "op": "grouped" and "problem_json" in these fields. */
GT_API int gt_grouped_select(gt_engine* engine, const char* problem_json, int force_tune, gt_grouped_kernel** out,
                             char** report_json);
/* Enqueues the grouped GEMM on `stream`. a: [capacity, k] (contiguous) or [G, capacity, k]
 * (masked); b: [G, n, k]; d like a with n; rows: int32 [G] on the GPU, the cumulative end of
 * each group's rows (contiguous, as torch._grouped_mm's offs) or each group's count (masked);
 * bias [G, n] when the problem has one; fp8 scales: scale_a [1] or one per row of A, scale_b [G]
 * or [G, n]. Device pointers, 16-byte aligned. */
GT_API int gt_grouped_run(gt_grouped_kernel* kernel, const void* a, const void* b, void* d, const int32_t* rows,
                          int64_t capacity, const void* bias, const float* scale_a, const float* scale_b, void* stream);
/* NULL is fine. */
GT_API int gt_grouped_destroy(gt_grouped_kernel* kernel);
/* {"backend", "id", "name", "problem", "cache_key"} */
GT_API int gt_grouped_describe(gt_grouped_kernel* kernel, char** json);

#ifdef __cplusplus
}
#endif

#endif /* GEMMTUNE_C_H */
