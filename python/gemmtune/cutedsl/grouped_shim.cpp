// The C ABI shim of every CuTe DSL grouped GEMM instance (gt_cutedsl_abi.h, "Grouped GEMM
// instances"), one object for all of them, linked as gemm_shim.cpp is (compile.py
// shim_object("grouped_shim.cpp"); no C++ compiled per artifact). The instance supplies, by symbol:
//   gt_inst_config  the config text (compile.grouped_config_text), NUL-terminated
//   gt_inst_desc    a GtGroupedDesc: what the run needs of the config
//   gt_inst_init, gt_inst_load, gt_inst_entry: the export's init, load and host entry, which
//                   takes (a, b, d, rows, bias, row_scale, col_scale, alpha, max_clusters,
//                   stream, ret) (gemm_sm90.HopperGemm.grouped_call).
// Problem arguments -> the kernel's tensor structs, as compile._grouped_fake_args lays them out
// (checked against the exported header by compile._check_grouped_header):
//   a, d: {data; int32 shapes[2 | 3] = rows, cols(, groups: masked); int64 strides[2] = ld, batch}
//   b:    {data; int32 shapes[3] = n, k, groups; int64 strides[2] = ld, batch}
//   rows, bias, rowwise scales, tensorwise sb: {data; int32 shapes[1]}; tensorwise sa: {data}.
#include <cuda_runtime_api.h>

#include "gt_cutedsl_abi.h"
#include "shim_common.h"

#define GT_EXPORT __attribute__((visibility("default")))
#define GT_INSTANCE __attribute__((visibility("hidden")))

namespace {

// Written by compile._grouped_desc: 32-bit fields in this order. Bump kDescVersion (and the field
// list there) when it changes.
constexpr int32_t kDescVersion = 1;
enum Scale : int32_t { kScaleNone = 0, kScaleTensorwise = 1, kScaleRowwise = 2 };
struct GtGroupedDesc {
  int32_t version;       // kDescVersion
  int32_t masked;        // the layout: 1 masked, 0 contiguous
  int32_t ab_bytes, d_bytes;
  int32_t bias;          // bias [groups, n]
  int32_t scale;         // Scale
  int32_t cluster_size;  // CTAs per cluster
};

}  // namespace

extern "C" {
GT_INSTANCE extern const char gt_inst_config[];
GT_INSTANCE extern const GtGroupedDesc gt_inst_desc;
GT_INSTANCE void gt_inst_init(void**);
GT_INSTANCE void gt_inst_load(void**);
GT_INSTANCE void gt_inst_entry(void** args, int32_t num_args);
}

namespace {

using gt_shim::aligned;
using gt_shim::kMaxDevices;
const int64_t kMax32 = 2147483647;

// The largest tensor struct of the kernel's arguments; the smaller ones are its prefixes.
struct Tensor {
  void* data;
  int32_t shapes[3];
  int64_t strides[2];
};
struct Tensor2 {  // a contiguous layout's A and D: (rows, cols, 1)
  void* data;
  int32_t shapes[2];
  int64_t strides[2];
};

// A packed row-major [batches x] rows x cols matrix: ld = cols, batch stride rows * cols.
Tensor matrix3(const void* p, int64_t rows, int64_t cols, int64_t batches) {
  Tensor t = {const_cast<void*>(p),
              {static_cast<int32_t>(rows), static_cast<int32_t>(cols), static_cast<int32_t>(batches)},
              {cols, rows * cols}};
  return t;
}
Tensor2 matrix2(const void* p, int64_t rows, int64_t cols) {
  Tensor2 t = {const_cast<void*>(p), {static_cast<int32_t>(rows), static_cast<int32_t>(cols)}, {cols, rows * cols}};
  return t;
}
Tensor vector(const void* p, int64_t length) {
  Tensor t = {const_cast<void*>(p), {static_cast<int32_t>(length), 0, 0}, {0, 0}};
  return t;
}

// Rows of A (and D) in all: capacity (contiguous) or groups x capacity (masked).
int64_t a_rows(const GtGroupedDesc& g, const GtCutedslGroupedArgs* x) {
  return g.masked ? x->groups * x->capacity : x->capacity;
}

}  // namespace

extern "C" {

GT_EXPORT int gt_cutedsl_grouped_abi_version(void) { return GT_CUTEDSL_GROUPED_ABI_VERSION; }

GT_EXPORT const char* gt_cutedsl_grouped_config(void) { return gt_inst_config; }

GT_EXPORT int gt_cutedsl_grouped_can_implement(const GtCutedslGroupedArgs* x) {
  if (!x) return GT_CUTEDSL_BAD_ARGS;
  if (x->abi_version != GT_CUTEDSL_GROUPED_ABI_VERSION) return GT_CUTEDSL_BAD_ABI;
  const GtGroupedDesc& g = gt_inst_desc;
  if (g.version != kDescVersion) return GT_CUTEDSL_BAD_ABI;
  if (x->groups < 1 || x->n < 1 || x->k < 1 || x->capacity < 1 || x->groups > kMax32 || x->n > kMax32 ||
      x->k > kMax32 || x->capacity > kMax32)
    return GT_CUTEDSL_BAD_ARGS;
  if (x->device < 0 || x->device >= kMaxDevices || x->flags != 0 || x->reserved != 0) return GT_CUTEDSL_BAD_ARGS;
  // Element counts the kernel indexes with 32-bit coordinates: rows of A, B's and the scales' rows.
  if (a_rows(g, x) > kMax32 || x->groups * x->n > kMax32) return GT_CUTEDSL_BAD_ARGS;
  // TMA: 16-byte aligned bases, rows of 16-byte multiples (A and B: k elements, D: n).
  if ((x->k * g.ab_bytes) % 16 || (x->n * g.d_bytes) % 16) return GT_CUTEDSL_MISALIGNED;
  if ((x->a && !aligned(x->a, 16)) || (x->b && !aligned(x->b, 16)) || (x->d && !aligned(x->d, 16)))
    return GT_CUTEDSL_MISALIGNED;
  if (x->rows && !aligned(x->rows, 4)) return GT_CUTEDSL_MISALIGNED;
  if (g.bias && x->bias && !aligned(x->bias, unsigned(g.d_bytes))) return GT_CUTEDSL_MISALIGNED;
  if (g.scale != kScaleNone && ((x->scale_a && !aligned(x->scale_a, 4)) || (x->scale_b && !aligned(x->scale_b, 4))))
    return GT_CUTEDSL_MISALIGNED;
  return GT_CUTEDSL_OK;
}

GT_EXPORT int gt_cutedsl_grouped_run(const GtCutedslGroupedArgs* x, cudaStream_t stream) {
  int st = gt_cutedsl_grouped_can_implement(x);
  if (st != GT_CUTEDSL_OK) return st;
  const GtGroupedDesc& g = gt_inst_desc;
  if (!x->a || !x->b || !x->d || !x->rows || (g.bias && !x->bias) ||
      (g.scale != kScaleNone && (!x->scale_a || !x->scale_b)))
    return GT_CUTEDSL_BAD_ARGS;
  switch (gt_shim::enter(x->device, gt_inst_init, gt_inst_load)) {
    case gt_shim::kEntered: break;
    case gt_shim::kCudaError: return GT_CUTEDSL_CUDA_ERROR;
    case gt_shim::kLoadFailed: return GT_CUTEDSL_LOAD_FAILED;
  }
  // The persistent grid: one CTA per SM, so SMs / cluster size clusters.
  int sms = x->sm_count;
  if (sms <= 0 && !gt_shim::ok(gt_cutedsl_rt_sm_count(x->device, &sms))) return GT_CUTEDSL_CUDA_ERROR;
  int32_t max_clusters = sms / g.cluster_size > 0 ? sms / g.cluster_size : 1;

  Tensor b = matrix3(x->b, x->n, x->k, x->groups);
  Tensor a3 = matrix3(x->a, x->capacity, x->k, x->groups), d3 = matrix3(x->d, x->capacity, x->n, x->groups);
  Tensor2 a2 = matrix2(x->a, x->capacity, x->k), d2 = matrix2(x->d, x->capacity, x->n);
  void* a = g.masked ? static_cast<void*>(&a3) : static_cast<void*>(&a2);
  void* d = g.masked ? static_cast<void*>(&d3) : static_cast<void*>(&d2);
  Tensor rows = vector(x->rows, x->groups);
  // Tensors the instance never reads get D (any 16-byte aligned pointer).
  Tensor bias = g.bias ? vector(x->bias, x->groups * x->n) : vector(x->d, 0);
  Tensor sa = vector(x->d, 0), sb = vector(x->d, 0);
  if (g.scale == kScaleTensorwise) {
    sa = vector(x->scale_a, 0);  // (1,): no length field
    sb = vector(x->scale_b, x->groups);
  } else if (g.scale == kScaleRowwise) {
    sa = vector(x->scale_a, a_rows(g, x));
    sb = vector(x->scale_b, x->groups * x->n);
  }
  float alpha = x->alpha;
  int32_t ret = 0;
  void* call[11] = {a, &b, d, &rows, &bias, &sa, &sb, &alpha, &max_clusters, &stream, &ret};
  gt_inst_entry(call, 11);
  if (!gt_shim::launched(ret)) return GT_CUTEDSL_CUDA_ERROR;
  return GT_CUTEDSL_OK;
}

GT_EXPORT const char* gt_cutedsl_grouped_status_text(int status) {
  switch (status) {
    case GT_CUTEDSL_OK: return "ok";
    case GT_CUTEDSL_BAD_ABI: return "ABI version mismatch";
    case GT_CUTEDSL_BAD_ARGS: return "bad arguments (null pointer, flags, or a size out of range)";
    case GT_CUTEDSL_MISALIGNED: return "a pointer or row is not 16-byte aligned (TMA)";
    case GT_CUTEDSL_LOAD_FAILED:
    case GT_CUTEDSL_CUDA_ERROR:
      return gt_shim::error_text(status == GT_CUTEDSL_LOAD_FAILED ? "loading the kernel module failed: " : "");
    default: return "unknown status";
  }
}

}  // extern "C"
