// The C ABI shim of every CuTe DSL GEMM instance (gt_cutedsl_abi.h), one object for all of them:
// compile.py compiles it once per worker (shim_object()) and links it into each kernel .so
// with the instance's exported object and a few lines of generated assembly, so that no C++ is
// compiled per artifact (docs/cutedsl.md "Artifacts"). The instance supplies, by symbol:
//   gt_inst_config  the config text (compile.config_text), NUL-terminated
//   gt_inst_desc    a GtGemmDesc: what the run needs of the config
//   gt_inst_init, gt_inst_load, gt_inst_entry: the export's _mlir_<prefix>_cuda_init,
//                   _mlir_<prefix>_cuda_load_to_device and its host entry
//                   _mlir_<prefix>__mlir_ciface_<function> (aliases made by the link: --defsym)
// Problem-term arguments -> the kernel's tensor structs, as compile._bindings lays them out (the
// fake tensors' C structs, checked against the exported header by compile._check_header):
//   matrix (a, b, d, C with beta): {void* data; int32 shapes[2] = rows, cols; int64 strides[2] =
//          ld, batch stride}; a vector with a length (bias, rowwise/block scales): {data;
//          int32 shapes[1]}; any other tensor: {data}. All three are prefixes of Tensor below.
// CUDA calls go through the shared runtime library (runtime.cpp, via shim_common.h).
#include <cuda_runtime_api.h>

#include "gt_cutedsl_abi.h"
#include "shim_common.h"

#define GT_EXPORT __attribute__((visibility("default")))
#define GT_INSTANCE __attribute__((visibility("hidden")))

namespace {

// Written by compile._gemm_desc: 32-bit fields in this order. Bump kDescVersion (and the field
// list there) when it changes.
constexpr int32_t kDescVersion = 1;
enum Scale : int32_t { kScaleNone = 0, kScaleTensorwise = 1, kScaleRowwise = 2, kScaleBlock = 3 };
struct GtGemmDesc {
  int32_t version;                  // kDescVersion
  int32_t swap_ab;                  // the kernel's M is the problem's n
  int32_t a_row, b_row, c_row, d_row;
  int32_t ab_bytes, d_bytes;        // element bytes of A and B, of C and D
  int32_t has_c, bias;              // C read (beta != 0), bias[n]
  int32_t scale;                    // Scale
  int32_t cluster_size;             // CTAs per cluster
};

}  // namespace

extern "C" {
GT_INSTANCE extern const char gt_inst_config[];
GT_INSTANCE extern const GtGemmDesc gt_inst_desc;
GT_INSTANCE void gt_inst_init(void**);
GT_INSTANCE void gt_inst_load(void**);
GT_INSTANCE void gt_inst_entry(void** args, int32_t num_args);
}

namespace {

using gt_shim::aligned;
using gt_shim::kMaxDevices;
const int64_t kMax32 = 2147483647;

struct Tensor {
  void* data;
  int32_t shapes[2];
  int64_t strides[2];
};

// One matrix operand in the kernel's terms: rows x cols, leading dimension ld, batch stride.
struct Matrix {
  const void* ptr;
  int64_t rows, cols, ld, batch;
};

// A (M, K) and B (N, K) of the kernel: the problem's A and B, or with swap-AB B^T and A^T.
Matrix operand_a(const GtGemmDesc& g, const GtCutedslArgs* x) {
  return {x->a, x->m, x->k, x->lda, x->lda * (g.a_row ? x->m : x->k)};
}
Matrix operand_b(const GtGemmDesc& g, const GtCutedslArgs* x) {
  return {x->b, x->n, x->k, x->ldb, x->ldb * (g.b_row ? x->k : x->n)};
}
// D or C (M, N) of the kernel: the problem's (m, n) or, swapped, its transpose.
Matrix output(const GtGemmDesc& g, const GtCutedslArgs* x, const void* ptr, int64_t ld, bool row) {
  const int64_t batch = ld * (row ? x->m : x->n);
  return g.swap_ab ? Matrix{ptr, x->n, x->m, ld, batch} : Matrix{ptr, x->m, x->n, ld, batch};
}

struct Kernel {  // the kernel's matrices
  Matrix a, b, d, c;
};

Kernel kernel_terms(const GtGemmDesc& g, const GtCutedslArgs* x) {
  Kernel k;
  k.a = g.swap_ab ? operand_b(g, x) : operand_a(g, x);
  k.b = g.swap_ab ? operand_a(g, x) : operand_b(g, x);
  k.d = output(g, x, x->d, x->ldd, g.d_row);
  k.c = output(g, x, x->c, x->ldc, g.c_row);
  return k;
}

// Block scales' lengths (gemmtune/problem.hpp): sa [kb, m], sb [nb, round_up(kb, 4)].
int64_t block_sa_len(const GtCutedslArgs* x) { return x->m * ((x->k + 127) / 128); }
int64_t block_sb_len(const GtCutedslArgs* x) {
  const int64_t kb = (x->k + 127) / 128;
  return (x->n + 127) / 128 * ((kb + 3) / 4 * 4);
}

// TMA (A, B, D): 16-byte aligned base and a 16-byte multiple leading dimension.
bool tma_ok(const Matrix& t, int32_t bytes) { return (t.ld * bytes) % 16 == 0 && (!t.ptr || aligned(t.ptr, 16)); }

Tensor matrix(const Matrix& t) {
  Tensor s = {const_cast<void*>(t.ptr), {static_cast<int32_t>(t.rows), static_cast<int32_t>(t.cols)}, {t.ld, t.batch}};
  return s;
}
Tensor vector(const void* ptr, int64_t length) {
  Tensor s = {const_cast<void*>(ptr), {static_cast<int32_t>(length), 0}, {0, 0}};
  return s;
}

}  // namespace

extern "C" {

GT_EXPORT int gt_cutedsl_abi_version(void) { return GT_CUTEDSL_ABI_VERSION; }

GT_EXPORT const char* gt_cutedsl_config(void) { return gt_inst_config; }

GT_EXPORT int gt_cutedsl_can_implement(const GtCutedslArgs* args) {
  if (!args) return GT_CUTEDSL_BAD_ARGS;
  if (args->abi_version != GT_CUTEDSL_ABI_VERSION) return GT_CUTEDSL_BAD_ABI;
  if (args->m < 1 || args->n < 1 || args->k < 1 || args->m > kMax32 || args->n > kMax32 || args->k > kMax32)
    return GT_CUTEDSL_BAD_ARGS;
  if (args->device < 0 || args->device >= kMaxDevices) return GT_CUTEDSL_BAD_ARGS;
  if (args->flags & ~GT_CUTEDSL_OVERLAP_PREVIOUS) return GT_CUTEDSL_BAD_ARGS;
  const GtGemmDesc& g = gt_inst_desc;
  if (g.version != kDescVersion) return GT_CUTEDSL_BAD_ABI;
  const Kernel k = kernel_terms(g, args);
  if (!tma_ok(k.a, g.ab_bytes) || !tma_ok(k.b, g.ab_bytes) || !tma_ok(k.d, g.d_bytes)) return GT_CUTEDSL_MISALIGNED;
  if (g.has_c && args->c && !aligned(args->c, unsigned(g.d_bytes))) return GT_CUTEDSL_MISALIGNED;
  if (g.bias && args->bias && !aligned(args->bias, unsigned(g.d_bytes))) return GT_CUTEDSL_MISALIGNED;
  if (g.scale == kScaleBlock && (block_sa_len(args) > kMax32 || block_sb_len(args) > kMax32)) return GT_CUTEDSL_BAD_ARGS;
  // Block scales are loaded by TMA: 16-byte aligned, and each k block's m scales of A start on
  // 16 bytes (m a multiple of 4).
  const unsigned scale_align = g.scale == kScaleBlock ? 16 : 4;
  if (g.scale == kScaleBlock && args->m % 4 != 0) return GT_CUTEDSL_MISALIGNED;
  if (g.scale != kScaleNone) {
    if (args->scale_a && !aligned(args->scale_a, scale_align)) return GT_CUTEDSL_MISALIGNED;
    if (args->scale_b && !aligned(args->scale_b, scale_align)) return GT_CUTEDSL_MISALIGNED;
  }
  return GT_CUTEDSL_OK;
}

GT_EXPORT int gt_cutedsl_run(const GtCutedslArgs* args, cudaStream_t stream) {
  int st = gt_cutedsl_can_implement(args);
  if (st != GT_CUTEDSL_OK) return st;
  const GtGemmDesc& g = gt_inst_desc;
  // A pointer the instance reads or writes is null.
  if (!args->a || !args->b || !args->d || (g.has_c && !args->c) || (g.bias && !args->bias) ||
      (g.scale != kScaleNone && (!args->scale_a || !args->scale_b)))
    return GT_CUTEDSL_BAD_ARGS;
  switch (gt_shim::enter(args->device, gt_inst_init, gt_inst_load)) {
    case gt_shim::kEntered: break;
    case gt_shim::kCudaError: return GT_CUTEDSL_CUDA_ERROR;
    case gt_shim::kLoadFailed: return GT_CUTEDSL_LOAD_FAILED;
  }
  // The persistent grid: one CTA per SM, so SMs / cluster size clusters at once.
  int sms = args->sm_count;
  if (sms <= 0 && !gt_shim::ok(gt_cutedsl_rt_sm_count(args->device, &sms))) return GT_CUTEDSL_CUDA_ERROR;
  int32_t max_clusters = sms / g.cluster_size > 0 ? sms / g.cluster_size : 1;

  const Kernel k = kernel_terms(g, args);
  Tensor ta = matrix(k.a), tb = matrix(k.b), td = matrix(k.d);
  // Tensors the instance never reads get args->d (any 16-byte aligned pointer).
  Tensor tc = g.has_c ? matrix(k.c) : vector(args->d, 0);
  Tensor tbias = g.bias ? vector(args->bias, args->n) : vector(args->d, 0);
  Tensor trs = vector(args->d, 0), tcs = vector(args->d, 0);
  if (g.scale != kScaleNone) {
    // Row scales run along the kernel's M, column scales along its N.
    const float* rs = g.swap_ab ? args->scale_b : args->scale_a;
    const float* cs = g.swap_ab ? args->scale_a : args->scale_b;
    int64_t rows = g.swap_ab ? args->n : args->m, cols = g.swap_ab ? args->m : args->n;
    if (g.scale == kScaleBlock) {
      rows = g.swap_ab ? block_sb_len(args) : block_sa_len(args);
      cols = g.swap_ab ? block_sa_len(args) : block_sb_len(args);
    } else if (g.scale == kScaleTensorwise) {
      rows = cols = 0;  // (1,) tensors: no length field
    }
    trs = vector(rs, rows);
    tcs = vector(cs, cols);
  }
  float alpha = args->alpha, beta = args->beta;
  int32_t pdl = (args->flags & GT_CUTEDSL_OVERLAP_PREVIOUS) ? 1 : 0;
  int32_t ret = 0;
  void* call[13] = {&ta, &tb, &td, &tc, &tbias, &trs, &tcs, &alpha, &beta, &max_clusters, &pdl, &stream, &ret};
  gt_inst_entry(call, 13);
  if (!gt_shim::launched(ret)) return GT_CUTEDSL_CUDA_ERROR;
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
