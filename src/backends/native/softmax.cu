// Our own CUDA softmax kernels: warp per row, block per row, cluster per row (distributed
// shared memory), smem, pipe (persistent, copy-engine fed; the long-row kernel) and online (any
// cols). See softmax.hpp and docs/softmax.md.
//
// Arithmetic, every kind: a = s * x in fp32; M = max a (NaN ignored by fmaxf); e = exp(a - M)
// computed as ex2((a - M) * log2 e) (ex2.approx.f32: ~2 ulp, subnormal results kept);
// S = sum e; y = e * (1 / S).
// Special values mirror torch.softmax (tests/support/host_softmax.hpp lists the cases) because
// IEEE arithmetic does the work, as in torch's formula: a NaN (NaN - M), a +Inf (inf - inf) or
// an all -Inf row (-inf - -inf) puts NaN into S, so the whole row is NaN; -Inf entries of a
// finite row give ex2(-inf) = 0.
//   cluster   each CTA k exponentiates its slice against its own max m_k (0 instead when
//             m_k = -Inf, so that an all -Inf slice of a finite row gives e = 0, not NaN) and
//             publishes (m_k, s_k); every CTA merges M = max m_k, S = sum s_k ex2((m_k - M) log2e)
//             and writes y = e * ex2((m_k - M) log2e) / S. An all -Inf row gets M = -Inf and
//             ex2(NaN) = NaN factors, so NaN throughout; a NaN or +Inf slice makes its s_k NaN.
//             With one CTA (block kind) the factor is ex2(0) = 1 for any finite row.
//   online    a running (m, s) where every exp(a - b) with a == b counts as exp(0) = 1, so
//             -inf - -inf never poisons a row that later meets a finite max; NaN still
//             enters s. At the end a row whose max is +-Inf is written NaN (what the
//             two-pass formula gives), any other row y = exp(x - M) / S (NaN if S is).
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <numeric>
#include <string>
#include <tuple>
#include <type_traits>

#include "backends/native/softmax.hpp"
#include "core/convert.cuh"
#include "core/cuda.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune::native {
namespace {

namespace cg = cooperative_groups;

constexpr int kMaxThreads = 1024;
constexpr int kMaxCluster = 16;  // Hopper's non-portable maximum (8 portable)
constexpr int64_t kMinSmemSlice = 8 * 1024, kMaxSmemSlice = 96 * 1024;  // bytes of x per CTA offered
constexpr float kLog2e = 1.4426950408889634f;

// ---- element access and exp ----------------------------------------------------------------

// N consecutive elements, aligned to their total size (one access of up to 16 bytes; 32-byte
// packs of fp32 outputs become two).
template <class T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

// v[0..VEC) = scale * x[c0 .. c0 + VEC), -inf past cols. One vector load when the pack is whole.
template <int VEC, class Ti>
__device__ __forceinline__ void load_scaled(const Ti* __restrict__ x, int64_t c0, int64_t cols, float scale, float* v) {
  if (VEC > 1 && c0 + VEC <= cols) {
    const Pack<Ti, VEC> p = *reinterpret_cast<const Pack<Ti, VEC>*>(x + c0);
#pragma unroll
    for (int i = 0; i < VEC; ++i) v[i] = scale * to_float(p.v[i]);
  } else {
#pragma unroll
    for (int i = 0; i < VEC; ++i) v[i] = c0 + i < cols ? scale * to_float(x[c0 + i]) : -INFINITY;
  }
}

// y[c0 .. c0 + VEC) = v[0..VEC), columns past cols left untouched.
template <int VEC, class To>
__device__ __forceinline__ void store(To* __restrict__ y, int64_t c0, int64_t cols, const float* v) {
  if (VEC > 1 && c0 + VEC <= cols) {
    Pack<To, VEC> p;
#pragma unroll
    for (int i = 0; i < VEC; ++i) p.v[i] = from_float<To>(v[i]);
    *reinterpret_cast<Pack<To, VEC>*>(y + c0) = p;
  } else {
#pragma unroll
    for (int i = 0; i < VEC; ++i)
      if (c0 + i < cols) y[c0 + i] = from_float<To>(v[i]);
  }
}

// 2^x (ex2.approx.f32: max error ~2 ulp; -inf -> 0, NaN -> NaN; subnormal results kept).
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// exp(a - m) as ex2((a - m) log2 e): the difference first, so that huge finite a and m do not
// overflow, and inf - inf / -inf - -inf give NaN as in torch's formula.
__device__ __forceinline__ float exp_sub(float a, float m) { return ex2((a - m) * kLog2e); }
// v[i] <- exp(v[i] - r) for a row's max r (0 for a row of -inf); returns the sum of this thread's
// v. ex2(v log2e - r log2e), one FFMA an element, unless r log2e overflows (|r| > 2.3e38): then
// the difference first (exp_sub).
template <int E>
__device__ __forceinline__ float exp_and_sum(float (&v)[E], float r) {
  const float rl = r * kLog2e;
  float sum = 0.0f;
  if (isfinite(rl) || !isfinite(r)) {
#pragma unroll
    for (int i = 0; i < E; ++i) {
      v[i] = ex2(fmaf(v[i], kLog2e, -rl));
      sum += v[i];
    }
  } else {
#pragma unroll
    for (int i = 0; i < E; ++i) {
      v[i] = exp_sub(v[i], r);
      sum += v[i];
    }
  }
  return sum;
}

// ---- reductions ------------------------------------------------------------------------------

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// A warp's (max, sum of exp(v - max)) over its lanes' E values each; (-Inf, 0) when every value
// is -Inf (the exponentials then taken against 0: never -Inf - -Inf).
template <int E>
__device__ __forceinline__ float2 warp_pair(const float* v) {
  float m = -INFINITY;
#pragma unroll
  for (int e = 0; e < E; ++e) m = fmaxf(m, v[e]);
  m = warp_max(m);
  const float r = m == -INFINITY ? 0.0f : m;
  float sum = 0.0f;
#pragma unroll
  for (int e = 0; e < E; ++e) sum += exp_sub(v[e], r);
  return make_float2(m, warp_sum(sum));
}

// exp(a - b), but 1 when a == b (so that -inf - -inf and inf - inf count as exp(0)).
__device__ __forceinline__ float exp_diff(float a, float b) { return a == b ? 1.0f : expf(a - b); }

// Merges the running state (m, s) with (m2, s2): m = max, each sum rescaled to it.
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
  const float mm = fmaxf(m, m2);
  s = s * exp_diff(m, mm) + s2 * exp_diff(m2, mm);
  m = mm;
}
__device__ __forceinline__ void warp_merge(float& m, float& s) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
    merge(m, s, m2, s2);
  }
}

// Block-wide max / sum / (m, s) merge; every thread gets the result. blockDim.x % 32 == 0.
// `red` holds 32 floats (two arrays for the pair); the trailing sync makes it reusable.
__device__ __forceinline__ float block_max(float v, float* red) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = blockDim.x / 32;
  v = warp_max(v);
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < nwarps ? red[lane] : -INFINITY;
  v = warp_max(v);
  __syncthreads();
  return v;
}
__device__ __forceinline__ float block_sum(float v, float* red) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = blockDim.x / 32;
  v = warp_sum(v);
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < nwarps ? red[lane] : 0.0f;
  v = warp_sum(v);
  __syncthreads();
  return v;
}
__device__ __forceinline__ void block_merge(float& m, float& s, float* red_m, float* red_s) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = blockDim.x / 32;
  warp_merge(m, s);
  if (lane == 0) red_m[warp] = m, red_s[warp] = s;
  __syncthreads();
  m = lane < nwarps ? red_m[lane] : -INFINITY;
  s = lane < nwarps ? red_s[lane] : 0.0f;
  warp_merge(m, s);
  __syncthreads();
}

// ---- kernels ---------------------------------------------------------------------------------

// Exponentiates the in-row entries of v (E of them, in packs of VEC at columns
// base + (j * stride + t) * VEC) against m and returns their sum.
template <int E, int VEC>
__device__ __forceinline__ float exp_and_sum(float* v, float m, int64_t cols, int64_t base, int64_t stride, int64_t t) {
  float s = 0;
#pragma unroll
  for (int j = 0; j < E / VEC; ++j) {
    const int64_t c0 = base + (j * stride + t) * VEC;
#pragma unroll
    for (int i = 0; i < VEC; ++i)
      if (c0 + i < cols) {
        v[j * VEC + i] = exp_sub(v[j * VEC + i], m);
        s += v[j * VEC + i];
      }
  }
  return s;
}

// The factor that turns this CTA's exponentials (taken against its max m, summing to s) into
// the row's softmax: exp(m - M) / S over the row's max M and sum S. One CTA per row (csize 1):
// 1 / s, or NaN for an all -Inf row (its e were taken against 0). A cluster of csize CTAs per
// row: each publishes (m, s) in `part` (its shared float[2]) and reads every CTA's over DSM.
// Every thread of every CTA of the cluster calls it (cluster barriers).
__device__ __forceinline__ float row_factor(float m, float s, float* part, int csize) {
  float M = m, S = s;
  if (csize > 1) {
    cg::cluster_group cluster = cg::this_cluster();
    if (threadIdx.x == 0) part[0] = m, part[1] = s;
    cluster.sync();
    M = -INFINITY;
    for (int k = 0; k < csize; ++k) M = fmaxf(M, *cluster.map_shared_rank(&part[0], k));
    S = 0;
    for (int k = 0; k < csize; ++k) {
      const float* pk = cluster.map_shared_rank(&part[0], k);
      S += pk[1] * exp_sub(pk[0], M);
    }
    cluster.sync();  // no CTA leaves while another still reads its part
  } else {
    S = s * exp_sub(m, M);
  }
  return exp_sub(m, M) / S;
}

// Register budget: 32 fp32 values a thread fit 512-thread blocks (128 registers a thread).
constexpr int kWarpMaxThreads = 512;
template <int E>
constexpr int split_max_threads() { return E >= 32 ? 512 : kMaxThreads; }

// One warp per row; lane l holds packs j = 0 .. E/VEC-1 at columns (j * 32 + l) * VEC.
template <class Ti, class To, int E, int VEC>
__global__ void __launch_bounds__(kWarpMaxThreads)
    softmax_warp_kernel(const Ti* __restrict__ x, To* __restrict__ y, int64_t rows, int64_t cols, int64_t ld, float scale) {
  static_assert(VEC >= 1 && E % VEC == 0, "warp softmax: elems per lane must be a multiple of the vector width");
  static_assert(VEC * sizeof(Ti) <= 16, "warp softmax: one vector load is at most 16 bytes");
  static_assert(E <= 64, "warp softmax: at most 64 elements per lane stay in registers");
  const int lane = threadIdx.x % 32;
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp leaves together
  x += row * ld;
  y += row * ld;
  float v[E];
#pragma unroll
  for (int j = 0; j < E / VEC; ++j) load_scaled<VEC>(x, (int64_t(j) * 32 + lane) * VEC, cols, scale, v + j * VEC);
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < E; ++i) m = fmaxf(m, v[i]);
  m = warp_max(m);
  const float s = warp_sum(exp_and_sum<E, VEC>(v, m, cols, 0, 32, lane));
  const float inv = 1.0f / s;
#pragma unroll
  for (int i = 0; i < E; ++i) v[i] *= inv;
#pragma unroll
  for (int j = 0; j < E / VEC; ++j) store<VEC>(y, (int64_t(j) * 32 + lane) * VEC, cols, v + j * VEC);
}

// `csize` CTAs per row (a cluster when csize > 1; block rank = blockIdx.x % csize): CTA k holds
// the slice of threads * E columns starting at k * threads * E; thread t its packs j at
// columns slice + (j * threads + t) * VEC.
template <class Ti, class To, int E, int VEC>
__global__ void __launch_bounds__(split_max_threads<E>())
    softmax_split_kernel(const Ti* __restrict__ x, To* __restrict__ y, int64_t cols, int64_t ld, float scale, int csize) {
  static_assert(VEC >= 1 && E % VEC == 0, "split softmax: elems per thread must be a multiple of the vector width");
  static_assert(VEC * sizeof(Ti) <= 16, "split softmax: one vector load is at most 16 bytes");
  static_assert(E <= 64, "split softmax: at most 64 elements per thread stay in registers");
  __shared__ float red[32];
  __shared__ float part[2];  // this CTA's (m_k, s_k), read by the cluster's CTAs
  const int64_t row = blockIdx.x / csize;
  const int rank = int(blockIdx.x % csize);
  x += row * ld;
  y += row * ld;
  const int64_t t = threadIdx.x, nt = blockDim.x;
  const int64_t base = int64_t(rank) * nt * E;
  float v[E];
#pragma unroll
  for (int j = 0; j < E / VEC; ++j) load_scaled<VEC>(x, base + (j * nt + t) * VEC, cols, scale, v + j * VEC);
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < E; ++i) m = fmaxf(m, v[i]);
  m = block_max(m, red);
  const float s = block_sum(exp_and_sum<E, VEC>(v, m == -INFINITY ? 0.0f : m, cols, base, nt, t), red);
  const float f = row_factor(m, s, part, csize);
#pragma unroll
  for (int i = 0; i < E; ++i) v[i] *= f;
#pragma unroll
  for (int j = 0; j < E / VEC; ++j) store<VEC>(y, base + (j * nt + t) * VEC, cols, v + j * VEC);
}

// The slice lives in shared memory (raw input elements), loaded with cp.async: a CTA's whole
// slice is in flight at once without holding registers, and several CTAs fit an SM. `csize`
// CTAs per row as in softmax_split_kernel (CTA k: columns [k * slice, (k + 1) * slice)); exp is
// computed twice (sum, then write) instead of keeping fp32 values. VEC = 16 bytes of Ti;
// ld % VEC == 0 and x 16-byte aligned (the launcher checks), slice % VEC == 0.
template <class Ti, class To, int VEC>
__global__ void __launch_bounds__(kMaxThreads)
    softmax_smem_kernel(const Ti* __restrict__ x, To* __restrict__ y, int64_t cols, int64_t ld, float scale, int csize,
                        int64_t slice) {
  static_assert(VEC * sizeof(Ti) == 16, "smem softmax: 16-byte packs");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Ti* sx = reinterpret_cast<Ti*>(smem_raw);
  __shared__ float red[32];
  __shared__ float part[2];
  const int64_t row = blockIdx.x / csize;
  const int rank = int(blockIdx.x % csize);
  const int64_t base = int64_t(rank) * slice;
  // Columns of this CTA (> 0, at most slice <= 227 KiB of elements: int indices below).
  const int n = int(cols - base < slice ? cols - base : slice);
  x += row * ld + base;
  y += row * ld + base;
  const int t = threadIdx.x, nt = blockDim.x;
  const int whole = n / VEC * VEC;
  for (int c = t * VEC; c < whole; c += nt * VEC) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(sx + c));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(x + c) : "memory");
  }
  for (int c = whole + t; c < n; c += nt) sx[c] = x[c];
  asm volatile("cp.async.wait_all;" ::: "memory");
  __syncthreads();

  auto pack = [&](int c, float* v) {  // scale * x
    const Pack<Ti, VEC> p = *reinterpret_cast<const Pack<Ti, VEC>*>(sx + c);
#pragma unroll
    for (int i = 0; i < VEC; ++i) v[i] = scale * to_float(p.v[i]);
  };
  auto raw = [&](int c, float* v) {  // x
    const Pack<Ti, VEC> p = *reinterpret_cast<const Pack<Ti, VEC>*>(sx + c);
#pragma unroll
    for (int i = 0; i < VEC; ++i) v[i] = to_float(p.v[i]);
  };
  float m = -INFINITY;
  for (int c = t * VEC; c < whole; c += nt * VEC) {
    float v[VEC];
    pack(c, v);
#pragma unroll
    for (int i = 0; i < VEC; ++i) m = fmaxf(m, v[i]);
  }
  for (int c = whole + t; c < n; c += nt) m = fmaxf(m, scale * to_float(sx[c]));
  m = block_max(m, red);
  const float ms = m == -INFINITY ? 0.0f : m;
  // exp(s x - ms) as ex2(fma(x, s log2e, -ms log2e)): one FFMA instead of FMUL, FADD, FMUL per
  // element (this kernel computes exp twice). The special values come out as in exp_sub
  // (x = +-Inf, NaN, s = 0); ms log2e overflows only for |ms| > 2.3e38, where exp_sub is used.
  const float sl = scale * kLog2e, ml = ms * kLog2e;
  const bool fast = isfinite(ml) || !isfinite(ms);
  auto ex = [&](float xv) { return fast ? ex2(fmaf(xv, sl, -ml)) : exp_sub(scale * xv, ms); };
  float s = 0;
  for (int c = t * VEC; c < whole; c += nt * VEC) {
    float v[VEC];
    raw(c, v);
#pragma unroll
    for (int i = 0; i < VEC; ++i) s += ex(v[i]);
  }
  for (int c = whole + t; c < n; c += nt) s += ex(to_float(sx[c]));
  s = block_sum(s, red);
  const float f = row_factor(m, s, part, csize);
  for (int c = t * VEC; c < whole; c += nt * VEC) {
    float v[VEC];
    raw(c, v);
#pragma unroll
    for (int i = 0; i < VEC; ++i) v[i] = ex(v[i]) * f;
    store<VEC>(y, c, whole, v);
  }
  for (int c = whole + t; c < n; c += nt) y[c] = from_float<To>(ex(to_float(sx[c])) * f);
}

// One block per row, any cols: pass 1 a running (m, s), pass 2 re-reads and writes.
template <class Ti, class To, int VEC>
__global__ void __launch_bounds__(kMaxThreads)
    softmax_online_kernel(const Ti* __restrict__ x, To* __restrict__ y, int64_t cols, int64_t ld, float scale) {
  static_assert(VEC >= 1 && VEC * sizeof(Ti) <= 16, "online softmax: one vector load is at most 16 bytes");
  __shared__ float red_m[32], red_s[32];
  const int64_t row = blockIdx.x;
  x += row * ld;
  y += row * ld;
  const int64_t step = int64_t(blockDim.x) * VEC;
  float m = -INFINITY, s = 0.0f;
  for (int64_t c0 = int64_t(threadIdx.x) * VEC; c0 < cols; c0 += step) {
    float v[VEC];
    load_scaled<VEC>(x, c0, cols, scale, v);
    float cm = v[0];  // the pack's max (NaN ignored by fmaxf; NaN still reaches s below)
#pragma unroll
    for (int i = 1; i < VEC; ++i) cm = fmaxf(cm, v[i]);
    const float mm = fmaxf(m, cm);
    s *= exp_diff(m, mm);
#pragma unroll
    for (int i = 0; i < VEC; ++i)
      if (c0 + i < cols) s += exp_diff(v[i], mm);
    m = mm;
  }
  block_merge(m, s, red_m, red_s);
  const bool nan_row = isinf(m);  // max +Inf, or every element -Inf: torch gives NaN
  const float inv = nan_row ? NAN : 1.0f / s;
  for (int64_t c0 = int64_t(threadIdx.x) * VEC; c0 < cols; c0 += step) {
    float v[VEC];
    load_scaled<VEC>(x, c0, cols, scale, v);
#pragma unroll
    for (int i = 0; i < VEC; ++i) v[i] = exp_sub(v[i], m) * inv;
    store<VEC>(y, c0, cols, v);
  }
}

// ---- pipe: persistent clusters, slices streamed by the copy engine, rows reduced in registers ----
//
// A CTA holds `rpb` rows at a time (a block-row), each row owned by W = warps / rpb warps (rpb >
// 1 only without clusters; rpb = warps: a warp per row). Cluster q (CTAs q * csize .. q * csize
// + csize - 1; CTA `rank` owns columns [rank * S, rank * S + S) of every row, S = W * 32 * E)
// processes block-rows q, q + nq, q + 2 nq, ... (nq = clusters in the grid). Each CTA keeps
// `stages` shared-memory stages of rpb slices of S elements, each stage with a full-barrier
// (mbarrier, one arrival + the transaction bytes): thread 0 issues cp.async.bulk copies of the
// next block-rows' slices, so that `stages` block-rows are in flight while one is reduced. Per
// row, thread t (tr-th of its row's W * 32 threads) holds the packs j = 0 .. E / VEC - 1 at
// slice columns (j * W * 32 + tr) * VEC in fp32 registers (the stage is then free: thread 0
// refills it right after the first __syncthreads), and:
//   warp w   m_w = max of its values (NaN ignored), e = exp(v - r_w) with r_w = m_w (0 when
//            m_w = -Inf: an all -Inf warp gives e = 0), s_w = sum e
//   CTA      M_k = max m_w, S_k = sum s_w W(m_w, M_k)        (every warp merges its row's W pairs)
//   cluster  M = max M_k, S = sum S_k W(M_k, M)              (pairs pushed into every CTA's
//            shared memory by st.async, each CTA waiting for csize x 8 bytes on its own
//            mbarrier: no cluster barrier, no fence per row; csize == 1: M = M_k, S = S_k)
//   y        e * W(m_w, M) / S
// with W(m, M) = 0 when m = -Inf, else exp(m - M). Special values: a NaN makes its s_w NaN
// (NaN * 0 stays NaN through W), a +Inf gives exp(inf - inf) = NaN in its warp, an all -Inf row
// gets M = -Inf and S = 0, so y = 0 * 0 / 0 = NaN: torch's rows throughout; -Inf entries of a
// finite row give 0. The columns past cols (the last CTA's tail) are -Inf and never stored.
//
// Virtual columns (pipe, wide, tiny): row r's element c has the global index r * ld + c; with
// a = (r * ld) % VEC (0 for every row when ld % VEC == 0) the row is laid out in virtual
// columns u = c + a, so that a pack of VEC virtual columns starting at a multiple of VEC is a
// 16-byte aligned pack of x (and a VEC * sizeof(To)-aligned pack of y: x and y are aligned to
// VEC elements of their dtype). The row occupies virtual columns [a, cols + a); a pack wholly
// inside comes by cp.async.bulk / a vector load and goes out by a vector store, the partial
// first (head) and last (tail) packs element by element from / to global memory. A CTA owns
// the virtual columns [rank S, rank S + S), so a config holds rows of up to S * csize - (VEC - 1)
// columns when ld % VEC != 0.

// The virtual columns of a row that fall in the slice [base, base + S), relative to base (32-bit:
// S < 2^31; base is a multiple of VEC): [lo, hi), and the whole packs [plo, phi) among them
// (plo >= phi: none; lo >= hi: the slice is past the row). a: the row's offset, (row * ld) % VEC.
struct VirtualSlice {
  int lo, hi, plo, phi;
};
template <int VEC>
__device__ __forceinline__ VirtualSlice virtual_slice(int64_t a, int64_t cols, int64_t base, int S) {
  const int64_t lo = a - base, hi = cols + a - base;
  VirtualSlice v;
  v.lo = int(lo < 0 ? 0 : lo > S ? S : lo);
  v.hi = int(hi < 0 ? 0 : hi > S ? S : hi);
  v.plo = (v.lo + VEC - 1) / VEC * VEC;
  v.phi = v.hi / VEC * VEC;
  return v;
}

// pipe: the packs [cl, ch) of a row's slice that the copy engine brings (relative to base). Packed
// rows (ld == cols): every pack holding one of the slice's columns, the partial head and tail
// packs included (their other elements belong to the neighbouring rows and are never used), so
// that no thread waits for a global load of its own while the row is reduced; the tail pack only
// when it ends within x (`room` = elements from the slice's virtual column base to the end of x,
// rows * ld), else it stops at phi and the tail comes from global memory. Strided rows: the whole
// packs [plo, phi) only (the padding is never read; head and tail from global memory).
template <int VEC>
__device__ __forceinline__ void copied_packs(const VirtualSlice& vs, bool packed, int64_t room, int& cl, int& ch) {
  if (vs.lo >= vs.hi) {
    cl = ch = 0;
    return;
  }
  if (!packed) {
    cl = vs.plo, ch = vs.phi;
    return;
  }
  cl = vs.lo / VEC * VEC;
  ch = (vs.hi + VEC - 1) / VEC * VEC;
  if (ch > room) ch = vs.phi;
}

constexpr int kPipeMaxStages = 4;
constexpr int kPipeSlots = 4;  // cluster exchange slots (rows k, k + 4, ... share one)
constexpr uint32_t kBulkChunk = 32768;                  // bytes per cp.async.bulk
constexpr uint64_t kPipeWaitTimeoutNs = 5000000000ull;  // a lost copy traps (launch error) instead of hanging

// The kernel's __launch_bounds__: E fp32 values a thread; 64 registers a thread (1024 threads)
// hold 32 of them, more need 128 (512 threads).
template <int E>
constexpr int pipe_max_threads() { return E <= 32 ? 1024 : 512; }

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
// Makes the initialized mbarriers visible to the copy engine and the cluster.
__device__ __forceinline__ void fence_mbar_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(done)
      : "r"(smem_u32(bar)), "r"(parity)
      : "memory");
  return done != 0;
}
__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// Waits for the phase of `bar` with this parity to complete (the copies of one stage landed).
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  if (mbar_try_wait(bar, parity)) return;
  const uint64_t t0 = global_ns();
  while (!mbar_try_wait(bar, parity))
    if (global_ns() - t0 > kPipeWaitTimeoutNs) __trap();
}
// L2 policy for x: read once, evict first.
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
// bytes (a multiple of 16; both addresses 16-byte aligned) from global src to this CTA's shared
// dst, completing on bar's transaction count.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
          smem_u32(dst)),
      "l"(src), "r"(bytes), "r"(smem_u32(bar)), "l"(policy)
      : "memory");
}
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// Every thread of every CTA of the cluster: arrive (release), then wait (acquire).
__device__ __forceinline__ void cluster_barrier() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// The address of CTA `rank`'s copy of the shared variable at local address p (distributed shared memory).
__device__ __forceinline__ uint32_t mapa(const void* p, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_u32(p)), "r"(rank));
  return remote;
}
// v into the shared memory of a cluster CTA at `remote`, completing 8 transaction bytes on that
// CTA's mbarrier at `remote_bar` (no fence: the receiver's mbarrier wait orders it).
__device__ __forceinline__ void st_async(uint32_t remote, float2 v, uint32_t remote_bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" ::"r"(remote),
               "f"(v.x), "f"(v.y), "r"(remote_bar)
               : "memory");
}

// N floats to N elements of To at y with streaming (evict-first) stores, 16 bytes at a time
// (8 for N * sizeof(To) == 8). y is aligned to N * sizeof(To) bytes.
template <class To, int N>
__device__ __forceinline__ void store_streaming(To* y, const float* v) {
  constexpr int kBytes = N * int(sizeof(To));
  static_assert(kBytes % 8 == 0, "streaming stores of 8 or 16 bytes");
  uint32_t w[kBytes / 4];
  if constexpr (sizeof(To) == 4) {
#pragma unroll
    for (int i = 0; i < N; ++i) w[i] = __float_as_uint(v[i]);
  } else {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      if constexpr (std::is_same_v<To, __nv_bfloat16>) {
        const __nv_bfloat162 h = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);  // .x (low half) = v[2i]
        w[i] = *reinterpret_cast<const uint32_t*>(&h);
      } else {
        const __half2 h = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
        w[i] = *reinterpret_cast<const uint32_t*>(&h);
      }
    }
  }
  if constexpr (kBytes == 8) {
    asm volatile("st.global.cs.v2.b32 [%0], {%1, %2};" ::"l"(y), "r"(w[0]), "r"(w[1]) : "memory");
  } else {
#pragma unroll
    for (int q = 0; q < kBytes / 16; ++q)
      asm volatile("st.global.cs.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(reinterpret_cast<char*>(y) + 16 * q),
                   "r"(w[4 * q]), "r"(w[4 * q + 1]), "r"(w[4 * q + 2]), "r"(w[4 * q + 3])
                   : "memory");
  }
}

// W(m, M): 0 for m = -Inf (an all -Inf part contributes nothing, NaN sums stay NaN), else exp(m - M).
__device__ __forceinline__ float weight(float m, float M) { return m == -INFINITY ? 0.0f : exp_sub(m, M); }

template <class Ti, class To, int E>
__global__ void __launch_bounds__(pipe_max_threads<E>())
    softmax_pipe_kernel(const Ti* __restrict__ x, To* __restrict__ y, int64_t rows, int64_t cols, int64_t ld, float scale,
                        int csize, int stages, int rpb) {
  constexpr int VEC = int(16 / sizeof(Ti));
  constexpr int P = E / VEC;  // 16-byte packs a thread
  static_assert(E % VEC == 0 && P >= 1, "pipe softmax: whole 16-byte packs per thread");
  extern __shared__ __align__(16) unsigned char smem_raw[];  // stages x rpb x S elements of Ti
  __shared__ __align__(8) uint64_t full[kPipeMaxStages];
  __shared__ float2 wred[2][32];                      // per warp (m_w, s_w); two block-rows apart
  __shared__ __align__(8) uint64_t xbar[kPipeSlots];  // per slot: the cluster's csize pairs landed
  __shared__ float2 part[kPipeSlots][kMaxCluster];    // per CTA of the cluster (M_k, S_k); 4 rows apart
  const int t = int(threadIdx.x), lane = t & 31, warp = t >> 5;
  const int W = int(blockDim.x >> 5) / rpb;  // warps per row
  const int g = warp / W;                    // this warp's row in the block-row
  const int tw = W * 32, tr = t - g * tw;    // threads per row, this thread's index among them
  const int rank = csize > 1 ? int(cluster_ctarank()) : 0;  // == blockIdx.x % csize (1-D clusters)
  const int64_t first = blockIdx.x / csize, nclusters = gridDim.x / csize;
  const int64_t nblocks = (rows + rpb - 1) / rpb;  // block-rows
  const int S = tw * E;
  const int64_t base = int64_t(rank) * S;  // this CTA's first virtual column
  Ti* const buf = reinterpret_cast<Ti*>(smem_raw);

  uint64_t policy = 0;
  if (t == 0) {
    for (int s = 0; s < stages; ++s) mbar_init(&full[s], 1);
    if (csize > 1)
      for (int q = 0; q < kPipeSlots; ++q) mbar_init(&xbar[q], 1);
    fence_mbar_init();
    policy = evict_first_policy();
  }
  // The barriers are initialized, and (clusters) every CTA of the cluster runs and has its
  // barriers initialized before any distributed shared memory store.
  if (csize > 1)
    cluster_barrier();
  else
    __syncthreads();

  // Thread 0: the whole packs of this cluster's k-th block-row's slices into stage s (virtual
  // column u of row gg at buf[(s * rpb + gg) * S + u - base]); nothing past the last row.
  auto issue = [&](int64_t k, int s) {
    const int64_t blk = first + k * nclusters;
    if (blk >= nblocks) return;
    const int nr = int(rows - blk * rpb < rpb ? rows - blk * rpb : rpb);
    uint32_t total = 0;
    for (int gg = 0; gg < nr; ++gg) {
      const int64_t r = blk * rpb + gg, a = r * ld % VEC;
      int cl, ch;
      copied_packs<VEC>(virtual_slice<VEC>(a, cols, base, S), ld == cols, rows * ld - (r * ld - a + base), cl, ch);
      if (ch > cl) total += uint32_t(ch - cl) * uint32_t(sizeof(Ti));
    }
    mbar_arrive_expect_tx(&full[s], total);  // 0 bytes: the phase completes on this arrival
    for (int gg = 0; gg < nr; ++gg) {
      const int64_t r = blk * rpb + gg, a = r * ld % VEC;
      int cl, ch;
      copied_packs<VEC>(virtual_slice<VEC>(a, cols, base, S), ld == cols, rows * ld - (r * ld - a + base), cl, ch);
      if (ch <= cl) continue;
      const uint32_t bytes = uint32_t(ch - cl) * uint32_t(sizeof(Ti));
      const char* src = reinterpret_cast<const char*>(x + (r * ld - a + base) + cl);
      char* dst = reinterpret_cast<char*>(buf + (int64_t(s) * rpb + gg) * S + cl);
      for (uint32_t off = 0; off < bytes; off += kBulkChunk)
        bulk_load(dst + off, src + off, bytes - off < kBulkChunk ? bytes - off : kBulkChunk, &full[s], policy);
    }
  };
  if (t == 0)
    for (int s = 0; s < stages; ++s) issue(s, s);

  int s = 0;          // stage of block-row k
  uint32_t phase = 0;  // parity of the stage's barrier phase for block-row k
  for (int64_t k = 0, blk = first; blk < nblocks; ++k, blk += nclusters) {
    const int64_t row = blk * rpb + g;
    const bool valid = row < rows;  // the last block-row may be short (rpb > 1)
    const int64_t a = valid ? row * ld % VEC : 0;
    const VirtualSlice vs = virtual_slice<VEC>(a, cols, base, S);
    int cl, ch;  // the packs in the stage (copied_packs)
    copied_packs<VEC>(vs, ld == cols, rows * ld - (row * ld - a + base), cl, ch);
    mbar_wait(&full[s], phase);
    const Ti* sx = buf + (int64_t(s) * rpb + g) * S;  // sx[u]: virtual column base + u (whole packs)
    const Ti* gx = x + (row * ld - a + base);          // gx[u]: virtual column base + u in global memory
    float v[E];
#pragma unroll
    for (int j = 0; j < P; ++j) {
      const int u = (j * tw + tr) * VEC;
      if (!valid) {
#pragma unroll
        for (int i = 0; i < VEC; ++i) v[j * VEC + i] = -INFINITY;
      } else if (u >= vs.plo && u + VEC <= vs.phi) {
        const Pack<Ti, VEC> pk = *reinterpret_cast<const Pack<Ti, VEC>*>(sx + u);
#pragma unroll
        for (int i = 0; i < VEC; ++i) v[j * VEC + i] = scale * to_float(pk.v[i]);
      } else if (u >= cl && u + VEC <= ch) {  // the partial head or tail pack, in the stage
        const Pack<Ti, VEC> pk = *reinterpret_cast<const Pack<Ti, VEC>*>(sx + u);
#pragma unroll
        for (int i = 0; i < VEC; ++i)
          v[j * VEC + i] = u + i >= vs.lo && u + i < vs.hi ? scale * to_float(pk.v[i]) : -INFINITY;
      } else {  // past the row, or the last row's tail pack past the end of x (from global memory)
#pragma unroll
        for (int i = 0; i < VEC; ++i)
          v[j * VEC + i] = u + i >= vs.lo && u + i < vs.hi ? scale * to_float(gx[u + i]) : -INFINITY;
      }
    }
    // warp: max, exp against it, sum
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < E; ++i) m = fmaxf(m, v[i]);
    m = warp_max(m);
    float sum = exp_and_sum(v, m == -INFINITY ? 0.0f : m);
    sum = warp_sum(sum);
    if (lane == 0) wred[k & 1][warp] = make_float2(m, sum);
    __syncthreads();
    // Every thread has read stage s: it takes row k + stages.
    if (t == 0) issue(k + stages, s);
    // CTA: every warp merges the pairs of its row's warps
    const float2 q = lane < W ? wred[k & 1][g * W + lane] : make_float2(-INFINITY, 0.0f);
    float M = warp_max(q.x);
    float Z = warp_sum(q.y * weight(q.x, M));
    if (csize > 1) {  // cluster: push (M_k, S_k) into every CTA's part[xs][rank], wait for all of them, merge
      // Slot xs's next use (row k + 4) is written only after every CTA sent its pair of row
      // k + 3, i.e. after each has read slot xs for row k; its barrier phase for row k + 4 opens
      // when this one completes (the arming below and the senders' bytes may come in any order).
      const int xs = int(k % kPipeSlots);
      if (t == 0) mbar_arrive_expect_tx(&xbar[xs], uint32_t(csize) * uint32_t(sizeof(float2)));
      if (warp == 0 && lane < csize)
        st_async(mapa(&part[xs][rank], uint32_t(lane)), make_float2(M, Z), mapa(&xbar[xs], uint32_t(lane)));
      mbar_wait(&xbar[xs], uint32_t(k / kPipeSlots) & 1);
      const float2 pk = lane < csize ? part[xs][lane] : make_float2(-INFINITY, 0.0f);
      M = warp_max(pk.x);
      Z = warp_sum(pk.y * weight(pk.x, M));
    }
    const float f = weight(m, M) / Z;
    To* gy = y + (row * ld - a + base);  // gy[u]: virtual column base + u
    if (valid) {
#pragma unroll
      for (int j = 0; j < P; ++j) {
        const int u = (j * tw + tr) * VEC;
        float o[VEC];
#pragma unroll
        for (int i = 0; i < VEC; ++i) o[i] = v[j * VEC + i] * f;
        if (u >= vs.plo && u + VEC <= vs.phi) {
          store_streaming<To, VEC>(gy + u, o);
        } else {
#pragma unroll
          for (int i = 0; i < VEC; ++i)
            if (u + i >= vs.lo && u + i < vs.hi) gy[u + i] = from_float<To>(o[i]);
        }
      }
    }
    if (++s == stages) s = 0, phase ^= 1;
  }
  // No CTA leaves while another may still push into its shared memory.
  if (csize > 1) cluster_barrier();
}

// ---- row: the row in registers, 16-byte packs in virtual columns (odd widths) -----------------
//
// One pass, x read once, persistent (the grid at most what is resident; the H200 probe of the
// first, one-row-a-CTA version: 49-54% of copy at 50257 and 4097 bf16): a CTA holds `rpb` rows
// at a time (a block), each owned by tw = threads / rpb threads (1, 2, 4, 8, 16 lanes of a warp,
// or W = tw / 32 whole warps), or, with a cluster of `csize` CTAs (rpb = 1), one row's share;
// cluster q takes the blocks q, q + nq, ... The row's packs of virtual columns (see "Virtual columns" above: a = (row ld) % VEC, the row in
// [a, cols + a)) are dealt evenly: np = ceil((cols + a) / VEC) packs, q = ceil(np / csize) a CTA,
// CTA `rank` the virtual columns [rank q VEC, rank q VEC + q VEC); thread tr of the row its packs
// j = 0 .. P - 1 at (j tw + tr) VEC of them (a warp's loads consecutive). Whole packs come by
// 16-byte loads (ld.global.nc.L1::no_allocate) and go out by 16-byte streaming stores; the
// partial head and tail packs of packed rows by one 16-byte load as well (their other elements
// belong to the neighbouring rows and are masked), except a tail pack past the end of x; strided
// rows' partial packs element by element (the padding is never read); stores of partial packs
// element by element. The kernel the CuTe DSL's one-pass kinds are (96-100% of copy on aligned
// rows on the H200), for rows that do not start on a 16-byte pack, where those kinds have to
// load element by element. Reductions and special values as pipe: per warp (m_w, s_w) against
// its own max (per group of tw lanes when tw < 32: xor shuffles within the group), merged per
// row through shared memory (W > 1) and across the cluster by st.async
// into every CTA's shared memory (one mbarrier a CTA, csize x 8 transaction bytes); y = e W(m_w,
// M) / S. Clusters: every CTA initializes its mbarrier and arrives (relaxed) on the cluster
// barrier; each iteration it arms the mbarrier's phase, loads and reduces its share, waits on the
// cluster barrier (every CTA has read the previous iteration's pairs) before its st.async, waits
// for the csize pairs on its mbarrier (phase parity = iteration parity), reads them and arrives
// again; a last wait before it leaves. The per-warp pairs alternate between two buffers by
// iteration (one __syncthreads an iteration).
// Its __launch_bounds__: E fp32 values a thread (64 registers hold 32 of them, as pipe), and with
// PF the next block's raw packs as well (128 registers).
template <int E, bool PF>
constexpr int row_max_threads() { return E <= 32 && !PF ? 1024 : 512; }

// 16 bytes of read-only x, not kept in L1.
__device__ __forceinline__ uint4 ld_stream16(const void* p) {
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}

template <class Ti, class To, int E, bool PF>
__global__ void __launch_bounds__(row_max_threads<E, PF>())
    softmax_row_kernel(const Ti* __restrict__ x, To* __restrict__ y, int64_t rows, int64_t cols, int64_t ld, float scale,
                       int csize, int rpb) {
  constexpr int VEC = int(16 / sizeof(Ti));
  constexpr int P = E / VEC;  // 16-byte packs a thread
  static_assert(E % VEC == 0 && P >= 1, "row softmax: whole 16-byte packs per thread");
  __shared__ float2 wred[2][32];                // per warp (m_w, s_w); two iterations apart
  __shared__ float2 part[kMaxCluster];          // per CTA of the cluster (M_k, S_k)
  __shared__ __align__(8) uint64_t xbar;        // the cluster's csize pairs landed
  const int t = int(threadIdx.x), lane = t & 31, warp = t >> 5;
  const int tw = int(blockDim.x) / rpb;      // threads a row: 1 .. 16 (a power of two) or whole warps
  const int W = tw >= 32 ? tw >> 5 : 1;      // warps a row (1: a warp or part of one)
  const int lanes = tw < 32 ? tw : 32;       // lanes of a warp that share the row
  const int g = t / tw, tr = t - g * tw;     // this thread's row in the CTA, its index among the row's threads
  const int rank = csize > 1 ? int(cluster_ctarank()) : 0;
  const int64_t nblocks = (rows + rpb - 1) / rpb, nclusters = gridDim.x / csize;
  if (csize > 1) {
    if (t == 0) {
      mbar_init(&xbar, 1);
      fence_mbar_init();
    }
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  }
  // A block's geometry for this thread's row: its row, offset a, this CTA's slice of it (virtual
  // columns, relative to base) and g0 (x[g0 + u]: virtual column base + u).
  struct Geo {
    int64_t row, g0;
    bool valid;  // the last block's rows may be fewer than rpb
    VirtualSlice vs;
  };
  const bool packed = ld == cols;
  const int64_t total = rows * ld;  // elements of x
  auto geo = [&](int64_t blk) {
    Geo gm;
    gm.row = blk * rpb + g;
    gm.valid = gm.row < rows;
    const int64_t a = gm.valid ? (gm.row * ld) & (VEC - 1) : 0;  // VEC: a power of two
    const int64_t np = (cols + a + VEC - 1) / VEC;
    const int64_t q = csize == 1 ? np : (np + csize - 1) / csize;  // no 64-bit division without a cluster
    const int S = int(q * VEC);  // <= tw * E (cannot_run)
    const int64_t base = int64_t(rank) * S;
    gm.vs = virtual_slice<VEC>(a, cols, base, S);
    gm.g0 = gm.row * ld - a + base;
    return gm;
  };
  // The 16-byte loads of a block: whole packs, and a packed row's partial head and tail packs
  // inside x (the others are read element by element in convert).
  auto fetch = [&](const Geo& gm, uint4* raw) {
#pragma unroll
    for (int j = 0; j < P; ++j) {
      const int u = (j * tw + tr) * VEC;
      const bool whole = u >= gm.vs.plo && u + VEC <= gm.vs.phi;
      const bool edge = u < gm.vs.hi && u + VEC > gm.vs.lo && packed && gm.g0 + u + VEC <= total;
      if (gm.valid && (whole || edge)) raw[j] = ld_stream16(x + gm.g0 + u);
    }
  };
  // v = s x of the block's packs (-Inf outside the row)
  auto convert = [&](const Geo& gm, const uint4* raw, float* v) {
#pragma unroll
    for (int j = 0; j < P; ++j) {
      const int u = (j * tw + tr) * VEC;
      const Pack<Ti, VEC> pk = *reinterpret_cast<const Pack<Ti, VEC>*>(&raw[j]);
      if (gm.valid && u >= gm.vs.plo && u + VEC <= gm.vs.phi) {
#pragma unroll
        for (int i = 0; i < VEC; ++i) v[j * VEC + i] = scale * to_float(pk.v[i]);
      } else if (gm.valid && u < gm.vs.hi && u + VEC > gm.vs.lo) {  // the partial head or tail pack
        if (packed && gm.g0 + u + VEC <= total) {
#pragma unroll
          for (int i = 0; i < VEC; ++i)
            v[j * VEC + i] = u + i >= gm.vs.lo && u + i < gm.vs.hi ? scale * to_float(pk.v[i]) : -INFINITY;
        } else {
#pragma unroll
          for (int i = 0; i < VEC; ++i)
            v[j * VEC + i] = u + i >= gm.vs.lo && u + i < gm.vs.hi ? scale * to_float(x[gm.g0 + u + i]) : -INFINITY;
        }
      } else {
#pragma unroll
        for (int i = 0; i < VEC; ++i) v[j * VEC + i] = -INFINITY;
      }
    }
  };
  int it = 0;  // this CTA's iteration
  int64_t blk = blockIdx.x / csize;
  Geo cur = geo(blk);
  uint4 raw[P];
  if (PF) fetch(cur, raw);
  for (; blk < nblocks; blk += nclusters, ++it) {
    if (csize > 1 && t == 0) mbar_arrive_expect_tx(&xbar, uint32_t(csize) * uint32_t(sizeof(float2)));  // phase it
    if (!PF) fetch(cur, raw);
    float v[E];
    convert(cur, raw, v);
    const Geo nxt = geo(blk + nclusters);
    if (PF) fetch(nxt, raw);  // the next block's loads fly while this one is reduced and stored
    const bool valid = cur.valid;
    const VirtualSlice vs = cur.vs;
    const int64_t g0 = cur.g0;
    cur = nxt;
    // warp (or the row's lanes of it): max, exp against it, sum
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < E; ++i) m = fmaxf(m, v[i]);
    for (int o = lanes >> 1; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float sum = exp_and_sum(v, m == -INFINITY ? 0.0f : m);
    for (int o = lanes >> 1; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    float M = m, Z = sum;
    if (W > 1) {  // the row's warps: every warp merges their pairs
      if (lane == 0) wred[it & 1][warp] = make_float2(m, sum);
      __syncthreads();
      const float2 pw = lane < W ? wred[it & 1][g * W + lane] : make_float2(-INFINITY, 0.0f);
      M = warp_max(pw.x);
      Z = warp_sum(pw.y * weight(pw.x, M));
    }
    if (csize > 1) {  // the cluster: (M_k, S_k) into every CTA's part[rank], wait for all, merge
      // every CTA has its mbarrier initialized and has read its part of the previous iteration
      asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
      if (warp == 0 && lane < csize)
        st_async(mapa(&part[rank], uint32_t(lane)), make_float2(M, Z), mapa(&xbar, uint32_t(lane)));
      mbar_wait(&xbar, uint32_t(it) & 1);
      const float2 pk = lane < csize ? part[lane] : make_float2(-INFINITY, 0.0f);
      M = warp_max(pk.x);
      Z = warp_sum(pk.y * weight(pk.x, M));
      asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");  // part is read: the next pairs may come
    }
    if (!valid) continue;
    const float f = weight(m, M) / Z;
    To* const gy = y + g0;  // gy[u]: virtual column base + u
#pragma unroll
    for (int j = 0; j < P; ++j) {
      const int u = (j * tw + tr) * VEC;
      float o[VEC];
#pragma unroll
      for (int i = 0; i < VEC; ++i) o[i] = v[j * VEC + i] * f;
      if (u >= vs.plo && u + VEC <= vs.phi) {
        store_streaming<To, VEC>(gy + u, o);
      } else if (u < vs.hi && u + VEC > vs.lo) {
#pragma unroll
        for (int i = 0; i < VEC; ++i)
          if (u + i >= vs.lo && u + i < vs.hi) gy[u + i] = from_float<To>(o[i]);
      }
    }
  }
  // The last arrival's wait: no CTA leaves while another may still send it a pair.
  if (csize > 1) asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
}

// ---- tiny: short rows, a CTA's rows staged in shared memory ----------------------------------
//
// Chunk k holds rows [k R, k R + nr) (nr = R but for the last chunk). The grid is persistent (at
// most what is resident): CTA b processes chunks b, b + G, ... and keeps two x buffers, so that
// chunk k + 1 (and k + 2, issued as soon as chunk k's buffer is free) streams in while chunk k is
// reduced. Packed rows (ld == cols) are one flat span of nr * cols elements starting at element
// g0 = k R cols, copied with 16-byte cp.async in virtual columns (u = i + ai, ai = g0 % VI: the
// pack at a multiple of VI is 16-byte aligned in x and in the buffer), the partial head and tail
// packs whole (their other elements, of the neighbouring chunks, are never used) except a tail
// pack past the end of x, which is copied element by element. Strided rows are copied element by
// element (the padding is never read). Then `G` consecutive lanes own a row (lane k its columns
// k, k + G, ..., E of them): max and sum across the group by xor shuffles, y = exp(s x - M) / S
// into a shared y span (virtual columns ao = g0 % VO), stored with 16-byte stores (head and tail
// element-wise). All G lanes of a group are in one warp; the row loop runs while any group of
// the warp has a row, so the shuffles see every lane. Rows of one value are y = 1 + (s x - s x)
// (1, or NaN for NaN and +-Inf: torch's exp(a - a) / exp(a - a)), element-wise. Special values
// otherwise as the warp kernel: a NaN, a +Inf or an all -Inf row makes S NaN (the row is NaN),
// -Inf entries of a finite row give 0.
constexpr int kTinyMaxThreads = 256;  // its launch bound (255 registers a thread; configs use 256 threads)
constexpr int64_t kTinyStageBytes = 24576;  // x + y bytes of a chunk (two x buffers and one y: ~1.5x in shared memory)

// Rows of a tiny chunk for cols columns of si-byte x and so-byte y elements.
__host__ __device__ constexpr int64_t tiny_rows(int64_t cols, int64_t si, int64_t so) {
  return kTinyStageBytes / (cols * (si + so)) > 0 ? kTinyStageBytes / (cols * (si + so)) : 1;
}
// Bytes of one x buffer (a chunk and a pack), and of the whole dynamic shared memory (two x
// buffers, then the y span).
__host__ __device__ constexpr int64_t tiny_x_bytes(int64_t cols, int64_t si, int64_t so) {
  return ((tiny_rows(cols, si, so) * cols + 16 / si) * si + 15) / 16 * 16;
}
__host__ __device__ constexpr int64_t tiny_smem_bytes(int64_t cols, int64_t si, int64_t so) {
  return 2 * tiny_x_bytes(cols, si, so) + ((tiny_rows(cols, si, so) * cols + 16 / so) * so + 15) / 16 * 16;
}

__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_u32(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_1() { asm volatile("cp.async.wait_group 1;" ::: "memory"); }

// Packed rows of one value (x and y 16-byte aligned, n = rows elements): y = 1 + (s x - s x)
// element-wise, straight from registers: no shared memory, kTinyOnesUnroll 16-byte packs of x
// a thread in flight at once, a CTA per T U packs (CTA b takes the packs [b T U, b T U + T U),
// then G T U further where the grid was clamped); the last partial pack element by element.
constexpr int kTinyOnesUnroll = 4;
template <class Ti, class To>
__device__ __forceinline__ void tiny_ones(const Ti* __restrict__ x, To* __restrict__ y, int64_t n, float scale) {
  constexpr int VI = int(16 / sizeof(Ti)), U = kTinyOnesUnroll;
  const int64_t np = n / VI, T = blockDim.x, step = int64_t(gridDim.x) * T * U;
  auto one = [&](float xv) {
    const float a = scale * xv;
    return 1.0f + (a - a);
  };
  for (int64_t p0 = int64_t(blockIdx.x) * T * U + threadIdx.x; p0 < np; p0 += step) {
    uint4 r[U];
#pragma unroll
    for (int k = 0; k < U; ++k)
      if (p0 + k * T < np) r[k] = ld_stream16(x + (p0 + k * T) * VI);
#pragma unroll
    for (int k = 0; k < U; ++k)
      if (p0 + k * T < np) {
        const Pack<Ti, VI> pk = *reinterpret_cast<const Pack<Ti, VI>*>(&r[k]);
        float o[VI];
#pragma unroll
        for (int i = 0; i < VI; ++i) o[i] = one(to_float(pk.v[i]));
        store_streaming<To, VI>(y + (p0 + k * T) * VI, o);
      }
  }
  for (int64_t i = np * VI + int64_t(blockIdx.x) * T + threadIdx.x; i < n; i += int64_t(gridDim.x) * T)
    y[i] = from_float<To>(one(to_float(x[i])));
}

template <class Ti, class To, int E>
__global__ void __launch_bounds__(kTinyMaxThreads)
    softmax_tiny_kernel(const Ti* __restrict__ x, To* __restrict__ y, int64_t rows, int64_t cols, int64_t ld, float scale,
                        int G) {
  constexpr int VI = int(16 / sizeof(Ti)), VO = int(16 / sizeof(To));
  extern __shared__ __align__(16) unsigned char smem_raw[];
  if (cols == 1 && ld == 1) {  // packed rows of one value: no shared memory (tiny_ones)
    tiny_ones(x, y, rows, scale);
    return;
  }
  const int t = int(threadIdx.x), T = int(blockDim.x);
  const int c = int(cols);  // <= 1024 (cannot_run)
  const int64_t R = tiny_rows(cols, sizeof(Ti), sizeof(To));
  const int64_t nchunks = (rows + R - 1) / R, total = rows * ld;  // total: elements of x
  const bool packed = ld == cols;
  const int64_t xbytes = tiny_x_bytes(cols, sizeof(Ti), sizeof(To));
  To* const sy = reinterpret_cast<To*>(smem_raw + 2 * xbytes);

  // Chunk `chunk` into x buffer `bi` (one cp.async group per call, empty past the last chunk).
  auto issue = [&](int64_t chunk, int bi) {
    if (chunk < nchunks) {
      Ti* const sx = reinterpret_cast<Ti*>(smem_raw + bi * xbytes);
      const int64_t r0 = chunk * R;
      const int n = int(rows - r0 < R ? rows - r0 : R) * c;
      if (packed) {
        const int64_t g0 = r0 * ld;
        const int ai = int(g0 % VI), end = n + ai, np = (end + VI - 1) / VI;
        const Ti* const xa = x + (g0 - ai);  // 16-byte aligned: xa[u] is virtual column u
        for (int p = t; p < np; p += T) {
          const int u = p * VI;
          if (g0 - ai + u + VI <= total) {
            cp_async16(sx + u, xa + u);
          } else {  // the last pack of x, partial
#pragma unroll
            for (int i = 0; i < VI; ++i)
              if (u + i >= ai && u + i < end) sx[u + i] = xa[u + i];
          }
        }
      } else {
        for (int i = t; i < n; i += T) {
          const int rr = i / c;
          sx[i] = x[(r0 + rr) * ld + (i - rr * c)];
        }
      }
    }
    cp_async_commit();
  };
  const int64_t G0 = gridDim.x;
  issue(blockIdx.x, 0);
  issue(blockIdx.x + G0, 1);

  const int q = t / G, k = t - q * G, ngroups = T / G;
  const int qw = (t & ~31) / G;  // the first group of this thread's warp
  int bi = 0;
  for (int64_t chunk = blockIdx.x; chunk < nchunks; chunk += G0, bi ^= 1) {
    const int64_t r0 = chunk * R;
    const int nr = int(rows - r0 < R ? rows - r0 : R), n = nr * c;
    const int64_t g0 = r0 * ld;
    const int ai = packed ? int(g0 % VI) : 0, ao = packed ? int(g0 % VO) : 0;
    const Ti* const sx = reinterpret_cast<const Ti*>(smem_raw + bi * xbytes) + ai;  // sx[i]: element i of the chunk
    cp_async_wait_1();  // this thread's copies of this chunk landed (the next chunk's may still fly)
    __syncthreads();    // ... and every thread's; the y span of the previous chunk is stored
    if (c == 1) {
      for (int i = t; i < n; i += T) {
        const float a = scale * to_float(sx[i]);
        sy[ao + i] = from_float<To>(1.0f + (a - a));
      }
    } else {
      for (int lr0 = 0; lr0 + qw < nr; lr0 += ngroups) {
        const int lr = lr0 + q;
        const bool valid = lr < nr;
        const Ti* rx = sx + lr * c;
        float v[E];
#pragma unroll
        for (int j = 0; j < E; ++j) {
          const int cc = k + j * G;
          v[j] = valid && cc < c ? scale * to_float(rx[cc]) : -INFINITY;
        }
        float m = -INFINITY;
#pragma unroll
        for (int j = 0; j < E; ++j) m = fmaxf(m, v[j]);
        for (int o = G >> 1; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        // exp(v - m) as ex2(v log2e - m log2e) (one FFMA; m = -Inf or +Inf give NaN as exp_sub
        // does), unless m log2e overflows (|m| > 2.3e38)
        const float ml = m * kLog2e;
        const bool fast = isfinite(ml) || !isfinite(m);
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < E; ++j)
          if (k + j * G < c) {
            v[j] = fast ? ex2(fmaf(v[j], kLog2e, -ml)) : exp_sub(v[j], m);
            sum += v[j];
          }
        for (int o = G >> 1; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        const float inv = __fdividef(1.0f, sum);  // sum in [1, 1024] (or NaN) for a row of <= 1024 values
        if (valid) {
          To* ry = sy + ao + lr * c;
#pragma unroll
          for (int j = 0; j < E; ++j)
            if (k + j * G < c) ry[k + j * G] = from_float<To>(v[j] * inv);
        }
      }
    }
    __syncthreads();  // the y span is complete; x buffer bi is free
    issue(chunk + 2 * G0, bi);
    if (packed) {
      To* const ya = y + (g0 - ao);  // aligned to VO elements: ya[u] is virtual column u
      const int end = n + ao, np = (end + VO - 1) / VO;
      for (int p = t; p < np; p += T) {
        const int u = p * VO;
        if (u >= ao && u + VO <= end) {
          *reinterpret_cast<Pack<To, VO>*>(ya + u) = *reinterpret_cast<const Pack<To, VO>*>(sy + u);
        } else {
#pragma unroll
          for (int i = 0; i < VO; ++i)
            if (u + i >= ao && u + i < end) ya[u + i] = sy[u + i];
        }
      }
    } else {
      for (int i = t; i < n; i += T) {
        const int rr = i / c;
        y[(r0 + rr) * ld + (i - rr * c)] = sy[i];
      }
    }
  }
}

// ---- span: packed rows as one flat span, chunks of whole rows staged by the copy engine -------
//
// Packed rows (ld == cols) of one dtype T (y's dtype is x's) are one flat array: a chunk of R
// consecutive rows is one contiguous byte span [b0, b1) of x and of y, whatever the row width
// (rows of 4097 bf16 start on every even byte). Persistent CTA b takes the chunks b, b + G, ...
// and keeps S stages of shared memory (an mbarrier each). Thread 0 copies the 16-byte aligned
// span [a0, a1) covering a chunk into its stage with cp.async.bulk (a0 = b0 rounded down to 16,
// a1 = b1 rounded up but at most x's last whole 16 bytes; the few bytes of the neighbouring
// chunks that come along are never used, x's last partial 16 bytes come element by element), so
// that stage byte o holds x's byte a0 + o and 16-byte packs of x are 16-byte packs of the stage.
// Groups of `group` lanes reduce the rows from the stage and write y over x in place; then
// thread 0 stores the chunk's whole 16-byte packs [B0, B1) (b0 rounded up, b1 down) with a bulk
// copy shared -> global, and lanes of warp 1 store the partial edge packs' own elements. Thread 0
// refills a stage once its store has read it (cp.async.bulk.wait_group.read 1: the previous
// chunk's store is done reading, this chunk's may go on): S - 2 chunks stream in while one is
// reduced and one is stored.
//
// A row: E > 0: lane k of a group (1 .. 32 lanes of one warp) holds the columns k, k + group, ...
// (E of them, cols <= group E) in registers: max and sum by xor shuffles, exp once. E = 0 (long
// rows): lane k of a group (2 .. 32 lanes, or whole warps: a multiple of 32 dividing the CTA)
// takes the row's 16-byte packs of the stage k, k + group, ... in three passes (max; sum of exp;
// y), exp twice, the row's partial first and last packs masked (their other elements belong to
// the neighbouring rows, which other groups may be writing: only the row's own elements are
// used and written); a group of warps merges its warps' max and sum through shared memory
// behind a named barrier (id 1 + group). R is a multiple of the groups of a CTA, so that every
// group has a row in every full chunk. Special values as tiny: a NaN, a +Inf or an all -Inf row
// makes the sum NaN (the row NaN), -Inf entries of a finite row give 0.
constexpr int kSpanMaxThreads = 512;  // the launch bound (128 registers a thread: a lane's raw packs)
constexpr int kSpanMaxStages = 6;
constexpr int kSpanStageSlack = 32;  // bytes of a stage past its rows: the partial packs at both ends

__device__ __forceinline__ void fence_proxy_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// bytes (a multiple of 16; both addresses 16-byte aligned) from this CTA's shared src to global
// dst, in the current bulk group.
__device__ __forceinline__ void bulk_store(void* dst, const void* src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(smem_u32(src)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Every bulk group but the newest has read its shared memory.
__device__ __forceinline__ void bulk_wait_read_1() { asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
// The threads of a group of `count` (a multiple of 32) wait for each other (not .aligned: warp 0
// may arrive after its lane 0 issued copies).
__device__ __forceinline__ void named_barrier(int id, int count) {
  asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

// The bytes of chunk k: rows [k R, k R + nr), bytes [b0, b1) of x and y; the bulk-copied bytes
// [a0, a1) of x (a1 >= a0; x's bytes [a1, b1) past its last whole 16 come element by element).
struct SpanChunk {
  int64_t b0, b1, a0, a1;
  int nr;
};
__device__ __forceinline__ SpanChunk span_chunk(int64_t k, int64_t R, int64_t rows, int64_t row_bytes, int64_t xend16) {
  SpanChunk c;
  const int64_t r0 = k * R, r1 = r0 + R < rows ? r0 + R : rows;
  c.nr = int(r1 - r0);
  c.b0 = r0 * row_bytes;
  c.b1 = r1 * row_bytes;
  c.a0 = c.b0 & ~int64_t(15);
  const int64_t up = (c.b1 + 15) & ~int64_t(15);
  c.a1 = up < xend16 ? up : xend16;
  if (c.a1 < c.a0) c.a1 = c.a0;
  return c;
}

// max (SUM false) or sum of v over a group of G lanes: G <= 32 (xor shuffles within the group;
// every lane of the warp calls it), or G a multiple of 32 (then the group's warps merge through
// red[32] behind named barrier 1 + q; red_m and red_s are distinct arrays, so that one barrier
// per reduction suffices: a warp rewrites its slot of red only after the group's next barrier,
// which every thread reaches after it read the slot).
template <bool SUM>
__device__ __forceinline__ float group_reduce(float v, int G, int q, float* red) {
  for (int o = (G < 32 ? G : 32) >> 1; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = SUM ? v + w : fmaxf(v, w);
  }
  if (G <= 32) return v;
  const int W = G >> 5, w0 = q * W;
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  named_barrier(1 + q, G);
  v = red[w0];
  for (int i = 1; i < W; ++i) v = SUM ? v + red[w0 + i] : fmaxf(v, red[w0 + i]);
  return v;
}

// 2^x flushing subnormal results (one MUFU.EX2; ex2.approx.f32 keeps them with three more
// instructions, the same value otherwise). The span kernel's rows of packs exponentiate 2^64 e
// instead of e (the exponents shifted by +64, the sums 2^64 S, y = 2^64 e / 2^64 S: only
// e < 2^-190 flush, whose y are below every output dtype's smallest subnormal anyway; the shift
// costs up to 2^-19 of an exponent's absolute precision, well within the check's bound for rows
// of more than 256 values, but not for short fp32 rows: the H200 run measured 1.3x the bound at
// 2 columns); rows of values (short rows) use ex2_ftz only when no exponent is below -126.
__device__ __forceinline__ float ex2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
constexpr float kSpanExpShift = 64.0f;

// 16 bytes of T as floats and back.
template <class T>
__device__ __forceinline__ void unpack16(const uint4& r, float* v) {
  constexpr int V = int(16 / sizeof(T));
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {  // a bf16 is the high half of its float
    const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[2 * i] = __uint_as_float(w[i] << 16);
      v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  } else {
    const Pack<T, V> p = *reinterpret_cast<const Pack<T, V>*>(&r);
#pragma unroll
    for (int i = 0; i < V; ++i) v[i] = to_float(p.v[i]);
  }
}
template <class T>
__device__ __forceinline__ uint4 pack16(const float* v) {
  constexpr int V = int(16 / sizeof(T));
  Pack<T, V> p;
#pragma unroll
  for (int i = 0; i < V; ++i) p.v[i] = from_float<T>(v[i]);
  return *reinterpret_cast<const uint4*>(&p);
}


// A row of cols <= G E values at rx (bytes of the stage, aligned to T), lane k of its group of
// G <= 32 lanes holding the columns k, k + G, ... in registers; y over x. Every lane of the warp
// calls it (the shuffles), valid or not.
template <class T, int E>
__device__ __forceinline__ void span_row_values(unsigned char* rxb, int n, bool valid, int k, int G, int q, float scale,
                                                float* red_m, float* red_s) {
  T* const rx = reinterpret_cast<T*>(rxb);
  float v[E];
#pragma unroll
  for (int j = 0; j < E; ++j) {
    const int cc = k + j * G;
    v[j] = valid && cc < n ? scale * to_float(rx[cc]) : -INFINITY;
  }
  float m = -INFINITY, amin = INFINITY;  // amin: the smallest of this lane's values
#pragma unroll
  for (int j = 0; j < E; ++j) {
    m = fmaxf(m, v[j]);
    if (k + j * G < n) amin = fminf(amin, v[j]);
  }
  m = group_reduce<false>(m, G, q, red_m);
  const float ml = m * kLog2e;
  float sum = 0.0f;
  // exp(v - m) as ex2(v log2e - m log2e) (one FFMA; m = +-Inf give NaN as exp_sub does); by one
  // MUFU (ex2_ftz) when none of the lane's exponents is below -126 (no subnormal result: the
  // same values as ex2), else ex2 (subnormals kept; also lanes holding a -Inf or NaN)
  if (isfinite(ml) || !isfinite(m)) {
    if (fmaf(amin, kLog2e, -ml) >= -126.0f) {
#pragma unroll
      for (int j = 0; j < E; ++j)
        if (k + j * G < n) sum += (v[j] = ex2_ftz(fmaf(v[j], kLog2e, -ml)));
    } else {
#pragma unroll
      for (int j = 0; j < E; ++j)
        if (k + j * G < n) sum += (v[j] = ex2(fmaf(v[j], kLog2e, -ml)));
    }
  } else {  // |m| > 2.3e38
#pragma unroll
    for (int j = 0; j < E; ++j)
      if (k + j * G < n) sum += (v[j] = exp_sub(v[j], m));
  }
  sum = group_reduce<true>(sum, G, q, red_s);
  const float inv = 1.0f / sum;  // sum in [1, 256], or NaN
  if (valid) {
#pragma unroll
    for (int j = 0; j < E; ++j)
      if (k + j * G < n) rx[k + j * G] = from_float<T>(v[j] * inv);
  }
}

constexpr int kSpanPacks = 8;  // 16-byte packs of a row a lane holds at most (raw, in registers)

// The larger of a and b as two 16-bit or one 32-bit value (raw 32-bit words of T).
template <class T>
__device__ __forceinline__ uint32_t max_word(uint32_t a, uint32_t b) {
  if constexpr (sizeof(T) == 4) {
    return __float_as_uint(fmaxf(__uint_as_float(a), __uint_as_float(b)));
  } else {
    using T2 = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
    const T2 r = __hmax2(*reinterpret_cast<const T2*>(&a), *reinterpret_cast<const T2*>(&b));
    return *reinterpret_cast<const uint32_t*>(&r);
  }
}
template <class T>
__device__ __forceinline__ float word_max_float(uint32_t w) {
  if constexpr (sizeof(T) == 4) {
    return __uint_as_float(w);
  } else {
    const Pack<T, 2> p = *reinterpret_cast<const Pack<T, 2>*>(&w);
    return fmaxf(to_float(p.v[0]), to_float(p.v[1]));
  }
}

// A row at the stage's bytes [o0, o1) (o1 == o0: no row for this
// group, which still takes part in its reductions), reduced by lane k of a group of G lanes (G <= 32
// lanes of one warp, or whole warps) and written over x. Lane k loads the row's 16-byte packs p0 + k +
// j G (j < kSpanPacks) once into registers, raw; the row's partial first and last packs (their
// other elements belong to the neighbouring rows, which other groups may be writing) are taken
// element by element, the whole packs without masks:
//   max  M = |s| max(x ^ sign(s)) (two 16-bit values an instruction; s x is monotone in x), NaN
//        ignored or propagated (either makes the row NaN below)
//   sum  S = sum ex2(x s log2e - M log2e)
//   y    ex2(x s log2e - M log2e) / S: the whole packs by one 16-byte store each.
// |M| log2e past FLT_MAX (|M| > 2.3e38) takes exp_sub((s x), M) instead of the FFMA form.
template <class T>
__device__ __forceinline__ void span_row_packs(unsigned char* stage, int o0, int o1, int k, int G, int q, float scale,
                                               float* red_m, float* red_s) {
  constexpr int V = int(16 / sizeof(T)), SZ = int(sizeof(T));
  const int p0 = o0 >> 4, p1 = o1 > o0 ? (o1 + 15) >> 4 : p0;  // the row's packs
  const bool head = (o0 & 15) != 0, tail = (o1 & 15) != 0 && p1 > p0;
  uint4 raw[kSpanPacks];
  uint32_t whole = 0, partial = 0;  // bit j: pack j of this lane is a whole / partial pack of the row
#pragma unroll
  for (int j = 0; j < kSpanPacks; ++j) {
    const int p = p0 + k + j * G;
    if (p < p1) {
      raw[j] = *reinterpret_cast<const uint4*>(stage + 16 * p);
      const bool part_pack = (p == p0 && head) || (p == p1 - 1 && tail);
      (part_pack ? partial : whole) |= 1u << j;
    }
  }
  auto own = [&](int j, int i) {
    const int b = 16 * (p0 + k + j * G) + i * SZ;
    return b >= o0 && b < o1;
  };
  // max of s x: whole packs as raw words with the sign flipped for s < 0
  const uint32_t flip = scale < 0.0f ? (sizeof(T) == 4 ? 0x80000000u : 0x80008000u) : 0u;
  const uint32_t ninf = sizeof(T) == 4 ? 0xff800000u : std::is_same_v<T, __half> ? 0xfc00fc00u : 0xff80ff80u;
  uint32_t acc = ninf;
#pragma unroll
  for (int j = 0; j < kSpanPacks; ++j)
    if (whole >> j & 1) {
      acc = max_word<T>(acc, raw[j].x ^ flip);
      acc = max_word<T>(acc, raw[j].y ^ flip);
      acc = max_word<T>(acc, raw[j].z ^ flip);
      acc = max_word<T>(acc, raw[j].w ^ flip);
    }
  float m = fabsf(scale) * word_max_float<T>(acc);
  if (partial)
#pragma unroll
    for (int j = 0; j < kSpanPacks; ++j)
      if (partial >> j & 1) {
        float a[V];
        unpack16<T>(raw[j], a);
#pragma unroll
        for (int i = 0; i < V; ++i)
          if (own(j, i)) m = fmaxf(m, scale * a[i]);
      }
  m = group_reduce<false>(m, G, q, red_m);
  const float sl = scale * kLog2e;
  // e = exp(s x - r) of each of this lane's packs j, passed to f(j, e)
  auto exps = [&](float r, auto&& f) {  // 2^64 exp(s x - r) (see ex2_ftz)
    const float rl = r * kLog2e;
    if (isfinite(rl) || !isfinite(r)) {
      const float rls = rl - kSpanExpShift;
#pragma unroll
      for (int j = 0; j < kSpanPacks; ++j)
        if ((whole | partial) >> j & 1) {
          float e[V];
          unpack16<T>(raw[j], e);
#pragma unroll
          for (int i = 0; i < V; ++i) e[i] = ex2_ftz(fmaf(e[i], sl, -rls));
          f(j, e);
        }
    } else {  // unrolled as well: raw[] stays in registers
#pragma unroll
      for (int j = 0; j < kSpanPacks; ++j)
        if ((whole | partial) >> j & 1) {
          float e[V];
          unpack16<T>(raw[j], e);
#pragma unroll
          for (int i = 0; i < V; ++i) e[i] = exp_sub(scale * e[i], r) * 1.8446744073709552e19f;  // 2^64
          f(j, e);
        }
    }
  };
  float sum = 0.0f;
  exps(m, [&](int j, const float* e) {
    if (whole >> j & 1) {
#pragma unroll
      for (int i = 0; i < V; ++i) sum += e[i];
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i)
        if (own(j, i)) sum += e[i];
    }
  });
  sum = group_reduce<true>(sum, G, q, red_s);
  const float inv = 1.0f / sum;
  exps(m, [&](int j, float* e) {
#pragma unroll
    for (int i = 0; i < V; ++i) e[i] *= inv;
    unsigned char* const sp = stage + 16 * (p0 + k + j * G);
    if (whole >> j & 1) {
      *reinterpret_cast<uint4*>(sp) = pack16<T>(e);
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i)
        if (own(j, i)) reinterpret_cast<T*>(sp)[i] = from_float<T>(e[i]);
    }
  });
}

template <class T, int E>
__global__ void __launch_bounds__(kSpanMaxThreads)
    softmax_span_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t cols, float scale, int64_t R,
                        int S, int stage_bytes, int G) {
  constexpr int V = int(16 / sizeof(T)), SZ = int(sizeof(T));
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t full[kSpanMaxStages];
  __shared__ float red_m[32], red_s[32];
  const int t = int(threadIdx.x), T_ = int(blockDim.x);
  const int64_t row_bytes = cols * SZ, xend16 = (rows * row_bytes) & ~int64_t(15);
  const int64_t nchunks = (rows + R - 1) / R, G0 = gridDim.x, first = blockIdx.x;
  if (t == 0) {
    for (int s = 0; s < S; ++s) mbar_init(&full[s], 1);
    fence_mbar_init();
  }
  __syncthreads();
  const uint64_t policy = evict_first_policy();
  // Thread 0: chunk k's bytes [a0, a1) of x into stage st (nothing past the last chunk).
  auto issue = [&](int64_t k, int st) {
    if (k >= nchunks) return;
    const SpanChunk c = span_chunk(k, R, rows, row_bytes, xend16);
    const uint32_t bytes = uint32_t(c.a1 - c.a0);
    mbar_arrive_expect_tx(&full[st], bytes);
    unsigned char* const dst = smem_raw + int64_t(st) * stage_bytes;
    const char* const src = reinterpret_cast<const char*>(x) + c.a0;
    for (uint32_t o = 0; o < bytes; o += kBulkChunk)
      bulk_load(dst + o, src + o, bytes - o < kBulkChunk ? bytes - o : kBulkChunk, &full[st], policy);
  };
  if (t == 0)
    for (int s = 0; s + 1 < S; ++s) issue(first + s * G0, s);

  const int q = t / G, k = t - q * G, ng = T_ / G;
  const int qw = G < 32 ? (t & ~31) / G : q;  // the first group of this thread's warp
  int it = 0;
  for (int64_t ch = first; ch < nchunks; ch += G0, ++it) {
    const int st = it % S;
    unsigned char* const stage = smem_raw + int64_t(st) * stage_bytes;
    const SpanChunk c = span_chunk(ch, R, rows, row_bytes, xend16);
    mbar_wait(&full[st], uint32_t(it / S) & 1u);
    if (c.b1 > c.a1) {  // x's last partial 16 bytes (the last chunk only: uniform)
      const int64_t e0 = (c.b0 > c.a1 ? c.b0 : c.a1) / SZ, e1 = c.b1 / SZ;
      for (int64_t e = e0 + t; e < e1; e += T_) *reinterpret_cast<T*>(stage + (e * SZ - c.a0)) = x[e];
      __syncthreads();
    }
    const int ob = int(c.b0 - c.a0);                           // the chunk's first byte in the stage (0 .. 15)
    const int rb = int(row_bytes);    // a row fits a stage (cannot_run)
    for (int lr0 = 0; lr0 + qw < c.nr; lr0 += ng) {
      const int lr = lr0 + q;
      const bool valid = lr < c.nr;
      if constexpr (E > 0) {
        span_row_values<T, E>(stage + ob + (valid ? lr : 0) * rb, int(cols), valid, k, G, q, scale, red_m, red_s);
      } else {
        const int o0 = ob + lr * rb, o1 = o0 + rb;  // the row's bytes in the stage
        span_row_packs<T>(stage, o0, valid ? o1 : o0, k, G, q, scale, red_m, red_s);
      }
    }
    fence_proxy_async_smem();  // y in the stage, visible to the bulk store
    __syncthreads();
    const int64_t B0 = (c.b0 + 15) & ~int64_t(15), B1 = c.b1 & ~int64_t(15);
    if (t == 0) {
      if (B1 > B0) {
        const uint32_t bytes = uint32_t(B1 - B0);
        const unsigned char* const src = stage + (B0 - c.a0);
        char* const dst = reinterpret_cast<char*>(y) + B0;
        for (uint32_t o = 0; o < bytes; o += kBulkChunk) bulk_store(dst + o, src + o, bytes - o < kBulkChunk ? bytes - o : kBulkChunk);
      }
      bulk_commit();
      bulk_wait_read_1();  // the previous chunk's stage is free
      issue(ch + int64_t(S - 1) * G0, (it + S - 1) % S);
    } else if (t >= 32 && t < 32 + 2 * V) {  // the partial edge packs: head [b0, min(B0, b1)), tail [max(B1, B0), b1)
      const int i = t - 32;
      const int64_t b = i < V ? c.b0 + i * SZ : B1 + (i - V) * SZ;
      const bool own = i < V ? b < (B0 < c.b1 ? B0 : c.b1) : b >= B0 && b < c.b1;
      if (own) y[b / SZ] = *reinterpret_cast<const T*>(stage + (b - c.a0));
    }
    __syncwarp();
  }
  if (t == 0) bulk_wait_all();
}

// ---- flat: packed rows of 2 .. 8 values, a lane whole rows as 16-byte packs ----------------
//
// Packed rows (ld == cols) of C values (a template argument), y of x's dtype: the fewest rows P
// whose bytes end on a 16-byte pack (P C sizeof(T) = 16 NP: 8 rows of 7 bf16 are 7 packs, 4 of
// 7 fp32 are 7) are a lane's; a warp's tile is 32 lanes x NP packs. The warp loads its tile with
// NP coalesced 16-byte loads a lane (lane l, load j: pack 32 j + l, as a copy kernel does),
// transposes it through its shared memory (store pack 32 j + l, read packs NP l .. NP l + NP - 1:
// a quarter warp's 8 lanes NP x 16 bytes apart, distinct banks for odd NP), reduces its P rows
// in registers (the values at compile-time positions of the packs, y written over x there) and
// stores the tile back the same two ways. Non-persistent (a warp a tile): the occupancy and the
// NP loads a lane in flight hide the latency. The last, partial tile: a lane a row, element by
// element. (The span kind's lanes read rows 14 bytes apart element by element from shared memory,
// up to 4 times on one bank: 64-70% of copy for 19173961 x 7 bf16 on the H200; this kind's
// first version, span chunks with the lane's packs read from the stage, 79.5%.)
constexpr int gcd_int(int a, int b) { return b == 0 ? a : gcd_int(b, a % b); }
template <class T, int C>
struct FlatRows {
  static constexpr int RB = C * int(sizeof(T));   // bytes a row
  static constexpr int P = 16 / gcd_int(RB, 16);  // rows a lane
  static constexpr int NP = P * RB / 16;          // 16-byte packs a lane
};
constexpr int kFlatMaxCols = 8;      // rows of 2 .. 8 values (template instances)
constexpr int kFlatMaxThreads = 512;

// One row of C values v = s x in registers -> y in place; the arithmetic and special values of
// span_row_values with one lane a row.
template <int C>
__device__ __forceinline__ void softmax_regs(float* v) {
  float m = -INFINITY, amin = INFINITY;
#pragma unroll
  for (int j = 0; j < C; ++j) {
    m = fmaxf(m, v[j]);
    amin = fminf(amin, v[j]);
  }
  const float ml = m * kLog2e;
  float sum = 0.0f;
  if (isfinite(ml) || !isfinite(m)) {
    if (fmaf(amin, kLog2e, -ml) >= -126.0f) {
#pragma unroll
      for (int j = 0; j < C; ++j) sum += (v[j] = ex2_ftz(fmaf(v[j], kLog2e, -ml)));
    } else {
#pragma unroll
      for (int j = 0; j < C; ++j) sum += (v[j] = ex2(fmaf(v[j], kLog2e, -ml)));
    }
  } else {  // |m| > 2.3e38
#pragma unroll
    for (int j = 0; j < C; ++j) sum += (v[j] = exp_sub(v[j], m));
  }
  const float inv = 1.0f / sum;
#pragma unroll
  for (int j = 0; j < C; ++j) v[j] *= inv;
}

// Element f of 32-bit words w holding T values (f a compile-time index once unrolled).
template <class T>
__device__ __forceinline__ float word_elem(const uint32_t* w, int f) {
  if constexpr (sizeof(T) == 4) {
    return __uint_as_float(w[f]);
  } else {
    const uint32_t h = f & 1 ? w[f >> 1] >> 16 : w[f >> 1] & 0xffffu;
    if constexpr (std::is_same_v<T, __nv_bfloat16>) return __uint_as_float(h << 16);
    else return __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
  }
}
template <class T>
__device__ __forceinline__ void set_word_elem(uint32_t* w, int f, float v) {
  if constexpr (sizeof(T) == 4) {
    w[f] = __float_as_uint(v);
  } else {
    const T t = from_float<T>(v);
    const uint32_t h = *reinterpret_cast<const unsigned short*>(&t);
    w[f >> 1] = f & 1 ? (w[f >> 1] & 0xffffu) | (h << 16) : (w[f >> 1] & 0xffff0000u) | h;
  }
}

template <class T, int C>
__global__ void __launch_bounds__(kFlatMaxThreads)
    softmax_flat_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, float scale) {
  using F = FlatRows<T, C>;
  constexpr int NP = F::NP, P = F::P;
  extern __shared__ __align__(16) uint4 flat_tiles[];
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  uint4* const tile = flat_tiles + warp * (32 * NP);
  const int64_t t = int64_t(blockIdx.x) * (blockDim.x >> 5) + warp;  // this warp's tile
  const int64_t r0 = t * (32 * P);
  if (r0 >= rows) return;
  if (r0 + 32 * P <= rows) {
    const uint4* const gx = reinterpret_cast<const uint4*>(x) + t * (32 * NP);
    uint4* const gy = reinterpret_cast<uint4*>(y) + t * (32 * NP);
    uint32_t w[4 * NP];
#pragma unroll
    for (int j = 0; j < NP; ++j) tile[32 * j + lane] = __ldcs(gx + 32 * j + lane);
    __syncwarp();
#pragma unroll
    for (int j = 0; j < NP; ++j) {
      const uint4 q = tile[NP * lane + j];
      w[4 * j] = q.x, w[4 * j + 1] = q.y, w[4 * j + 2] = q.z, w[4 * j + 3] = q.w;
    }
#pragma unroll
    for (int r = 0; r < P; ++r) {
      float v[C];
#pragma unroll
      for (int c = 0; c < C; ++c) v[c] = scale * word_elem<T>(w, r * C + c);
      softmax_regs<C>(v);
#pragma unroll
      for (int c = 0; c < C; ++c) set_word_elem<T>(w, r * C + c, v[c]);
    }
#pragma unroll
    for (int j = 0; j < NP; ++j) tile[NP * lane + j] = make_uint4(w[4 * j], w[4 * j + 1], w[4 * j + 2], w[4 * j + 3]);
    __syncwarp();
#pragma unroll
    for (int j = 0; j < NP; ++j) __stcs(gy + 32 * j + lane, tile[32 * j + lane]);
  } else {  // the last tile, short: a lane a row
    for (int64_t r = r0 + lane; r < rows; r += 32) {
      float v[C];
#pragma unroll
      for (int c = 0; c < C; ++c) v[c] = scale * to_float(x[r * C + c]);
      softmax_regs<C>(v);
#pragma unroll
      for (int c = 0; c < C; ++c) y[r * C + c] = from_float<T>(v[c]);
    }
  }
}

// ---- wide: few long rows, each cut into slices spread over the whole GPU ----------------------
//
// Slice sl of row r covers the virtual columns [sl S, sl S + S) (S = threads x E; nsl slices a
// row, item i = r nsl + sl). The launch is cooperative and at most as wide as what is resident
// (G CTAs); CTA b processes the items b, b + G, b + 2G, ... (K of them):
//   pass 1 (k = 0 .. K-1)  the item's values: item 0 into registers v (kept), the others into a
//                          scratch array; per warp m_w = max, s_w = sum exp(v - r_w) (r_w = m_w,
//                          0 when -Inf); the CTA's pair (M_k, Z_k) = merge over warps, written to
//                          part[i] and published with red.release.gpu on cnt[r]
//   pass 2 (k = K-1 .. 0)  warp 0 waits (ld.acquire.gpu) until cnt[r] >= nsl, merges the row's
//                          nsl pairs into (M, Z) and counts itself a reader (the last of the nsl
//                          readers puts cnt[r] back to 0 for the next launch); y = exp(s x - M) /
//                          Z: item 0 from v (e * W(m_w, M) / Z), the others re-read from x in
//                          reverse order (the last read are the likeliest still in L2)
// Every CTA publishes all its items before it waits, and all CTAs are resident (cooperative),
// so the waits end. Special values as pipe: a NaN or +Inf makes its Z_k (so Z) NaN, an all -Inf
// row gets M = -Inf and Z = 0 (y = NaN), -Inf entries of a finite row 0; an all -Inf (or empty)
// slice of a finite row weighs 0. Workspace (wide_workspace: per device and stream, grown on
// demand, counters zero between launches): rows counters, then rows x nsl pairs.
constexpr int kWideMaxThreads = 512;

__device__ __forceinline__ void red_release_add(unsigned* p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ float2 ld_relaxed_f2(const float2* p) {
  float2 v;
  asm volatile("ld.relaxed.gpu.global.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "l"(p) : "memory");
  return v;
}

// A row's (M, Z) from its n slice pairs (m_j, z_j) at pr, by one warp (every lane gets it): M =
// max m_j, Z = sum z_j exp(m_j - M) (a -Inf m_j weighs 0; a NaN or +Inf pair makes Z NaN). Each
// lane merges its pairs online, kMergeLoads loads in flight at a time (a load's result used
// right after it would expose the L2 latency of every pair: ~16 us a row of 512 slices), then
// the lanes merge theirs.
constexpr int kMergeLoads = 8;
__device__ __forceinline__ float2 merge_pairs(const float2* pr, int n, int lane) {
  float M = -INFINITY, Z = 0.0f;
  for (int j0 = lane; j0 < n; j0 += 32 * kMergeLoads) {
    float2 q[kMergeLoads];
#pragma unroll
    for (int u = 0; u < kMergeLoads; ++u) {
      const int j = j0 + 32 * u;
      q[u] = j < n ? ld_relaxed_f2(pr + j) : make_float2(-INFINITY, 0.0f);
    }
#pragma unroll
    for (int u = 0; u < kMergeLoads; ++u) {
      const float Mn = fmaxf(M, q[u].x);
      Z = Z * weight(M, Mn) + q[u].y * weight(q[u].x, Mn);
      M = Mn;
    }
  }
  const float Mw = warp_max(M);
  return make_float2(Mw, warp_sum(Z * weight(M, Mw)));
}

// v[0..E) = s x of the thread's packs of a row's slice (gx[u]: the slice's virtual column u;
// -Inf outside the row): whole packs by 16-byte loads, the head and tail element-wise.
template <class Ti, int E>
__device__ __forceinline__ void wide_load(const Ti* gx, const VirtualSlice& vs, int t, int T, float scale, float* v) {
  constexpr int VEC = int(16 / sizeof(Ti));
#pragma unroll
  for (int j = 0; j < E / VEC; ++j) {
    const int u = (j * T + t) * VEC;
    if (u >= vs.plo && u + VEC <= vs.phi) {
      const Pack<Ti, VEC> pk = *reinterpret_cast<const Pack<Ti, VEC>*>(gx + u);
#pragma unroll
      for (int i = 0; i < VEC; ++i) v[j * VEC + i] = scale * to_float(pk.v[i]);
    } else {
#pragma unroll
      for (int i = 0; i < VEC; ++i) v[j * VEC + i] = u + i >= vs.lo && u + i < vs.hi ? scale * to_float(gx[u + i]) : -INFINITY;
    }
  }
}

template <class Ti, class To, int E>
__global__ void __launch_bounds__(kWideMaxThreads)
    softmax_wide_kernel(const Ti* __restrict__ x, To* __restrict__ y, int64_t rows, int64_t cols, int64_t ld, float scale,
                        int nsl, float2* __restrict__ part, unsigned* __restrict__ cnt) {
  constexpr int VEC = int(16 / sizeof(Ti));
  constexpr int P = E / VEC;
  static_assert(E % VEC == 0 && P >= 1, "wide softmax: whole 16-byte packs per thread");
  __shared__ float2 wred[32];  // per warp (m_w, s_w)
  __shared__ float2 stat;      // the row's (M, Z) in pass 2
  const int t = int(threadIdx.x), T = int(blockDim.x), lane = t & 31, warp = t >> 5, nw = T >> 5;
  const int S = T * E;
  const int64_t G = gridDim.x, items = rows * nsl;
  const int64_t K = items > int64_t(blockIdx.x) ? (items - int64_t(blockIdx.x) + G - 1) / G : 0;
  float v[E];     // item 0: exponentials against the warp's max m0
  float m0 = 0.0f;

  // pass 1: item i's CTA pair from the warps' (m, sum), written and published
  auto publish = [&](int64_t i, int64_t row, float m, float sum) {
    if (lane == 0) wred[warp] = make_float2(m, sum);
    __syncthreads();
    if (warp == 0) {
      const float2 q = lane < nw ? wred[lane] : make_float2(-INFINITY, 0.0f);
      const float M = warp_max(q.x);
      const float Z = warp_sum(q.y * weight(q.x, M));
      if (lane == 0) {
        part[i] = make_float2(M, Z);
        red_release_add(cnt + row, 1u);
      }
    }
    __syncthreads();  // wred is rewritten by the next item
  };
  if (K > 0) {  // item 0: its exponentials stay in v
    const int64_t i = blockIdx.x, row = i / nsl, base = (i - row * nsl) * S, a = row * ld % VEC;
    wide_load<Ti, E>(x + (row * ld - a + base), virtual_slice<VEC>(a, cols, base, S), t, T, scale, v);
    float m = -INFINITY;
#pragma unroll
    for (int e = 0; e < E; ++e) m = fmaxf(m, v[e]);
    m0 = m = warp_max(m);
    const float r = m == -INFINITY ? 0.0f : m;
    float sum = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      v[e] = exp_sub(v[e], r);
      sum += v[e];
    }
    publish(i, row, m, warp_sum(sum));
  }
  for (int64_t k = 1; k < K; ++k) {  // the other items: only their pairs
    const int64_t i = int64_t(blockIdx.x) + k * G, row = i / nsl, base = (i - row * nsl) * S, a = row * ld % VEC;
    float w[E];
    wide_load<Ti, E>(x + (row * ld - a + base), virtual_slice<VEC>(a, cols, base, S), t, T, scale, w);
    const float2 ms = warp_pair<E>(w);
    publish(i, row, ms.x, ms.y);
  }

  // pass 2, last item first
  for (int64_t k = K - 1; k >= 0; --k) {
    const int64_t i = int64_t(blockIdx.x) + k * G, row = i / nsl, base = (i - row * nsl) * S, a = row * ld % VEC;
    const VirtualSlice vs = virtual_slice<VEC>(a, cols, base, S);
    if (warp == 0) {
      const unsigned* c = cnt + row;
      if (ld_acquire(c) < unsigned(nsl)) {
        const uint64_t t0 = global_ns();
        while (ld_acquire(c) < unsigned(nsl))
          if (global_ns() - t0 > kPipeWaitTimeoutNs) __trap();
      }
      const float2 mz = merge_pairs(part + row * nsl, nsl, lane);
      const float M = mz.x, Z = mz.y;
      if (lane == 0) {
        stat = make_float2(M, Z);
        // nsl publishers and nsl readers: the last reader puts the counter back to 0.
        if (atomicAdd(cnt + row, 1u) == unsigned(2 * nsl - 1)) atomicExch(cnt + row, 0u);
      }
    }
    __syncthreads();
    const float M = stat.x, Z = stat.y;
    __syncthreads();  // stat is rewritten by the next item
    float o[E];
    if (k == 0) {
      const float f = weight(m0, M) / Z;
#pragma unroll
      for (int e = 0; e < E; ++e) o[e] = v[e] * f;
    } else {
      wide_load<Ti, E>(x + (row * ld - a + base), vs, t, T, scale, o);
      const float inv = 1.0f / Z;
#pragma unroll
      for (int e = 0; e < E; ++e) o[e] = exp_sub(o[e], M) * inv;
    }
    To* gy = y + (row * ld - a + base);  // gy[u]: the slice's virtual column u
#pragma unroll
    for (int j = 0; j < P; ++j) {
      const int u = (j * T + t) * VEC;
      if (u >= vs.plo && u + VEC <= vs.phi) {
        store_streaming<To, VEC>(gy + u, o + j * VEC);
      } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e)
          if (u + e >= vs.lo && u + e < vs.hi) gy[u + e] = from_float<To>(o[j * VEC + e]);
      }
    }
  }
}

// ---- wide ring: few long rows, slices prefetched by the copy engine --------------------------
//
// The wide kind's items and workspace (part, cnt; S = T x E values an item) for rows of whole
// 16-byte packs (ld and cols multiples of vec), by T compute threads and two more warps. CTA b
// takes the items b + k G (step k) in order. A row's items lie within L + 1 consecutive steps
// (L = ceil(nsl / G)); each item's y is written D = L + 1 steps after its reduction, when its row
// is complete. N slots of shared memory: with N >= D + 1 they hold each item until it is
// written (`hold`: x read once, N - D slots of prefetch), else each slot is refilled as soon as
// its item is reduced and the write rereads x, read D steps before: from L2 (the copy engine
// loads x with an evict-last hint, the reread evicts first).
//   loader warp (lane 0): fills slot k % N with item k + N once slot k is released (pubd): by
//     the control warp's publication of step k, or (hold) by the compute warps' write of item k.
//   compute warps, step k: (not hold) load item j = k - D's packs from x into registers (issued
//     first, converted and used last); wait for slot k, reduce it, put the warp's (m, sum) in wred[k % N],
//     arrive on empty[k % N]; then write item j with its row's (M, Z) (rowstat, once
//     statbar[row]), from its slot when holding (and release the slot).
//   control warp, step k: wait on empty[k % N], merge the warps' pairs, publish (part, a release
//     increment of cnt[row]); then provide the row of item k + 1 - D: wait until its counter
//     reaches nsl, merge its nsl pairs into rowstat, arrive on statbar.
// Each wait at step k needs only publications of steps < k (D >= L + 1), each made before its
// CTA's own waits of that step: the waits end for any grid (every CTA resident, cooperative).
// H200 (2026-12-03, interleaved, 8 x 2^22): fp32 102.6 us rereading (2 slots of 64 KiB; holding
// with 2 slots of prefetch 113.8 us), bf16 65.8 us holding (7 slots of 32 KiB, 4 of prefetch),
// where the ring before (one role per thread, every step waiting on the row merge) took 130.0
// and 77.2 us. Since the reread's conversion waits for the write (2026-12-04): bf16 60.4-60.8 us
// rereading (2 slots), fp32 unchanged.
constexpr int kRingMaxStages = 16;
constexpr int kRingMaxRows = 64;  // rowstat and statbar hold a CTA's rows (the wide kind's at most 64)
constexpr int kRingExtraThreads = 64;  // the control and loader warps

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}
// L2 policy for x in the ring: kept (evict last) until its reread.
__device__ __forceinline__ uint64_t evict_last_policy() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  return p;
}

template <class Ti, class To, int E>
__global__ void __launch_bounds__(kWideMaxThreads + kRingExtraThreads)
    softmax_ring_kernel(const Ti* __restrict__ x, To* __restrict__ y, int64_t rows, int64_t cols, int64_t ld, float scale,
                        int nsl, float2* __restrict__ part, unsigned* __restrict__ cnt, int N) {
  constexpr int VEC = int(16 / sizeof(Ti));
  constexpr int P = E / VEC;
  static_assert(E % VEC == 0 && P >= 1, "wide ring softmax: whole 16-byte packs per thread");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  // slot s: full (its item landed), empty (the compute warps reduced it and wrote their pairs),
  // pubd (released: its item published, or written when holding); row r: statbar (rowstat[r] set)
  __shared__ __align__(8) uint64_t full[kRingMaxStages], empty[kRingMaxStages], pubd[kRingMaxStages], statbar[kRingMaxRows];
  __shared__ float2 rowstat[kRingMaxRows];  // a row's (M, Z)
  const int T = int(blockDim.x) - kRingExtraThreads, t = int(threadIdx.x), lane = t & 31, warp = t >> 5, nw = T >> 5;
  const int S = T * E, slot_bytes = S * int(sizeof(Ti));
  const int64_t G = gridDim.x, b = blockIdx.x, items = rows * nsl;
  const int64_t K = items > b ? (items - b + G - 1) / G : 0;
  const int64_t D = (nsl + G - 1) / G + 1;  // L + 1
  const bool hold = N >= D + 1;  // the slots hold each item until it is written
  float2* const wred = reinterpret_cast<float2*>(smem_raw + int64_t(N) * slot_bytes);  // [N][16]: step k's warp pairs
  if (t == 0) {
    for (int st = 0; st < N; ++st) {
      mbar_init(&full[st], 1);
      mbar_init(&empty[st], uint32_t(nw));
      mbar_init(&pubd[st], hold ? uint32_t(nw) : 1u);
    }
    for (int r = 0; r < rows; ++r) mbar_init(&statbar[r], 1);
    fence_mbar_init();
  }
  __syncthreads();  // the last block-wide barrier: the roles part here
  struct Item {
    int64_t i, row, base;
    int n;  // valid columns (a multiple of VEC)
  };
  auto item = [&](int64_t k) {
    Item it;
    it.i = b + k * G;
    it.row = it.i / nsl;
    it.base = (it.i - it.row * nsl) * S;
    it.n = int(cols - it.base < S ? cols - it.base : int64_t(S));
    return it;
  };

  if (warp == nw + 1) {  // the loader warp
    if (lane == 0) {
      const uint64_t policy = evict_last_policy();
      auto issue = [&](int64_t k) {
        const Item it = item(k);
        const int st = int(k % N);
        const uint32_t bytes = uint32_t(it.n) * uint32_t(sizeof(Ti));
        mbar_arrive_expect_tx(&full[st], bytes);
        unsigned char* const dst = smem_raw + int64_t(st) * slot_bytes;
        const char* const src = reinterpret_cast<const char*>(x + it.row * ld + it.base);
        for (uint32_t o = 0; o < bytes; o += kBulkChunk)
          bulk_load(dst + o, src + o, bytes - o < kBulkChunk ? bytes - o : kBulkChunk, &full[st], policy);
      };
      for (int64_t k = 0; k < N && k < K; ++k) issue(k);
      for (int64_t k = 0; k + N < K; ++k) {
        mbar_wait(&pubd[k % N], uint32_t(k / N) & 1u);
        issue(k + N);
      }
    }
    return;
  }

  if (warp == nw) {  // the control warp
    int64_t next = 0, last_row = -1;
    auto provide = [&](int64_t upto) {  // the rows of this CTA's items next .. upto
      for (; next <= upto && next < K; ++next) {
        const int64_t r = item(next).row;
        if (r == last_row) continue;
        last_row = r;
        unsigned mine = 0;  // this CTA's items of row r
        for (int64_t q = next; q < K && item(q).row == r; ++q) ++mine;
        const unsigned* cr = cnt + r;
        if (ld_acquire(cr) < unsigned(nsl)) {
          const uint64_t t0 = global_ns();
          while (ld_acquire(cr) < unsigned(nsl))
            if (global_ns() - t0 > kPipeWaitTimeoutNs) __trap();
        }
        const float2 mz = merge_pairs(part + r * nsl, nsl, lane);
        if (lane == 0) {
          rowstat[r] = mz;
          mbar_arrive(&statbar[r]);
          // nsl publications, then one count a reader's item: the last reader puts the counter back to 0
          if (atomicAdd(cnt + r, mine) == unsigned(2 * nsl) - mine) atomicExch(cnt + r, 0u);
        }
        __syncwarp();
      }
    };
    for (int64_t k = 0; k < K; ++k) {
      const Item it = item(k);
      mbar_wait(&empty[k % N], uint32_t(k / N) & 1u);
      const float2 q = lane < nw ? wred[(k % N) * 16 + lane] : make_float2(-INFINITY, 0.0f);
      const float M = warp_max(q.x);
      const float Z = warp_sum(q.y * weight(q.x, M));
      if (lane == 0) {
        part[it.i] = make_float2(M, Z);
        red_release_add(cnt + it.row, 1u);
        if (!hold) mbar_arrive(&pubd[k % N]);  // wred's entry is read: the slot may be refilled
      }
      __syncwarp();
      provide(k + 1 - D);  // what the compute warps' write of step k + 1 needs
    }
    provide(K - 1);
    return;
  }

  // the compute warps; v: s x of the thread's packs (u = (q T + t) VEC) of an item, -Inf past the row
  auto values = [&](const Item& it, const Ti* src, float* v) {
#pragma unroll
    for (int q = 0; q < P; ++q) {
      const int u = (q * T + t) * VEC;
      if (u < it.n) {
        const Pack<Ti, VEC> pk = *reinterpret_cast<const Pack<Ti, VEC>*>(src + u);
#pragma unroll
        for (int e = 0; e < VEC; ++e) v[q * VEC + e] = scale * to_float(pk.v[e]);
      } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e) v[q * VEC + e] = -INFINITY;
      }
    }
  };
  for (int64_t k = 0; k < K + D; ++k) {
    const int64_t j = k - D;
    // The reread of item j's x (not hold): its raw packs, loaded first and converted only at the
    // write, so the loads stay in flight through the reduction. Converted at once, each warp
    // waited on L2 there (ncu, fp32 e32: 32% of the kernel's stall samples); deferred, bf16
    // 8 x 2^22 took 60.6 us against 69.3 (e32, 2 slots; H200, s16), fp32 unchanged (its
    // conversion stays early: pinning it late with an asm dependency changed nothing either).
    uint4 raw[P];
    Item jt{};
    if (j >= 0 && !hold) {
      jt = item(j);
      const Ti* const src = x + jt.row * ld + jt.base;
#pragma unroll
      for (int q = 0; q < P; ++q) {
        const int u = (q * T + t) * VEC;
        raw[q] = u < jt.n ? __ldcs(reinterpret_cast<const uint4*>(src + u)) : make_uint4(0, 0, 0, 0);  // the last use of x: evict first
      }
    }
    if (k < K) {
      float v[E];
      mbar_wait(&full[k % N], uint32_t(k / N) & 1u);
      values(item(k), reinterpret_cast<const Ti*>(smem_raw + int64_t(k % N) * slot_bytes), v);
      const float2 ms = warp_pair<E>(v);
      __syncwarp();  // every lane read the slot
      if (lane == 0) {
        wred[(k % N) * 16 + warp] = ms;
        mbar_arrive(&empty[k % N]);
      }
    }
    if (j >= 0) {
      if (hold) jt = item(j);
      mbar_wait(&statbar[jt.row], 0u);
      float w[E];
      if (hold) {
        values(jt, reinterpret_cast<const Ti*>(smem_raw + int64_t(j % N) * slot_bytes), w);
      } else {
#pragma unroll
        for (int q = 0; q < P; ++q) {
          const Pack<Ti, VEC> pk = *reinterpret_cast<const Pack<Ti, VEC>*>(&raw[q]);
#pragma unroll
          for (int e = 0; e < VEC; ++e) w[q * VEC + e] = scale * to_float(pk.v[e]);
        }
      }
      const float2 mz = rowstat[jt.row];
      const float M = mz.x, inv = 1.0f / mz.y;
      To* const gy = y + jt.row * ld + jt.base;
#pragma unroll
      for (int q = 0; q < P; ++q) {
        const int u = (q * T + t) * VEC;
        if (u < jt.n) {
          float o[VEC];
#pragma unroll
          for (int e = 0; e < VEC; ++e) o[e] = exp_sub(w[q * VEC + e], M) * inv;
          store_streaming<To, VEC>(gy + u, o);
        }
      }
      if (hold) {
        __syncwarp();  // every lane read slot j
        if (lane == 0) mbar_arrive(&pubd[j % N]);
      }
    }
  }
}

// ---- band: few long rows, the whole GPU on one row at a time --------------------------------
//
// Rows of whole 16-byte packs (R = cols / VEC packs a row). Each row is cut into G chunks (G =
// the grid, every CTA resident: a cooperative launch) of Cp = ceil(R / G) packs: CTA b owns the
// packs [b Cp, min(b Cp + Cp, R)) of every row, as np = ceil(Cp / Pq) pieces of Pq = T PK packs
// (T compute threads, PK packs a thread, thread t the packs q T + t). Piece k of the CTA's
// stream (row k / np, piece k % np) comes into shared-memory slot k % N (copy engine) and stays
// on chip until its row is written, so x is read once; all CTAs work on the same rows at once.
//   loader warp (lane 0): fills slot k % N with piece k once piece k - N left it (empty)
//   compute warps, with row 0 reduced and published first, for each row r:
//     reduce r + 1   a thread's running (m, s) over its packs of the row's pieces; the warp's
//                    pair into wred[(r + 1) % 4], an arrival on pubbar
//     write r        wait for row r's (M, Z) (statbar), y = exp(s x - M) / Z, streaming stores:
//                    the row's first H pieces from registers, the others from their slots
//                    (each released once written)
//     hold r + 1     its first H pieces into registers (raw packs), their slots released
//   sync warp: publishes row r (merges the warps' pairs; part[r G + b], a release increment of
//     cnt[r]), then completes row r - 1 (waits until cnt[r - 1] reaches G, merges its G pairs with
//     merge_pairs into rowstat, arrives on statbar)
// So a row's grid-wide merge runs while the next row is reduced, off the compute warps' path.
// The slots hold what is not in registers of rows r and r + 1 at once: 2 np - min(H, np) <= N
// (band_fit, checked at launch). Deadlock-free: a CTA's waits need only its own loads and every CTA's publication of
// rows it reduces before it waits, and every CTA is resident. Special values as wide (the pairs
// merged with W(m, M)). Workspace: wide_workspace with G pairs a row.
// H200 (2026-12-04, 8 x 2^22, interleaved; bench/results/2026-12-04-h200-s18-softmax-band-*):
// fp32 96.1 us against the ring's 101.8 (the suite: 101.1 us, 62.8% of copy); waiting for each
// row before reducing the next one took 116-136 us in the design probe, and the same data flow
// without any grid-wide merge (a diagnostic, wrong y) 83.5-85.3 us: each row still waits for the
// slowest of the CTAs, and fp32 leaves room for one row of look-ahead only.
constexpr int kBandStats = 4;          // rows of pairs and stats in flight (r and r + 1 need 2)
constexpr int kBandMaxSlots = 64;
constexpr int kBandMaxThreads = 448;   // compute threads: with the two warps, 16 warps (128 registers a thread)
constexpr int kBandExtraThreads = 64;  // the loader and sync warps
constexpr int kBandPacks = 4;          // PK: 16-byte packs a compute thread a piece
constexpr int kBandHeld = 4;           // H: pieces a row a compute thread keeps in registers

template <class Ti, class To>
__global__ void __launch_bounds__(kBandMaxThreads + kBandExtraThreads, 1)
    softmax_band_kernel(const Ti* __restrict__ x, To* __restrict__ y, int64_t rows, int64_t cols, int64_t ld, float scale,
                        float2* __restrict__ part, unsigned* __restrict__ cnt, int N) {
  constexpr int VEC = int(16 / sizeof(Ti)), PK = kBandPacks, H = kBandHeld;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  // slot: full (its piece landed), empty (every compute warp is done with it); row % kBandStats:
  // pubbar (every compute warp put its pair in wred), statbar (rowstat set)
  __shared__ __align__(8) uint64_t full[kBandMaxSlots], empty[kBandMaxSlots], pubbar[kBandStats], statbar[kBandStats];
  __shared__ float2 wred[kBandStats][kBandMaxThreads / 32];
  __shared__ float2 rowstat[kBandStats];
  const int T = int(blockDim.x) - kBandExtraThreads, t = int(threadIdx.x), lane = t & 31, warp = t >> 5, nw = T >> 5;
  const int Pq = T * PK;
  const int64_t G = gridDim.x, b = blockIdx.x, R = cols / VEC, Cp = (R + G - 1) / G;
  const int np = int((Cp + Pq - 1) / Pq);
  const int64_t c0 = b * Cp, c1 = c0 + Cp < R ? c0 + Cp : R;  // this CTA's packs of a row (none when c1 <= c0)
  const int64_t K = rows * np;
  if (t == 0) {
    for (int st = 0; st < N; ++st) {
      mbar_init(&full[st], 1);
      mbar_init(&empty[st], uint32_t(nw));
    }
    for (int w = 0; w < kBandStats; ++w) {
      mbar_init(&pubbar[w], uint32_t(nw));
      mbar_init(&statbar[w], 1);
    }
    fence_mbar_init();
  }
  __syncthreads();  // the last block-wide barrier: the roles part here
  auto piece_packs = [&](int p) -> int {  // valid packs of piece p of the chunk
    const int64_t n = c1 - (c0 + int64_t(p) * Pq);
    return n <= 0 ? 0 : n < Pq ? int(n) : Pq;
  };
  auto phase = [](int64_t i, int n) { return uint32_t(i / n) & 1u; };

  if (warp == nw) {  // the loader warp
    if (lane == 0) {
      const uint64_t policy = evict_first_policy();
      for (int64_t k = 0; k < K; ++k) {
        const int st = int(k % N);
        if (k >= N) mbar_wait(&empty[st], phase(k - N, N));
        const int64_t r = k / np;
        const int p = int(k - r * np);
        const uint32_t bytes = uint32_t(piece_packs(p)) * 16u;
        mbar_arrive_expect_tx(&full[st], bytes);  // 0 bytes (a chunk's missing pieces): the arrival completes it
        unsigned char* const dst = smem_raw + int64_t(st) * Pq * 16;
        const char* const src = reinterpret_cast<const char*>(x + r * ld) + (c0 + int64_t(p) * Pq) * 16;
        for (uint32_t o = 0; o < bytes; o += kBulkChunk)
          bulk_load(dst + o, src + o, bytes - o < kBulkChunk ? bytes - o : kBulkChunk, &full[st], policy);
      }
    }
    return;
  }

  if (warp == nw + 1) {  // the sync warp
    auto complete = [&](int64_t r) {
      if (ld_acquire(cnt + r) < unsigned(G)) {
        const uint64_t t0 = global_ns();
        while (ld_acquire(cnt + r) < unsigned(G))
          if (global_ns() - t0 > kPipeWaitTimeoutNs) __trap();
      }
      const float2 mz = merge_pairs(part + r * G, int(G), lane);
      if (lane == 0) {
        rowstat[r % kBandStats] = mz;
        mbar_arrive(&statbar[r % kBandStats]);
        // G publications, then one count a reader: the last reader puts the counter back to 0
        if (atomicAdd(cnt + r, 1u) == unsigned(2 * G) - 1u) atomicExch(cnt + r, 0u);
      }
      __syncwarp();
    };
    for (int64_t r = 0; r < rows; ++r) {
      const int w = int(r % kBandStats);
      mbar_wait(&pubbar[w], phase(r, kBandStats));
      const float2 q = lane < nw ? wred[w][lane] : make_float2(-INFINITY, 0.0f);
      const float M = warp_max(q.x);
      const float Z = warp_sum(q.y * weight(q.x, M));
      if (lane == 0) {
        part[r * G + b] = make_float2(M, Z);
        red_release_add(cnt + r, 1u);
      }
      __syncwarp();
      if (r > 0) complete(r - 1);
    }
    if (rows > 0) complete(rows - 1);
    return;
  }

  // the compute warps
  auto slot = [&](int64_t k) { return reinterpret_cast<const uint4*>(smem_raw + int64_t(k % N) * Pq * 16); };
  auto release = [&](int64_t k) {
    __syncwarp();  // every lane read the slot
    if (lane == 0) mbar_arrive(&empty[k % N]);
  };
  auto reduce_publish = [&](int64_t r) {
    float m = -INFINITY, s = 0.0f;
    for (int p = 0; p < np; ++p) {
      const int64_t k = r * np + p;
      const int n = piece_packs(p);
      mbar_wait(&full[k % N], phase(k, N));
      const uint4* const sp = slot(k);
      float v[PK * VEC];
#pragma unroll
      for (int q = 0; q < PK; ++q) {
        const int i = q * T + t;
        if (i < n) {
          const uint4 raw = sp[i];
          const Pack<Ti, VEC> pk = *reinterpret_cast<const Pack<Ti, VEC>*>(&raw);
#pragma unroll
          for (int e = 0; e < VEC; ++e) v[q * VEC + e] = scale * to_float(pk.v[e]);
        } else {
#pragma unroll
          for (int e = 0; e < VEC; ++e) v[q * VEC + e] = -INFINITY;
        }
      }
      // (m, s) with this piece: exponentials against the new max (0 while every value is -Inf)
      float pm = -INFINITY;
#pragma unroll
      for (int e = 0; e < PK * VEC; ++e) pm = fmaxf(pm, v[e]);
      const float mn = fmaxf(m, pm), ref = mn == -INFINITY ? 0.0f : mn;
      float add = 0.0f;
#pragma unroll
      for (int e = 0; e < PK * VEC; ++e) add += exp_sub(v[e], ref);
      s = s * weight(m, mn) + add;
      m = mn;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
      const float mm = fmaxf(m, m2);
      s = s * weight(m, mm) + s2 * weight(m2, mm);
      m = mm;
    }
    if (lane == 0) {
      wred[r % kBandStats][warp] = make_float2(m, s);
      mbar_arrive(&pubbar[r % kBandStats]);
    }
  };
  uint4 held[H * PK];  // row r's first H pieces, raw
  auto hold = [&](int64_t r) {
#pragma unroll
    for (int h = 0; h < H; ++h)
      if (h < np) {
        const int64_t k = r * np + h;
        const int n = piece_packs(h);
        const uint4* const sp = slot(k);
#pragma unroll
        for (int q = 0; q < PK; ++q) held[h * PK + q] = q * T + t < n ? sp[q * T + t] : make_uint4(0, 0, 0, 0);
        release(k);
      }
  };
  auto write_pack = [&](To* gy, const uint4& raw, float M, float inv) {
    const Pack<Ti, VEC> pk = *reinterpret_cast<const Pack<Ti, VEC>*>(&raw);
    float o[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) o[e] = exp_sub(scale * to_float(pk.v[e]), M) * inv;
    store_streaming<To, VEC>(gy, o);
  };
  if (rows > 0) {
    reduce_publish(0);
    hold(0);
  }
  for (int64_t r = 0; r < rows; ++r) {
    if (r + 1 < rows) reduce_publish(r + 1);
    mbar_wait(&statbar[r % kBandStats], phase(r, kBandStats));
    const float2 mz = rowstat[r % kBandStats];
    const float M = mz.x, inv = 1.0f / mz.y;
    To* const gy = y + r * ld + c0 * VEC;
#pragma unroll
    for (int h = 0; h < H; ++h)
      if (h < np) {
        const int n = piece_packs(h);
#pragma unroll
        for (int q = 0; q < PK; ++q)
          if (q * T + t < n) write_pack(gy + (int64_t(h) * Pq + q * T + t) * VEC, held[h * PK + q], M, inv);
      }
    for (int p = H; p < np; ++p) {
      const int64_t k = r * np + p;
      const int n = piece_packs(p);
      const uint4* const sp = slot(k);
#pragma unroll
      for (int q = 0; q < PK; ++q)
        if (q * T + t < n) write_pack(gy + (int64_t(p) * Pq + q * T + t) * VEC, sp[q * T + t], M, inv);
      release(k);
    }
    if (r + 1 < rows) hold(r + 1);
  }
}

// ---- dispatch --------------------------------------------------------------------------------

template <class Ti>
constexpr int vec16() { return int(16 / sizeof(Ti)); }

int vec16_of(DType t) { return int(16 / size_of(t)); }

// One launch: the kernel instance the dispatch picked and its launch (native_softmax_launch).
struct Plan {
  const void* func = nullptr;
  NativeSoftmaxLaunch launch;
};

// When set (native_softmax_device_check), the launchers store their plan here instead of
// launching: one dispatch path picks the kernel instance for both.
thread_local Plan* t_probe = nullptr;

// "what: cudaErrorX (text)", the runtime's last error cleared (a failed cudaFuncSetAttribute or
// launch also sets it; left there, an unrelated later cudaGetLastError would report it).
std::string cuda_failure(cudaError_t e, const std::string& what) {
  (void)cudaGetLastError();
  return what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

// Sets the function attributes a launch needs, once per (device, kernel): the smem kind's
// dynamic shared memory above 48 KiB (the device's opt-in limit less the kernel's static shared
// memory, at most kNativeSmemDynamicOptIn: asking for more than opt-in - static is
// cudaErrorInvalidValue), and cluster sizes above the portable 8 (before both the launch and
// the occupancy query). Returns "" or why not. Thread-safe (prepare() may run on many threads).
std::string set_attributes(const Plan& pl) {
  const bool smem = pl.launch.dynamic_smem > 0, nonportable = pl.launch.cluster > 8;
  if (!smem && !nonportable) return {};
  int dev = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return cuda_failure(e, "cudaGetDevice");
  static std::mutex mu;
  static std::map<std::tuple<int, const void*, int>, std::string> done;
  const auto key = std::make_tuple(dev, pl.func, int(smem) | int(nonportable) << 1);
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = done.find(key); it != done.end()) return it->second;
  std::string why;
  if (smem) {
    cudaFuncAttributes fa{};
    int optin = 0;
    if (cudaError_t e = cudaFuncGetAttributes(&fa, pl.func); e != cudaSuccess)
      why = cuda_failure(e, "cudaFuncGetAttributes");
    else if (e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev); e != cudaSuccess)
      why = cuda_failure(e, "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)");
    else {
      const int64_t bytes = std::min<int64_t>(kNativeSmemDynamicOptIn, int64_t(optin) - int64_t(fa.sharedSizeBytes));
      if (e = cudaFuncSetAttribute(pl.func, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)); e != cudaSuccess)
        why = cuda_failure(e, "cudaFuncSetAttribute(MaxDynamicSharedMemorySize, " + std::to_string(bytes) + ")");
    }
  }
  if (why.empty() && nonportable)
    if (cudaError_t e = cudaFuncSetAttribute(pl.func, cudaFuncAttributeNonPortableClusterSizeAllowed, 1); e != cudaSuccess)
      why = cuda_failure(e, "cudaFuncSetAttribute(NonPortableClusterSizeAllowed, 1)");
  done.emplace(key, why);
  return why;
}

// The launch configuration of a plan (its attributes in `attr[2]`, which must outlive it).
cudaLaunchConfig_t launch_config(const Plan& pl, cudaLaunchAttribute* attr, cudaStream_t s) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(unsigned(pl.launch.grid));
  cfg.blockDim = dim3(unsigned(pl.launch.threads));
  cfg.dynamicSmemBytes = size_t(pl.launch.dynamic_smem);
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = 0;
  if (pl.launch.cluster > 1) {
    attr[cfg.numAttrs].id = cudaLaunchAttributeClusterDimension;
    attr[cfg.numAttrs].val.clusterDim.x = unsigned(pl.launch.cluster);
    attr[cfg.numAttrs].val.clusterDim.y = 1;
    attr[cfg.numAttrs].val.clusterDim.z = 1;
    ++cfg.numAttrs;
  }
  if (pl.launch.cooperative) {
    attr[cfg.numAttrs].id = cudaLaunchAttributeCooperative;
    attr[cfg.numAttrs].val.cooperative = 1;
    ++cfg.numAttrs;
  }
  return cfg;
}

// Residency of a plan on the current device: clusters of the whole device (cluster > 1) or
// blocks per SM (cluster == 1), each > 0, and the SM count. The function attributes must be set
// (set_attributes). Returns "" or why not (a CUDA error, cleared, or "cannot be resident ...").
std::string residency(const Plan& pl, int* clusters, int* blocks_per_sm, int* sms) {
  *clusters = 0, *blocks_per_sm = 0, *sms = 0;
  int dev = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return cuda_failure(e, "cudaGetDevice");
  if (cudaError_t e = cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev); e != cudaSuccess)
    return cuda_failure(e, "cudaDeviceGetAttribute(MultiProcessorCount)");
  const NativeSoftmaxLaunch& l = pl.launch;
  if (l.cluster > 1) {
    cudaLaunchAttribute attr[2];
    const cudaLaunchConfig_t cfg = launch_config(pl, attr, nullptr);
    if (cudaError_t e = cudaOccupancyMaxActiveClusters(clusters, pl.func, &cfg); e != cudaSuccess)
      return cuda_failure(e, "cudaOccupancyMaxActiveClusters (" + l.str() + ")");
    if (*clusters < 1) return "cannot be resident on this device (" + l.str() + ")";
  } else {
    if (cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, pl.func, l.threads, size_t(l.dynamic_smem));
        e != cudaSuccess)
      return cuda_failure(e, "cudaOccupancyMaxActiveBlocksPerMultiprocessor (" + l.str() + ")");
    if (*blocks_per_sm < 1) return "cannot be resident on this device (" + l.str() + ")";
  }
  return {};
}

std::atomic<int64_t> g_persistent_cap{0};  // set_native_softmax_persistent_cap

// A persistent plan's grid: at most what is resident at once (once per device, kernel and launch
// shape; thread-safe). Returns "" or why not.
std::string clamp_persistent_grid(Plan& pl) {
  if (!pl.launch.persistent) return {};
  int dev = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return cuda_failure(e, "cudaGetDevice");
  static std::mutex mu;
  static std::map<std::tuple<int, const void*, int, int64_t, int>, int64_t> resident;  // -> blocks
  const auto key = std::make_tuple(dev, pl.func, pl.launch.threads, pl.launch.dynamic_smem, pl.launch.cluster);
  int64_t blocks = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = resident.find(key); it != resident.end()) blocks = it->second;
  }
  if (blocks == 0) {
    int clusters = 0, per_sm = 0, sms = 0;
    if (std::string why = residency(pl, &clusters, &per_sm, &sms); !why.empty()) return why;
    blocks = pl.launch.cluster > 1 ? int64_t(clusters) * pl.launch.cluster : int64_t(per_sm) * sms;
    std::lock_guard<std::mutex> lock(mu);
    resident[key] = blocks;
  }
  pl.launch.grid = std::min(pl.launch.grid, blocks);
  if (const int64_t cap = g_persistent_cap.load(); cap > 0) pl.launch.grid = std::min(pl.launch.grid, cap * pl.launch.cluster);
  return {};
}

// ---- wide workspace: per (device, stream), grown on demand; its counters are zero between launches ----

struct WideWorkspace {
  void* ptr = nullptr;
  size_t bytes = 0;
};

// The counters (rows, at the start) and pairs (rows x nsl) of a wide launch on stream s; "" or
// why not. A new buffer is zeroed on s (before the launch that uses it); the kernel leaves its
// counters at zero.
std::string wide_workspace(int64_t rows, int64_t nsl, cudaStream_t s, unsigned** cnt, float2** part) {
  int dev = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return cuda_failure(e, "cudaGetDevice");
  const size_t cnt_bytes = (size_t(rows) * sizeof(unsigned) + 255) / 256 * 256;
  const size_t need = cnt_bytes + size_t(rows) * size_t(nsl) * sizeof(float2);
  static std::mutex mu;
  static std::map<std::pair<int, cudaStream_t>, WideWorkspace> spaces;
  std::lock_guard<std::mutex> lock(mu);
  if (spaces.size() >= 16 && !spaces.count({dev, s})) {
    // Streams come and go (tests make one per problem): past 16, drop this device's other buffers
    // (cudaFree waits for the device, so none is in use).
    for (auto it = spaces.begin(); it != spaces.end();)
      if (it->first.first == dev) {
        (void)cudaFree(it->second.ptr);
        it = spaces.erase(it);
      } else {
        ++it;
      }
    (void)cudaGetLastError();
  }
  WideWorkspace& w = spaces[{dev, s}];
  if (w.bytes < need) {
    // cudaFree waits for the device: no launch still uses the old buffer.
    if (w.ptr)
      if (cudaError_t e = cudaFree(w.ptr); e != cudaSuccess) return w = {}, cuda_failure(e, "cudaFree (wide workspace)");
    w = {};
    const size_t bytes = std::max(need, size_t(1) << 16);
    if (cudaError_t e = cudaMalloc(&w.ptr, bytes); e != cudaSuccess)
      return w.ptr = nullptr, cuda_failure(e, "cudaMalloc (wide workspace, " + std::to_string(bytes) + " B)");
    if (cudaError_t e = cudaMemsetAsync(w.ptr, 0, bytes, s); e != cudaSuccess) {
      (void)cudaFree(w.ptr);
      w = {};
      return cuda_failure(e, "cudaMemsetAsync (wide workspace)");
    }
    w.bytes = bytes;
  }
  *cnt = static_cast<unsigned*>(w.ptr);
  *part = reinterpret_cast<float2*>(static_cast<char*>(w.ptr) + cnt_bytes);
  return {};
}

// Slices a row of p gets from a wide config (virtual columns: vec - 1 more when rows do not start on a pack).
int64_t wide_slices(const NativeSoftmaxConfig& c, const SoftmaxProblem& p) {
  const int64_t span = p.cols + (p.row_stride() % c.vec ? c.vec - 1 : 0), S = int64_t(c.threads) * c.elems;
  return (span + S - 1) / S;
}

// band: pieces of a CTA's chunk of a row on a grid of G CTAs (the kernel's np), and "" when two
// rows' pieces less the held ones fit the config's slots (2 np - H <= N), else why not.
int64_t band_pieces(const NativeSoftmaxConfig& c, const SoftmaxProblem& p, int64_t G) {
  const int64_t R = p.cols / c.vec, Cp = (R + G - 1) / G, Pq = int64_t(c.threads) * (c.elems / c.vec);
  return (Cp + Pq - 1) / Pq;
}
std::string band_fit(const NativeSoftmaxConfig& c, const SoftmaxProblem& p, int64_t G) {
  const int64_t np = band_pieces(c, p, G);
  if (2 * np - std::min<int64_t>(kBandHeld, np) <= c.stages) return {};
  return "a CTA's share of a row on a grid of " + std::to_string(G) + " CTAs is " + std::to_string(np) + " pieces of " +
         std::to_string(c.threads * c.elems) + " values: two rows less the " + std::to_string(kBandHeld) +
         " pieces held in registers exceed its " + std::to_string(c.stages) + " slots";
}

// Launches `kernel` with the config's launch and `args` (pointers to the kernel's parameters,
// in order and of their exact types), or records the plan when probing.
void launch(const NativeSoftmaxConfig& c, const SoftmaxProblem& p, const void* kernel, void** args, cudaStream_t s) {
  Plan pl{kernel, native_softmax_launch(c, p)};
  if (t_probe) {
    *t_probe = pl;
    return;
  }
  if (std::string why = set_attributes(pl); !why.empty()) GT_THROW("native softmax: " + c.name() + ": " + why);
  if (std::string why = clamp_persistent_grid(pl); !why.empty()) GT_THROW("native softmax: " + c.name() + ": " + why);
  if (c.kind == SoftmaxKind::wide) {  // the workspace: the last two kernel parameters
    unsigned* cnt = nullptr;
    float2* part = nullptr;
    if (std::string why = wide_workspace(p.rows, wide_slices(c, p), s, &cnt, &part); !why.empty())
      GT_THROW("native softmax: " + c.name() + ": " + why);
    *static_cast<float2**>(args[7]) = part;
    *static_cast<unsigned**>(args[8]) = cnt;
  }
  if (c.kind == SoftmaxKind::band) {  // a CTA's chunk of a row must fit its slots; the workspace: G pairs a row
    if (std::string why = band_fit(c, p, pl.launch.grid); !why.empty()) GT_THROW("native softmax: " + c.name() + ": " + why);
    unsigned* cnt = nullptr;
    float2* part = nullptr;
    if (std::string why = wide_workspace(p.rows, pl.launch.grid, s, &cnt, &part); !why.empty())
      GT_THROW("native softmax: " + c.name() + ": " + why);
    *static_cast<float2**>(args[6]) = part;
    *static_cast<unsigned**>(args[7]) = cnt;
  }
  cudaLaunchAttribute attr[2];
  const cudaLaunchConfig_t cfg = launch_config(pl, attr, s);
  if (cudaError_t e = cudaLaunchKernelExC(&cfg, kernel, args); e != cudaSuccess)
    GT_THROW("native softmax: " + c.name() + ": " + cuda_failure(e, "launch (" + pl.launch.str() + ")"));
}

int64_t smem_slice(const NativeSoftmaxConfig& c, const SoftmaxProblem& p) {
  const int64_t per = (p.cols + c.cluster - 1) / c.cluster;
  return (per + c.vec - 1) / c.vec * c.vec;
}

template <class Ti, class To, int VEC>
void launch_smem(const NativeSoftmaxConfig& c, const SoftmaxProblem& p, const Ti* x, To* y, cudaStream_t s) {
  if constexpr (VEC * sizeof(Ti) == 16) {
    int64_t cols = p.cols, ld = p.row_stride(), slice = smem_slice(c, p);
    float scale = p.scale;
    int csize = c.cluster;
    void* args[] = {&x, &y, &cols, &ld, &scale, &csize, &slice};
    launch(c, p, reinterpret_cast<const void*>(&softmax_smem_kernel<Ti, To, VEC>), args, s);
  } else {
    GT_THROW("native softmax: " + c.name() + ": the smem kind needs 16-byte vectors");
  }
}

template <class Ti, class To, int E>
void launch_pipe_e(const NativeSoftmaxConfig& c, const SoftmaxProblem& p, const Ti* x, To* y, cudaStream_t s) {
  int64_t rows = p.rows, cols = p.cols, ld = p.row_stride();
  float scale = p.scale;
  int csize = c.cluster, stages = c.stages, rpb = c.block_rows;
  void* args[] = {&x, &y, &rows, &cols, &ld, &scale, &csize, &stages, &rpb};
  launch(c, p, reinterpret_cast<const void*>(&softmax_pipe_kernel<Ti, To, E>), args, s);
}

// Calls f(std::integral_constant<int, E>{}) with E = c.elems, one of VEC x 1, 2, 4, 8: the
// register-resident kind (pipe) is instantiated per elements-per-thread and needs
// 16-byte vectors.
template <class Ti, int VEC, class F>
void with_elems(const NativeSoftmaxConfig& c, const char* kind, F&& f) {
  if constexpr (VEC * sizeof(Ti) == 16) {
    switch (c.elems / VEC) {
      case 1: return f(std::integral_constant<int, VEC>{});
      case 2: return f(std::integral_constant<int, 2 * VEC>{});
      case 4: return f(std::integral_constant<int, 4 * VEC>{});
      case 8: return f(std::integral_constant<int, 8 * VEC>{});
      default: GT_THROW("native softmax: " + c.name() + ": elems must be vec x 1, 2, 4 or 8");
    }
  } else {
    GT_THROW("native softmax: " + c.name() + ": the " + kind + " kind needs 16-byte vectors");
  }
}

template <class Ti, class To, int VEC>
void launch_pipe(const NativeSoftmaxConfig& c, const SoftmaxProblem& p, const Ti* x, To* y, cudaStream_t s) {
  with_elems<Ti, VEC>(c, "pipe", [&](auto e) { launch_pipe_e<Ti, To, decltype(e)::value>(c, p, x, y, s); });
}

template <class Ti, class To, int E>
void launch_row_e(const NativeSoftmaxConfig& c, const SoftmaxProblem& p, const Ti* x, To* y, cudaStream_t s) {
  int64_t rows = p.rows, cols = p.cols, ld = p.row_stride();
  float scale = p.scale;
  int csize = c.cluster, rpb = c.block_rows;
  void* args[] = {&x, &y, &rows, &cols, &ld, &scale, &csize, &rpb};
  const void* kernel = c.stages == 2 ? reinterpret_cast<const void*>(&softmax_row_kernel<Ti, To, E, true>)
                                     : reinterpret_cast<const void*>(&softmax_row_kernel<Ti, To, E, false>);
  launch(c, p, kernel, args, s);
}

template <class Ti, class To, int VEC>
void launch_row(const NativeSoftmaxConfig& c, const SoftmaxProblem& p, const Ti* x, To* y, cudaStream_t s) {
  with_elems<Ti, VEC>(c, "row", [&](auto e) { launch_row_e<Ti, To, decltype(e)::value>(c, p, x, y, s); });
}

template <class Ti, class To, int E>
void launch_wide_e(const NativeSoftmaxConfig& c, const SoftmaxProblem& p, const Ti* x, To* y, cudaStream_t s) {
  int64_t rows = p.rows, cols = p.cols, ld = p.row_stride();
  float scale = p.scale;
  int nsl = int(wide_slices(c, p));
  float2* part = nullptr;  // set by launch() (the workspace)
  unsigned* cnt = nullptr;
  int N = c.stages;  // the ring's slots (0: the two-pass kernel)
  void* args[] = {&x, &y, &rows, &cols, &ld, &scale, &nsl, &part, &cnt, &N};
  if (N > 0) return launch(c, p, reinterpret_cast<const void*>(&softmax_ring_kernel<Ti, To, E>), args, s);
  if constexpr (E * sizeof(Ti) <= 64)  // the two-pass kernel: 2 or 4 packs a thread (8: the ring only)
    launch(c, p, reinterpret_cast<const void*>(&softmax_wide_kernel<Ti, To, E>), args, s);
  else
    GT_THROW("native softmax: " + c.name() + ": 8 packs a thread need the ring (stages > 0)");
}

template <class Ti, class To, int VEC>
void launch_wide(const NativeSoftmaxConfig& c, const SoftmaxProblem& p, const Ti* x, To* y, cudaStream_t s) {
  if constexpr (VEC * sizeof(Ti) == 16) {
    switch (c.elems / VEC) {  // 2 or 4 packs (8: the ring), at most 32 values a thread (cannot_run)
      case 2: return launch_wide_e<Ti, To, 2 * VEC>(c, p, x, y, s);
      case 4:
        if constexpr (4 * VEC <= 32) return launch_wide_e<Ti, To, 4 * VEC>(c, p, x, y, s);
        [[fallthrough]];
      case 8:
        if constexpr (8 * VEC <= 32) return launch_wide_e<Ti, To, 8 * VEC>(c, p, x, y, s);
        [[fallthrough]];
      default: GT_THROW("native softmax: " + c.name() + ": elems must be vec x 2 or 4 (8: the ring) and at most 32 for the wide kind");
    }
  } else {
    GT_THROW("native softmax: " + c.name() + ": the wide kind needs 16-byte vectors");
  }
}

template <class Ti, class To, int VEC>
void launch_band(const NativeSoftmaxConfig& c, const SoftmaxProblem& p, const Ti* x, To* y, cudaStream_t s) {
  if constexpr (VEC * sizeof(Ti) == 16) {
    int64_t rows = p.rows, cols = p.cols, ld = p.row_stride();
    float scale = p.scale;
    float2* part = nullptr;  // set by launch() (the workspace)
    unsigned* cnt = nullptr;
    int slots = c.stages;
    void* args[] = {&x, &y, &rows, &cols, &ld, &scale, &part, &cnt, &slots};
    launch(c, p, reinterpret_cast<const void*>(&softmax_band_kernel<Ti, To>), args, s);
  } else {
    GT_THROW("native softmax: " + c.name() + ": the band kind needs 16-byte vectors");
  }
}

template <class Ti, class To, int E>
void launch_tiny_e(const NativeSoftmaxConfig& c, const SoftmaxProblem& p, const Ti* x, To* y, cudaStream_t s) {
  int64_t rows = p.rows, cols = p.cols, ld = p.row_stride();
  float scale = p.scale;
  int group = c.group;
  void* args[] = {&x, &y, &rows, &cols, &ld, &scale, &group};
  launch(c, p, reinterpret_cast<const void*>(&softmax_tiny_kernel<Ti, To, E>), args, s);
}

template <class Ti, class To, int VEC>
void launch_tiny(const NativeSoftmaxConfig& c, const SoftmaxProblem& p, const Ti* x, To* y, cudaStream_t s) {
  if constexpr (VEC * sizeof(Ti) == 16) {
    switch (c.elems) {
      case 1: return launch_tiny_e<Ti, To, 1>(c, p, x, y, s);
      case 2: return launch_tiny_e<Ti, To, 2>(c, p, x, y, s);
      case 4: return launch_tiny_e<Ti, To, 4>(c, p, x, y, s);
      case 8: return launch_tiny_e<Ti, To, 8>(c, p, x, y, s);
      case 16: return launch_tiny_e<Ti, To, 16>(c, p, x, y, s);
      case 32: return launch_tiny_e<Ti, To, 32>(c, p, x, y, s);
      default: GT_THROW("native softmax: " + c.name() + ": elems must be 1, 2, 4, 8, 16 or 32 for the tiny kind");
    }
  } else {
    GT_THROW("native softmax: " + c.name() + ": the tiny kind needs 16-byte vectors");
  }
}

template <class Ti, class To, int VEC>
void launch_flat(const NativeSoftmaxConfig& c, const SoftmaxProblem& p, const Ti* x, To* y, cudaStream_t s) {
  if constexpr (std::is_same_v<Ti, To> && VEC * sizeof(Ti) == 16) {
    int64_t rows = p.rows;
    float scale = p.scale;
    void* args[] = {&x, &y, &rows, &scale};
    const void* kernel = nullptr;
    switch (c.elems) {
      case 2: kernel = reinterpret_cast<const void*>(&softmax_flat_kernel<Ti, 2>); break;
      case 3: kernel = reinterpret_cast<const void*>(&softmax_flat_kernel<Ti, 3>); break;
      case 4: kernel = reinterpret_cast<const void*>(&softmax_flat_kernel<Ti, 4>); break;
      case 5: kernel = reinterpret_cast<const void*>(&softmax_flat_kernel<Ti, 5>); break;
      case 6: kernel = reinterpret_cast<const void*>(&softmax_flat_kernel<Ti, 6>); break;
      case 7: kernel = reinterpret_cast<const void*>(&softmax_flat_kernel<Ti, 7>); break;
      case 8: kernel = reinterpret_cast<const void*>(&softmax_flat_kernel<Ti, 8>); break;
      default: GT_THROW("native softmax: " + c.name() + ": the flat kind takes rows of 2 .. 8 values");
    }
    launch(c, p, kernel, args, s);
  } else {
    GT_THROW("native softmax: " + c.name() + ": the flat kind needs 16-byte vectors and y of x's dtype");
  }
}

// flat: the rows a lane holds (FlatRows<T, cols>::P on the host: the fewest whole rows that end on
// a 16-byte pack).
int64_t flat_lane_rows(const SoftmaxProblem& p) { return 16 / std::gcd<int64_t>(p.cols * int64_t(size_of(p.in)), 16); }

// span: the rows of a chunk (a multiple of the CTA's threads / group, as many as chunk_kib KiB of x
// hold; 0 when not even one row a group fits) and the bytes of one stage (the chunk and its two
// partial edge packs, rounded to 128).
int64_t span_rows(const NativeSoftmaxConfig& c, const SoftmaxProblem& p) {
  if (c.group < 1 || c.threads % c.group) return 0;
  const int64_t ng = c.threads / c.group, row_bytes = p.cols * int64_t(size_of(p.in));
  return int64_t(c.chunk_kib) * 1024 / (ng * row_bytes) * ng;
}
int64_t span_stage_bytes(const NativeSoftmaxConfig& c, const SoftmaxProblem& p) {
  return (span_rows(c, p) * p.cols * int64_t(size_of(p.in)) + kSpanStageSlack + 127) / 128 * 128;
}

template <class Ti, class To, int VEC>
void launch_span(const NativeSoftmaxConfig& c, const SoftmaxProblem& p, const Ti* x, To* y, cudaStream_t s) {
  if constexpr (std::is_same_v<Ti, To> && VEC * sizeof(Ti) == 16) {
    int64_t rows = p.rows, cols = p.cols, R = span_rows(c, p);
    float scale = p.scale;
    int S = c.stages, stage_bytes = int(span_stage_bytes(c, p)), G = c.group;
    void* args[] = {&x, &y, &rows, &cols, &scale, &R, &S, &stage_bytes, &G};
    const void* kernel = nullptr;
    switch (c.elems) {
      case 0: kernel = reinterpret_cast<const void*>(&softmax_span_kernel<Ti, 0>); break;
      case 1: kernel = reinterpret_cast<const void*>(&softmax_span_kernel<Ti, 1>); break;
      case 2: kernel = reinterpret_cast<const void*>(&softmax_span_kernel<Ti, 2>); break;
      case 4: kernel = reinterpret_cast<const void*>(&softmax_span_kernel<Ti, 4>); break;
      case 8: kernel = reinterpret_cast<const void*>(&softmax_span_kernel<Ti, 8>); break;
      default: GT_THROW("native softmax: " + c.name() + ": elems must be 0, 1, 2, 4 or 8 for the span kind");
    }
    launch(c, p, kernel, args, s);
  } else {
    GT_THROW("native softmax: " + c.name() + ": the span kind needs 16-byte vectors and y of x's dtype");
  }
}

template <class Ti, class To, int E, int VEC>
void launch_rows(const NativeSoftmaxConfig& c, const SoftmaxProblem& p, const Ti* x, To* y, cudaStream_t s) {
  if constexpr (E % VEC == 0) {
    const int limit = c.kind == SoftmaxKind::warp ? kWarpMaxThreads : split_max_threads<E>();
    if (c.threads > limit)
      GT_THROW("native softmax: " + c.name() + ": at most " + std::to_string(limit) + " threads for this kind and elems");
    int64_t rows = p.rows, cols = p.cols, ld = p.row_stride();
    float scale = p.scale;
    if (c.kind == SoftmaxKind::warp) {
      void* args[] = {&x, &y, &rows, &cols, &ld, &scale};
      launch(c, p, reinterpret_cast<const void*>(&softmax_warp_kernel<Ti, To, E, VEC>), args, s);
    } else {
      int csize = c.cluster;
      void* args[] = {&x, &y, &cols, &ld, &scale, &csize};
      launch(c, p, reinterpret_cast<const void*>(&softmax_split_kernel<Ti, To, E, VEC>), args, s);
    }
  } else {
    GT_THROW("native softmax: " + c.name() + ": elems must be a multiple of vec");
  }
}

template <class Ti, class To, int VEC>
void launch_vec(const NativeSoftmaxConfig& c, const SoftmaxProblem& p, const Ti* x, To* y, cudaStream_t s) {
  if (c.kind == SoftmaxKind::online) {
    int64_t cols = p.cols, ld = p.row_stride();
    float scale = p.scale;
    void* args[] = {&x, &y, &cols, &ld, &scale};
    return launch(c, p, reinterpret_cast<const void*>(&softmax_online_kernel<Ti, To, VEC>), args, s);
  }
  if (c.kind == SoftmaxKind::smem) return launch_smem<Ti, To, VEC>(c, p, x, y, s);
  if (c.kind == SoftmaxKind::pipe) return launch_pipe<Ti, To, VEC>(c, p, x, y, s);
  if (c.kind == SoftmaxKind::row) return launch_row<Ti, To, VEC>(c, p, x, y, s);
  if (c.kind == SoftmaxKind::wide) return launch_wide<Ti, To, VEC>(c, p, x, y, s);
  if (c.kind == SoftmaxKind::band) return launch_band<Ti, To, VEC>(c, p, x, y, s);
  if (c.kind == SoftmaxKind::tiny) return launch_tiny<Ti, To, VEC>(c, p, x, y, s);
  if (c.kind == SoftmaxKind::span) return launch_span<Ti, To, VEC>(c, p, x, y, s);
  if (c.kind == SoftmaxKind::flat) return launch_flat<Ti, To, VEC>(c, p, x, y, s);
  switch (c.elems) {
    case 1: return launch_rows<Ti, To, 1, VEC>(c, p, x, y, s);
    case 2: return launch_rows<Ti, To, 2, VEC>(c, p, x, y, s);
    case 4: return launch_rows<Ti, To, 4, VEC>(c, p, x, y, s);
    case 8: return launch_rows<Ti, To, 8, VEC>(c, p, x, y, s);
    case 16: return launch_rows<Ti, To, 16, VEC>(c, p, x, y, s);
    case 32: return launch_rows<Ti, To, 32, VEC>(c, p, x, y, s);
    default: GT_THROW("native softmax: " + c.name() + ": elems must be 1, 2, 4, 8, 16 or 32");
  }
}

template <class Ti, class To>
void launch_typed(const NativeSoftmaxConfig& c, const SoftmaxProblem& p, const void* x, void* y, cudaStream_t s) {
  const Ti* xt = static_cast<const Ti*>(x);
  To* yt = static_cast<To*>(y);
  if (c.vec == 1) return launch_vec<Ti, To, 1>(c, p, xt, yt, s);
  if (c.vec == vec16<Ti>()) return launch_vec<Ti, To, vec16<Ti>()>(c, p, xt, yt, s);
  GT_THROW("native softmax: " + c.name() + ": vec must be 1 or " + std::to_string(vec16<Ti>()) + " for " +
           to_string(p.in) + " inputs");
}

template <class Ti>
void launch_in(const NativeSoftmaxConfig& c, const SoftmaxProblem& p, const void* x, void* y, cudaStream_t s) {
  switch (p.out) {
    case DType::bf16: return launch_typed<Ti, __nv_bfloat16>(c, p, x, y, s);
    case DType::fp16: return launch_typed<Ti, __half>(c, p, x, y, s);
    case DType::fp32: return launch_typed<Ti, float>(c, p, x, y, s);
    default: GT_THROW(std::string("softmax.out: ") + to_string(p.out) + " is not supported");
  }
}

void dispatch(const NativeSoftmaxConfig& c, const SoftmaxProblem& p, const void* in, void* out, cudaStream_t s) {
  switch (p.in) {
    case DType::bf16: return launch_in<__nv_bfloat16>(c, p, in, out, s);
    case DType::fp16: return launch_in<__half>(c, p, in, out, s);
    case DType::fp32: return launch_in<float>(c, p, in, out, s);
    default: GT_THROW(std::string("softmax.in: ") + to_string(p.in) + " is not supported");
  }
}

// The kernel's __launch_bounds__ for a config (see the kernels above).
int launch_bound(const NativeSoftmaxConfig& c) {
  switch (c.kind) {
    case SoftmaxKind::warp: return kWarpMaxThreads;
    case SoftmaxKind::block:
    case SoftmaxKind::cluster: return c.elems >= 32 ? split_max_threads<32>() : split_max_threads<16>();
    case SoftmaxKind::pipe: return c.elems > 32 ? pipe_max_threads<64>() : pipe_max_threads<32>();
    case SoftmaxKind::row: return c.elems > 32 || c.stages == 2 ? row_max_threads<64, true>() : row_max_threads<32, false>();
    case SoftmaxKind::tiny: return kTinyMaxThreads;
    case SoftmaxKind::span: return kSpanMaxThreads;
    case SoftmaxKind::flat: return kFlatMaxThreads;
    case SoftmaxKind::wide: return c.stages > 0 ? kWideMaxThreads + kRingExtraThreads : kWideMaxThreads;
    case SoftmaxKind::band: return kBandMaxThreads + kBandExtraThreads;
    case SoftmaxKind::smem:
    case SoftmaxKind::online: return kMaxThreads;
  }
  return 0;
}

constexpr int kWarpElems[] = {1, 2, 4, 8, 16, 32};
constexpr int kSplitElems[] = {4, 8, 16, 32};
constexpr int kWarpThreads[] = {128, 256, 512};
constexpr int kSplitThreads[] = {128, 256, 512, 1024};
constexpr int kOnlineThreads[] = {256, 512, 1024};
constexpr int64_t kMinClusterSlice = 4096;  // columns per CTA below which clusters are not offered
constexpr int kPipeThreads[] = {64, 128, 256, 512, 1024};
constexpr int64_t kPipeMinClusterRowBytes = 16 * 1024;  // pipe: rows of x up to this size get one CTA each
constexpr int64_t kTinyMaxCols = 1024;                  // tiny: the longest row (32 lanes x 32 elems)
constexpr int kTinyOfferedThreads = 256;
constexpr int64_t kWideMaxRows = 64;         // wide: offered for at most this many rows ...
constexpr int64_t kWideMinCols = 8192;       // ... of at least this many columns
constexpr int64_t kWideMaxSlices = 4096;     // slices a row (each CTA merges a row's pairs in one warp)

bool pow2(int v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

const char* to_string(SoftmaxKind k) {
  switch (k) {
    case SoftmaxKind::warp: return "warp";
    case SoftmaxKind::block: return "block";
    case SoftmaxKind::cluster: return "cluster";
    case SoftmaxKind::smem: return "smem";
    case SoftmaxKind::pipe: return "pipe";
    case SoftmaxKind::online: return "online";
    case SoftmaxKind::tiny: return "tiny";
    case SoftmaxKind::wide: return "wide";
    case SoftmaxKind::row: return "row";
    case SoftmaxKind::span: return "span";
    case SoftmaxKind::flat: return "flat";
    case SoftmaxKind::band: return "band";
  }
  return "?";
}

int64_t NativeSoftmaxConfig::max_cols() const {
  switch (kind) {
    case SoftmaxKind::warp: return int64_t(32) * elems;
    case SoftmaxKind::block: return int64_t(threads) * elems;
    case SoftmaxKind::cluster: return int64_t(threads) * elems * cluster;
    case SoftmaxKind::smem: return -1;  // bounded by shared memory per CTA: see cannot_run
    case SoftmaxKind::pipe:
    case SoftmaxKind::row: return int64_t(threads / std::max(block_rows, 1)) * elems * cluster;
    case SoftmaxKind::online: return -1;
    case SoftmaxKind::tiny: return std::min<int64_t>(int64_t(group) * elems, kTinyMaxCols);
    case SoftmaxKind::wide: return -1;  // any: slices as many as the row needs
    case SoftmaxKind::span: return -1;  // rows that fit a chunk: see cannot_run
    case SoftmaxKind::flat: return kFlatMaxCols;
    case SoftmaxKind::band: return -1;  // a CTA's chunk must fit its slots: checked at launch (band_fit)
  }
  return 0;
}

std::string NativeSoftmaxConfig::name() const {
  std::string n = std::string(to_string(kind)) + "_v" + std::to_string(vec);
  if (kind != SoftmaxKind::online && kind != SoftmaxKind::smem) n += "_e" + std::to_string(elems);
  n += "_t" + std::to_string(threads);
  if (kind == SoftmaxKind::tiny || kind == SoftmaxKind::span) n += "_g" + std::to_string(group);
  if (kind == SoftmaxKind::span) n += "_k" + std::to_string(chunk_kib) + "_s" + std::to_string(stages);
  if (kind == SoftmaxKind::pipe || kind == SoftmaxKind::row) n += "_r" + std::to_string(block_rows);
  if (kind == SoftmaxKind::cluster || kind == SoftmaxKind::smem || kind == SoftmaxKind::pipe || kind == SoftmaxKind::row)
    n += "_c" + std::to_string(cluster);
  if (kind == SoftmaxKind::pipe || kind == SoftmaxKind::row || kind == SoftmaxKind::band || (kind == SoftmaxKind::wide && stages > 0))
    n += "_s" + std::to_string(stages);
  return n;
}

NativeSoftmaxConfig NativeSoftmaxConfig::parse(const std::string& name) {
  auto bad = [&](const std::string& why) {
    GT_THROW("native softmax config '" + name + "': " + why +
             " (expected e.g. warp_v8_e32_t256, block_v8_e16_t512, cluster_v8_e32_t512_c8, smem_v8_t512_c4, "
             "pipe_v8_e32_t1024_r1_c8_s3, row_v8_e32_t160_r1_c1_s1, online_v8_t1024, tiny_v8_e1_t256_g8, wide_v8_e32_t512, "
             "span_v8_e0_t512_g64_k48_s4, flat_v8_e7_t256, band_v4_e16_t448_s8)");
  };
  NativeSoftmaxConfig c;
  size_t pos = name.find('_');
  const std::string kind = name.substr(0, pos);
  if (kind == "warp") c.kind = SoftmaxKind::warp;
  else if (kind == "block") c.kind = SoftmaxKind::block;
  else if (kind == "cluster") c.kind = SoftmaxKind::cluster;
  else if (kind == "smem") c.kind = SoftmaxKind::smem;
  else if (kind == "pipe") c.kind = SoftmaxKind::pipe;
  else if (kind == "online") c.kind = SoftmaxKind::online;
  else if (kind == "tiny") c.kind = SoftmaxKind::tiny;
  else if (kind == "wide") c.kind = SoftmaxKind::wide;
  else if (kind == "row") c.kind = SoftmaxKind::row;
  else if (kind == "span") c.kind = SoftmaxKind::span;
  else if (kind == "flat") c.kind = SoftmaxKind::flat;
  else if (kind == "band") c.kind = SoftmaxKind::band;
  else bad("unknown kind '" + kind + "'");
  auto field = [&](char tag) -> int {
    if (pos == std::string::npos || pos + 2 > name.size() || name[pos + 1] != tag) bad(std::string("missing _") + tag);
    const size_t end = name.find('_', pos + 1);
    const std::string digits = name.substr(pos + 2, end == std::string::npos ? std::string::npos : end - pos - 2);
    if (digits.empty() || digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string::npos)
      bad(std::string("_") + tag + " needs a number");
    pos = end;
    return std::atoi(digits.c_str());
  };
  c.vec = field('v');
  c.elems = c.kind == SoftmaxKind::online || c.kind == SoftmaxKind::smem ? 0 : field('e');
  c.threads = field('t');
  c.group = c.kind == SoftmaxKind::tiny || c.kind == SoftmaxKind::span ? field('g') : 0;
  if (c.kind == SoftmaxKind::span) {
    c.chunk_kib = field('k');
    c.stages = field('s');
  }
  c.block_rows = c.kind == SoftmaxKind::pipe || c.kind == SoftmaxKind::row ? field('r') : 1;
  if (c.kind != SoftmaxKind::span)
    c.cluster = c.kind == SoftmaxKind::cluster || c.kind == SoftmaxKind::smem || c.kind == SoftmaxKind::pipe ||
                        c.kind == SoftmaxKind::row
                    ? field('c')
                    : 1;
  if (c.kind == SoftmaxKind::wide) c.stages = pos != std::string::npos && name[pos + 1] == 's' ? field('s') : 0;
  else if (c.kind != SoftmaxKind::span)
    c.stages = c.kind == SoftmaxKind::pipe || c.kind == SoftmaxKind::row || c.kind == SoftmaxKind::band ? field('s') : 0;
  if (pos != std::string::npos) bad("trailing text");
  if (c.name() != name) bad("not in canonical form");
  return c;
}

std::string NativeSoftmaxConfig::cannot_run(const SoftmaxProblem& p) const {
  if (threads < 32 || threads > kMaxThreads || threads % 32) return "threads must be a multiple of 32 in [32, 1024]";
  if (!(vec == 1 || vec == vec16_of(p.in))) return "vec must be 1 or " + std::to_string(vec16_of(p.in));
  if (kind == SoftmaxKind::smem) {
    if (vec * size_of(p.in) != 16) return "the smem kind loads 16-byte packs (vec " + std::to_string(16 / size_of(p.in)) + ")";
    if (elems != 0) return "elems must be 0 for the smem kind";
    if (!pow2(cluster) || cluster > kMaxCluster) return "cluster must be 1, 2, 4, 8 or 16";
    const int64_t per = (p.cols + cluster - 1) / cluster, slice = (per + vec - 1) / vec * vec;
    if (slice * int64_t(size_of(p.in)) > kNativeSmemDynamicOptIn)
      return "a slice of " + std::to_string(slice) + " elements (" + std::to_string(slice * int64_t(size_of(p.in))) +
             " bytes) exceeds the " + std::to_string(kNativeSmemDynamicOptIn) + " bytes of dynamic shared memory a CTA gets";
    if ((cluster - 1) * slice >= p.cols) return "the last CTA of the cluster would have no columns";
  } else if (kind == SoftmaxKind::pipe) {
    const int v16 = vec16_of(p.in);
    if (vec != v16) return "the pipe kind copies 16-byte packs (vec " + std::to_string(v16) + ")";
    if (elems % vec || !pow2(elems / vec) || elems / vec > 8) return "elems must be vec x 1, 2, 4 or 8";
    if (threads > launch_bound(*this)) return "at most " + std::to_string(launch_bound(*this)) + " threads for " +
                                                  std::to_string(elems) + " elems (registers)";
    if (cluster < 1 || cluster > kMaxCluster) return "cluster must be 1 .. 16";
    if (block_rows < 1 || (threads / 32) % block_rows) return "block_rows must divide the warps of a block";
    if (block_rows > 1 && cluster > 1) return "block_rows > 1 needs cluster 1";
    if (stages < 2 || stages > kPipeMaxStages) return "stages must be 2 .. " + std::to_string(kPipeMaxStages);
    const int64_t smem = int64_t(stages) * threads * elems * int64_t(size_of(p.in));
    if (smem > kNativeSmemDynamicOptIn)
      return std::to_string(stages) + " stages of " + std::to_string(threads * elems) + " elements (" + std::to_string(smem) +
             " bytes) exceed the " + std::to_string(kNativeSmemDynamicOptIn) + " bytes of dynamic shared memory a CTA gets";
  } else if (kind == SoftmaxKind::row) {
    const int v16 = vec16_of(p.in);
    if (vec != v16) return "the row kind loads 16-byte packs (vec " + std::to_string(v16) + ")";
    if (elems % vec || !pow2(elems / vec) || elems / vec > 8) return "elems must be vec x 1, 2, 4 or 8";
    if (threads > launch_bound(*this)) return "at most " + std::to_string(launch_bound(*this)) + " threads for " +
                                                  std::to_string(elems) + " elems (registers)";
    if (cluster < 1 || cluster > kMaxCluster) return "cluster must be 1 .. 16";
    if (block_rows < 1 || threads % block_rows) return "block_rows must divide the threads of a block";
    const int tw = threads / block_rows;
    if (tw < 32 ? !pow2(tw) : tw % 32) return "threads / block_rows must be 1, 2, 4, 8, 16 or a multiple of 32";
    if (block_rows > 1 && cluster > 1) return "block_rows > 1 needs cluster 1";
    if (stages != 1 && stages != 2) return "stages must be 1 or 2 (blocks of rows a CTA has in flight)";
  } else if (kind == SoftmaxKind::tiny) {
    if (vec != vec16_of(p.in)) return "the tiny kind copies 16-byte packs (vec " + std::to_string(vec16_of(p.in)) + ")";
    if (!pow2(elems) || elems > 32) return "elems must be 1, 2, 4, 8, 16 or 32 for the tiny kind";
    if (!pow2(group) || group > 32) return "group must be 1, 2, 4, 8, 16 or 32 lanes a row";
    if (threads > kTinyMaxThreads) return "at most " + std::to_string(kTinyMaxThreads) + " threads for the tiny kind";
  } else if (kind == SoftmaxKind::span) {
    if (vec != vec16_of(p.in)) return "the span kind copies 16-byte packs (vec " + std::to_string(vec16_of(p.in)) + ")";
    if (p.out != p.in) return "the span kind writes y over x in shared memory: y's dtype must be x's";
    if (p.row_stride() != p.cols) return "the span kind needs packed rows (ld == cols)";
    if (threads < 64 || threads > kSpanMaxThreads)
      return "64 .. " + std::to_string(kSpanMaxThreads) + " threads for the span kind";
    if (elems != 0 && (!pow2(elems) || elems > 8)) return "elems must be 0, 1, 2, 4 or 8 for the span kind";
    if (group < 1 || threads % group || (group < 32 ? !pow2(group) : group % 32))
      return "group must be 1, 2, 4, 8, 16 lanes or whole warps dividing the threads";
    if (group > 32 && threads / group > 15) return "at most 15 groups of warps a CTA (named barriers)";
    if (elems > 0 && group > 32) return "elems > 0 needs a group within one warp";
    if (elems > 0 && p.cols > int64_t(group) * elems)
      return "holds rows of at most " + std::to_string(group * elems) + " columns, not " + std::to_string(p.cols);
    if (elems == 0 && group < 2) return "elems 0 (packs) needs at least 2 lanes a row";
    if (elems == 0) {  // a lane holds at most kSpanPacks of the 16-byte packs a row (share) spans
      const int64_t len = p.cols * int64_t(size_of(p.in));
      if ((len + 30) / 16 > int64_t(kSpanPacks) * group)
        return "a row's " + std::to_string((len + 30) / 16) + " packs exceed " + std::to_string(kSpanPacks) + " a lane x " +
               std::to_string(group) + " lanes";
    }
    if (stages < 2 || stages > kSpanMaxStages) return "stages must be 2 .. " + std::to_string(kSpanMaxStages);
    if (chunk_kib < 1 || span_rows(*this, p) < 1)
      return "a chunk of " + std::to_string(chunk_kib) + " KiB holds less than one row for each of the " +
             std::to_string(threads / std::max(group, 1)) + " groups of a CTA";
    if (stages * span_stage_bytes(*this, p) > kNativeSmemDynamicOptIn)
      return std::to_string(stages) + " stages of " + std::to_string(span_stage_bytes(*this, p)) + " bytes exceed the " +
             std::to_string(kNativeSmemDynamicOptIn) + " bytes of dynamic shared memory a CTA gets";
  } else if (kind == SoftmaxKind::flat) {
    if (vec != vec16_of(p.in)) return "the flat kind copies 16-byte packs (vec " + std::to_string(vec16_of(p.in)) + ")";
    if (p.out != p.in) return "the flat kind writes y over x in registers: y's dtype must be x's";
    if (p.row_stride() != p.cols) return "the flat kind needs packed rows (ld == cols)";
    if (elems != p.cols || elems < 2 || elems > kFlatMaxCols)
      return "elems must be cols, 2 .. " + std::to_string(kFlatMaxCols) + ", for the flat kind";
    if (threads > kFlatMaxThreads) return "at most " + std::to_string(kFlatMaxThreads) + " threads for the flat kind";
  } else if (kind == SoftmaxKind::wide) {
    const int v16 = vec16_of(p.in);
    if (vec != v16) return "the wide kind loads 16-byte packs (vec " + std::to_string(v16) + ")";
    if (elems % vec || (elems / vec != 2 && elems / vec != 4 && (elems / vec != 8 || stages == 0)) || elems > 32)
      return "elems must be vec x 2 or 4 (8 for the ring) and at most 32";
    if (threads > kWideMaxThreads) return "at most " + std::to_string(kWideMaxThreads) + " threads for the wide kind";
    if (wide_slices(*this, p) > kWideMaxSlices)
      return std::to_string(wide_slices(*this, p)) + " slices a row exceed " + std::to_string(kWideMaxSlices);
    if (p.rows > int64_t(0x7fffffff) / wide_slices(*this, p)) return "too many slices for one grid (2^31 - 1 blocks)";
    if (stages != 0) {  // the ring: slices of whole packs in shared-memory slots
      if (stages < 2 || stages > kRingMaxStages) return "stages (ring slots) must be 0 or 2 .. " + std::to_string(kRingMaxStages);
      if (p.rows > kRingMaxRows) return "the ring (stages > 0) holds at most " + std::to_string(kRingMaxRows) + " rows";
      if (p.row_stride() % vec || p.cols % vec)
        return "the ring (stages > 0) needs rows of whole 16-byte packs (ld and cols multiples of " + std::to_string(vec) + ")";
      const int64_t bytes = int64_t(stages) * (threads * elems * int64_t(size_of(p.in)) + 128);
      if (bytes > kNativeSmemDynamicOptIn)
        return std::to_string(stages) + " slots of " + std::to_string(threads * elems) + " elements (" + std::to_string(bytes) +
               " bytes) exceed the " + std::to_string(kNativeSmemDynamicOptIn) + " bytes of dynamic shared memory a CTA gets";
    }
  } else if (kind == SoftmaxKind::band) {
    const int v16 = vec16_of(p.in);
    if (vec != v16) return "the band kind copies 16-byte packs (vec " + std::to_string(v16) + ")";
    if (elems != vec * kBandPacks) return "elems must be vec x " + std::to_string(kBandPacks) + " for the band kind";
    if (threads > kBandMaxThreads) return "at most " + std::to_string(kBandMaxThreads) + " compute threads for the band kind";
    if (p.row_stride() % vec || p.cols % vec)
      return "the band kind needs rows of whole 16-byte packs (ld and cols multiples of " + std::to_string(vec) + ")";
    if (stages < 2 || stages > kBandMaxSlots) return "stages (slots) must be 2 .. " + std::to_string(kBandMaxSlots);
    const int64_t bytes = int64_t(stages) * threads * elems * int64_t(size_of(p.in));
    if (bytes > kNativeSmemDynamicOptIn)
      return std::to_string(stages) + " slots of " + std::to_string(threads * elems) + " elements (" + std::to_string(bytes) +
             " bytes) exceed the " + std::to_string(kNativeSmemDynamicOptIn) + " bytes of dynamic shared memory a CTA gets";
    if (p.rows > int64_t(0x7fffffff) / std::max<int64_t>(1, p.cols / vec)) return "too many packs for the workspace";
  } else if (kind != SoftmaxKind::online) {
    if (!pow2(elems) || elems > 32) return "elems must be 1, 2, 4, 8, 16 or 32";
    if (elems % vec) return "elems must be a multiple of vec";
    const int limit = kind == SoftmaxKind::warp ? kWarpMaxThreads : elems >= 32 ? 512 : kMaxThreads;
    if (threads > limit) return "at most " + std::to_string(limit) + " threads for this kind and elems";
  }
  if (kind == SoftmaxKind::cluster && (!pow2(cluster) || cluster < 2 || cluster > kMaxCluster))
    return "cluster must be 2, 4, 8 or 16";
  const bool rows_of_warps = kind == SoftmaxKind::pipe || kind == SoftmaxKind::row;  // block_rows, any cluster
  if (kind != SoftmaxKind::cluster && kind != SoftmaxKind::smem && !rows_of_warps && cluster != 1)
    return "cluster must be 1 for this kind";
  if (!rows_of_warps && kind != SoftmaxKind::span && kind != SoftmaxKind::wide && kind != SoftmaxKind::band && stages != 0)
    return "stages must be 0 for this kind";
  if (!rows_of_warps && block_rows != 1) return "block_rows must be 1 for this kind";
  if (kind != SoftmaxKind::tiny && kind != SoftmaxKind::span && group != 0) return "group must be 0 for this kind";
  if (kind != SoftmaxKind::span && chunk_kib != 0) return "chunk_kib must be 0 for this kind";
  if (max_cols() >= 0 && p.cols > max_cols())
    return "holds rows of at most " + std::to_string(max_cols()) + " columns, not " + std::to_string(p.cols);
  // Virtual columns (pipe, row): a row that does not start on a 16-byte pack needs vec - 1 more.
  const bool aligned = p.row_stride() % vec == 0;
  if (rows_of_warps && !aligned && p.cols + vec - 1 > max_cols())
    return "holds rows of at most " + std::to_string(max_cols() - vec + 1) + " columns when ld % " + std::to_string(vec) +
           " != 0, not " + std::to_string(p.cols);
  if (kind == SoftmaxKind::cluster && (cluster - 1) * int64_t(threads) * elems >= p.cols)
    return "the last CTA of the cluster would have no columns";
  if (kind == SoftmaxKind::pipe && (cluster - 1) * int64_t(threads / block_rows) * elems >= p.cols)
    return "the last CTA of the cluster would have no columns";
  if (kind == SoftmaxKind::row && cluster > 1) {  // the packs dealt evenly: ceil(np / c) a CTA
    const int64_t np = (p.cols + vec - 1) / vec, q = (np + cluster - 1) / cluster;
    if ((cluster - 1) * q >= np) return "the last CTA of the cluster would have no columns";
  }
  const int64_t per_block = kind == SoftmaxKind::tiny   ? tiny_rows(p.cols, int64_t(size_of(p.in)), int64_t(size_of(p.out)))
                            : kind == SoftmaxKind::span ? span_rows(*this, p)
                            : kind == SoftmaxKind::flat ? int64_t(threads) * flat_lane_rows(p)
                                                        : rows_per_block();
  const int64_t blocks = (p.rows + per_block - 1) / per_block * cluster;
  if (blocks > int64_t(0x7fffffff)) return "too many rows for one grid (2^31 - 1 blocks)";
  const bool own_alignment = rows_of_warps || kind == SoftmaxKind::tiny || kind == SoftmaxKind::wide || kind == SoftmaxKind::span ||
                             kind == SoftmaxKind::flat || kind == SoftmaxKind::band;
  if (vec > 1 && !aligned && !own_alignment)
    return "ld = " + std::to_string(p.row_stride()) + " is not a multiple of vec";
  return {};
}

std::vector<NativeSoftmaxConfig> native_softmax_configs(const SoftmaxProblem& p, int num_sms) {
  p.validate();
  std::vector<NativeSoftmaxConfig> out;
  const int v16 = vec16_of(p.in);
  // One vector width: 16 bytes when every row starts on a whole pack (ld % v16 == 0), else 1.
  const int v = p.row_stride() % v16 == 0 ? v16 : 1;
  // The fewest elems per thread (a multiple of v, within `elems`) for which `span` threads hold
  // `cols` columns; 0 if none.
  auto fewest = [&](const auto& elems, int64_t span, int64_t cols, int max_e) {
    for (int e : elems)
      if (e % v == 0 && e <= max_e && span * e >= cols) return e;
    return 0;
  };
  // warp: one row per warp (cols <= 1024).
  if (int e = fewest(kWarpElems, 32, p.cols, 32))
    for (int t : kWarpThreads) out.push_back({SoftmaxKind::warp, v, e, t, 1});
  // block: rows too long for one warp, blocks no wider than the row.
  if (p.cols > 32)
    for (int t : kSplitThreads) {
      if (t > p.cols) continue;
      if (int e = fewest(kSplitElems, t, p.cols, t > 512 ? 16 : 32)) out.push_back({SoftmaxKind::block, v, e, t, 1});
    }
  // cluster: the fewest CTAs per row that hold it, and twice that many, each CTA with at least
  // kMinClusterSlice columns.
  for (int t : kSplitThreads) {
    const int max_e = t > 512 ? 16 : 32;
    int c_min = 0;
    for (int c = 2; c <= kMaxCluster && !c_min; c *= 2)
      if (fewest(kSplitElems, int64_t(t) * c, p.cols, max_e)) c_min = c;
    if (!c_min) continue;
    for (int c = c_min; c <= std::min(2 * c_min, kMaxCluster); c *= 2) {
      const int e = fewest(kSplitElems, int64_t(t) * c, p.cols, max_e);
      if (!e || (p.cols + c - 1) / c < kMinClusterSlice) continue;
      NativeSoftmaxConfig cfg{SoftmaxKind::cluster, v, e, t, c};
      if (cfg.cannot_run(p).empty()) out.push_back(cfg);
    }
  }
  // smem: slices of 8-96 KiB of x per CTA, staged in shared memory (16-byte packs only).
  if (v == v16)
    for (int c = 1; c <= kMaxCluster; c *= 2) {
      const int64_t slice_bytes = (p.cols + c - 1) / c * int64_t(size_of(p.in));
      if (slice_bytes < kMinSmemSlice || slice_bytes > kMaxSmemSlice) continue;
      for (int t : {256, 512, 1024}) {
        NativeSoftmaxConfig cfg{SoftmaxKind::smem, v, 0, t, c};
        if (cfg.cannot_run(p).empty()) out.push_back(cfg);
      }
    }
  // pipe (16-byte packs): per (threads, elems) the fewest CTAs per row that hold it (1 .. 16,
  // any count: 9-16 are non-portable cluster sizes; 151936 bf16 columns get 10 CTAs of 16384
  // two an SM, where 5 of 32768 left 22 of 132 SMs idle on the H200), one CTA's slice using at least half of its
  // columns; only clusters of at most twice the fewest any pair needs, clusters only for rows
  // past 16 KiB (short rows: one CTA per row, many CTAs per SM). Then several rows per CTA
  // (W = 1, 2, 4 warps a row: 128 or 256 threads for a warp a row, 256 otherwise; the fewest
  // elems that hold the row, at least half used). 2 and 3 stages where they fit. Rows that do
  // not start on a 16-byte pack (ld % v16 != 0) are laid out in virtual columns: v16 - 1 more.
  {
    const int64_t span = p.cols + (p.row_stride() % v16 ? v16 - 1 : 0);
    struct Shape {
      int t, e, c, r;
    };
    std::vector<Shape> shapes;
    int c_min = kMaxCluster + 1;
    for (int t : kPipeThreads)
      for (int mult : {1, 2, 4, 8}) {
        const int e = v16 * mult;
        const int64_t slice = int64_t(t) * e;
        const int64_t c = (span + slice - 1) / slice;  // 9-16: non-portable cluster sizes
        if (c > kMaxCluster || (c - 1) * slice >= p.cols) continue;  // too long for 16 CTAs, or idle CTAs
        if (c == 1 && slice >= 2 * p.cols) continue;                   // most of the slice idle
        if (c > 1 && p.cols * int64_t(size_of(p.in)) <= kPipeMinClusterRowBytes) continue;
        if (2 * int64_t(size_of(p.in)) * slice > kNativeSmemDynamicOptIn) continue;  // not even 2 stages
        NativeSoftmaxConfig cfg{SoftmaxKind::pipe, v16, e, t, int(c), 2, 1};
        if (!cfg.cannot_run(p).empty()) continue;
        shapes.push_back({t, e, int(c), 1});
        c_min = std::min(c_min, int(c));
      }
    for (int w : {1, 2, 4})
      for (int t : {128, 256}) {
        if (w > 1 && t != 256) continue;
        const int r = t / 32 / w;
        if (r < 2) continue;
        for (int mult : {1, 2, 4, 8}) {
          const int e = v16 * mult;
          const int64_t slice = int64_t(32) * w * e;
          if (slice < span) continue;
          if (slice < 2 * p.cols && NativeSoftmaxConfig{SoftmaxKind::pipe, v16, e, t, 1, 2, r}.cannot_run(p).empty())
            shapes.push_back({t, e, 1, r});
          break;
        }
      }
    for (const Shape& sh : shapes) {
      if (sh.c > 2 * c_min) continue;
      for (int st : {2, 3}) {
        NativeSoftmaxConfig cfg{SoftmaxKind::pipe, v16, sh.e, sh.t, sh.c, st, sh.r};
        if (cfg.cannot_run(p).empty()) out.push_back(cfg);
      }
    }
  }
  // row (the row in registers, 16-byte packs in virtual columns, non-persistent): for each P =
  // 1, 2, 4, 8 packs a thread (E = P vec), the fewest threads tw a row (1, 2, 4, 8, 16 lanes, or
  // whole warps) that hold a CTA's even share of the row's np packs, for (a) the fewest CTAs c a
  // row that fit the launch bound (1024 threads, 512 at E = 64), (b) the fewest c whose CTA is at
  // most 256 threads and (c) at most 128 threads (more, smaller CTAs an SM: the CuTe DSL's best
  // long-row shapes on the H200); clusters only for rows past 16 KiB; more than half of a
  // thread's packs used. Rows of fewer than 128 threads: several a CTA (128 and 256 threads).
  // Not for rows of one value (tiny's element-wise path).
  if (p.cols > 1) {
    const int64_t span = p.cols + (p.row_stride() % v16 ? v16 - 1 : 0);
    const int64_t np = (span + v16 - 1) / v16;  // packs a row
    const bool long_row = p.cols * int64_t(size_of(p.in)) > kPipeMinClusterRowBytes;
    for (int P : {1, 2, 4, 8}) {
      const int e = v16 * P, bound = e > 32 ? 512 : 1024;
      std::vector<std::pair<int, int>> picked;  // (c, threads a row)
      for (int limit : {bound, 256, 128})
        for (int c = 1; c <= (long_row ? kMaxCluster : 1); ++c) {
          const int64_t q = (np + c - 1) / c;  // packs a CTA
          if (c > 1 && (c - 1) * q >= np) break;
          int64_t tw = (q + P - 1) / P;
          tw = tw <= 16 ? int64_t(1) << int(std::ceil(std::log2(double(tw)))) : (tw + 31) / 32 * 32;
          if (tw > limit) continue;
          if (2 * q > tw * P && std::find(picked.begin(), picked.end(), std::make_pair(c, int(tw))) == picked.end())
            picked.push_back({c, int(tw)});
          break;
        }
      for (const auto& [c, tw] : picked) {
        std::vector<int> rpbs = {1};
        if (c == 1 && tw < 128) rpbs = {128 / tw, 256 / tw};
        for (int r : rpbs) {
          for (int st : {1, 2}) {  // 2: the next block's loads in flight (512 threads at most)
            NativeSoftmaxConfig cfg{SoftmaxKind::row, v16, e, tw * r, c, st, r};
            if (cfg.cannot_run(p).empty() && std::find(out.begin(), out.end(), cfg) == out.end()) out.push_back(cfg);
          }
        }
      }
    }
  }
  // tiny: rows of at most 1024 columns, `group` lanes a row with the fewest elems (a power of
  // two, <= 8; <= 32 for a warp a row) that hold it, at least half of the group's slots used (a
  // thread a row always). Narrower groups than a warp at more than 8 values a lane would read
  // shared memory with bank conflicts (rows 16-32 values apart in one instruction).
  if (p.cols <= kTinyMaxCols)
    for (int g : {1, 2, 4, 8, 16, 32}) {
      int e = 1;
      while (int64_t(g) * e < p.cols) e *= 2;
      if (e > (g == 32 ? 32 : 8) || (g > 1 && int64_t(g) * e >= 2 * p.cols)) continue;
      NativeSoftmaxConfig cfg{SoftmaxKind::tiny, v16, e, kTinyOfferedThreads, 1};
      cfg.group = g;
      if (cfg.cannot_run(p).empty()) out.push_back(cfg);
    }
  // span: packed rows, y of x's dtype, where the H200 measured it ahead of the other kinds
  // (2026-12-03): rows of 2-16 values in registers (elems > 0: the fewest lanes g, a power of two,
  // that hold the row at <= 8 values a lane, and twice as many at half the values; 3 and 7
  // values: 49-79% of copy, tiny 44-74%; rows of 32 and 64 ran at 53-58% where Triton's rows
  // kernel reached 94%), rows of 257 values to 2 KiB in packs (elems 0: the fewest lanes, 8 ..
  // the CTA, at <= 8 packs a lane, and twice as many; 1001 bf16: 76%, warp 68%; 1001 fp32 (4 KiB)
  // 77% where warp reached 98%, 4096 bf16 62% where pipe reached 81%, 4097 bf16 and longer rows
  // 27-56% where row and pipe reached 48-78%). Each for
  // one CTA an SM (512 threads, ~192 KiB of stages) and two (256 threads, ~96 KiB): the first
  // (chunk KiB, stages) of each list that holds a row a group (more stages: more chunks in flight).
  const int64_t span_row_bytes = p.cols * int64_t(size_of(p.in));
  if (p.in == p.out && p.row_stride() == p.cols && p.cols > 1 && (p.cols <= 16 || (p.cols > 256 && span_row_bytes <= 2048))) {
    const int64_t np = (span_row_bytes + 30) / 16;  // packs a row may span
    std::vector<std::pair<int, int>> shapes;  // (elems, group)
    if (p.cols <= 256) {
      int g = 1;
      while (int64_t(g) * 8 < p.cols) g *= 2;
      int e = 1;
      while (int64_t(g) * e < p.cols) e *= 2;
      shapes.push_back({e, g});
      if (g < 32 && e > 1) shapes.push_back({e / 2, 2 * g});
    } else {
      int g = 2;
      while (int64_t(g) * 8 < np && g < 512) g *= 2;
      shapes.push_back({0, g});
      shapes.push_back({0, 2 * g});
    }
    struct Family {
      int threads;
      std::vector<std::pair<int, int>> chunks;  // (KiB, stages)
    };
    const Family families[] = {{512, {{48, 4}, {72, 3}}}, {256, {{24, 4}, {36, 3}}}};
    for (const auto& [e, g] : shapes)
      for (const Family& f : families) {
        for (const auto& [kib, st] : f.chunks) {
          NativeSoftmaxConfig cfg{SoftmaxKind::span, v16, e, f.threads, 1, st, 1, std::min(g, f.threads), kib};
          if (std::find(out.begin(), out.end(), cfg) != out.end()) break;
          if (cfg.cannot_run(p).empty()) {
            out.push_back(cfg);
            break;
          }
        }
      }
  }
  // flat: packed rows of 2 .. 8 values, y of x's dtype; 128, 256, 512 threads.
  if (p.in == p.out && p.row_stride() == p.cols && p.cols >= 2 && p.cols <= kFlatMaxCols)
    for (int t : {128, 256, 512}) {
      NativeSoftmaxConfig cfg{SoftmaxKind::flat, v16, int(p.cols), t, 1};
      if (cfg.cannot_run(p).empty()) out.push_back(cfg);
    }
  // wide: few long rows, each spread over many CTAs (256 or 512 threads, 2 or 4 packs a thread).
  if (p.rows <= kWideMaxRows && p.cols >= kWideMinCols)
    for (int t : {256, 512})
      for (int mult : {2, 4}) {
        NativeSoftmaxConfig cfg{SoftmaxKind::wide, v16, v16 * mult, t, 1};
        if (cfg.cannot_run(p).empty()) out.push_back(cfg);
      }
  // wide ring (rows of whole packs, at most kRingMaxRows): 512 compute threads, 4 or 8 packs a
  // thread (at most 32 values); 2 or 3 slots (rereading x from L2), and as many slots as fit (they
  // hold a row's items when a CTA's span of a row fits them). On the H200 (8 x 2^22,
  // interleaved) the fewest slots won among the rereading ones (more slots keep more x in L2
  // ahead of its reread: fp32 2 slots 105.2 us, 6 slots 129.2 us) and 8-value slices lost
  // (fp32: 126-166 us).
  if (p.rows <= kRingMaxRows && p.cols >= kWideMinCols && p.row_stride() % v16 == 0 && p.cols % v16 == 0)
    for (int mult : {4, 8}) {
      const int64_t slot = int64_t(512) * v16 * mult * int64_t(size_of(p.in)) + 128;  // + its warps' pairs
      const int most = int(std::min<int64_t>(kRingMaxStages, kNativeSmemDynamicOptIn / slot));
      for (int n : {2, 3, most}) {
        const NativeSoftmaxConfig cfg{SoftmaxKind::wide, v16, v16 * mult, 512, 1, n};
        if (v16 * mult <= 32 && cfg.cannot_run(p).empty() && std::find(out.begin(), out.end(), cfg) == out.end())
          out.push_back(cfg);
      }
    }
  // band (fp32 x, rows of whole packs): 448 compute threads, pieces of 28 KiB, 8 slots, where two
  // rows' chunks less the held pieces fit them on num_sms CTAs (one a SM: the slots take its
  // shared memory). H200 (2026-12-04, interleaved, 8 x 2^22): fp32 96.1 us against the ring's
  // 101.8 (14 KiB pieces with 8 held: 98.9); bf16 77.8 against the ring's 61.1, so not offered
  // for 16-bit x (twice the values a byte to exponentiate, and the ring rereads half the bytes).
  if (p.in == DType::fp32 && p.rows <= kWideMaxRows && p.cols >= kWideMinCols && p.row_stride() % v16 == 0 &&
      p.cols % v16 == 0) {
    const int64_t piece = int64_t(kBandMaxThreads) * kBandPacks * 16;
    const NativeSoftmaxConfig cfg{SoftmaxKind::band, v16, v16 * kBandPacks, kBandMaxThreads, 1,
                                  int(std::min<int64_t>(kBandMaxSlots, kNativeSmemDynamicOptIn / piece))};
    if (cfg.cannot_run(p).empty() && band_fit(cfg, p, num_sms > 0 ? num_sms : 132).empty()) out.push_back(cfg);
  }
  // online: any row longer than tiny's (tiny holds every row of <= 1024 columns in one pass; the
  // online kernel's block a row took 58 ms, 200x tiny's time, for 19M rows of 7 on the H200).
  if (p.cols > kTinyMaxCols)
    for (int t : kOnlineThreads) out.push_back({SoftmaxKind::online, v, 0, t, 1});
  return out;
}

void run_native_softmax(const NativeSoftmaxConfig& c, const SoftmaxProblem& p, const void* in, void* out,
                        cudaStream_t s) {
  p.validate();
  if (std::string why = c.cannot_run(p); !why.empty()) GT_THROW("native softmax: " + c.name() + ": " + why);
  if (c.vec > 1) {
    // tiny moves y in 16-byte packs of its own dtype: 16 bytes for both.
    const auto misaligned = [&](const void* ptr, DType t) {
      const uintptr_t a = reinterpret_cast<uintptr_t>(ptr);
      return a % (size_t(c.vec) * size_of(t)) != 0 ||
             ((c.kind == SoftmaxKind::tiny || c.kind == SoftmaxKind::span || c.kind == SoftmaxKind::flat) && a % 16 != 0);
    };
    if (misaligned(in, p.in) || misaligned(out, p.out))
      GT_THROW("native softmax: " + c.name() + ": x and y must be aligned to " + std::to_string(c.vec) + " elements" +
               (c.kind == SoftmaxKind::tiny || c.kind == SoftmaxKind::span || c.kind == SoftmaxKind::flat ? " and 16 bytes" : ""));
  }
  dispatch(c, p, in, out, s);
}

std::string NativeSoftmaxLaunch::str() const {
  return "grid " + std::to_string(grid) + " x " + std::to_string(threads) + " threads, " + std::to_string(dynamic_smem) +
         " B dynamic smem, cluster " + std::to_string(cluster) + (persistent ? ", persistent" : "") +
         (cooperative ? ", cooperative" : "");
}

NativeSoftmaxLaunch native_softmax_launch(const NativeSoftmaxConfig& c, const SoftmaxProblem& p) {
  if (std::string why = c.cannot_run(p); !why.empty()) GT_THROW("native softmax: " + c.name() + ": " + why);
  NativeSoftmaxLaunch l;
  l.threads = c.threads;
  l.launch_bound = launch_bound(c);
  switch (c.kind) {
    case SoftmaxKind::warp: l.grid = (p.rows + c.rows_per_block() - 1) / c.rows_per_block(); break;
    case SoftmaxKind::online: l.grid = p.rows; break;
    case SoftmaxKind::block:
    case SoftmaxKind::cluster:
    case SoftmaxKind::smem:
      l.cluster = c.cluster;
      l.grid = p.rows * c.cluster;
      break;
    case SoftmaxKind::pipe:
    case SoftmaxKind::row:
      l.cluster = c.cluster;
      l.grid = (p.rows + c.block_rows - 1) / c.block_rows * c.cluster;
      l.persistent = c.kind == SoftmaxKind::row;  // pipe: below
      break;
    case SoftmaxKind::tiny: {
      const int64_t r = tiny_rows(p.cols, int64_t(size_of(p.in)), int64_t(size_of(p.out)));
      l.grid = (p.rows + r - 1) / r;  // chunks: an upper bound (persistent)
      l.dynamic_smem = tiny_smem_bytes(p.cols, int64_t(size_of(p.in)), int64_t(size_of(p.out)));
      l.persistent = true;
      if (p.cols == 1 && p.row_stride() == 1) {  // packed rows of one value: packs from registers (tiny_ones)
        // A CTA per T U packs, not persistent: on the H200 (2026-12-03, 134217728 bf16, interleaved)
        // the full grid streamed at 3.71 TB/s against 3.53 for the resident-capped one, as fast as a
        // plain copy kernel of the same shape (3.76).
        const int64_t per_cta = int64_t(c.threads) * kTinyOnesUnroll * c.vec;
        l.grid = std::clamp<int64_t>((p.rows + per_cta - 1) / per_cta, 1, 0x7fffffff);
        l.dynamic_smem = 0;
        l.persistent = false;
      }
      break;
    }
    case SoftmaxKind::span:
      l.grid = (p.rows + span_rows(c, p) - 1) / span_rows(c, p);  // chunks: an upper bound (persistent)
      l.dynamic_smem = int64_t(c.stages) * span_stage_bytes(c, p);
      l.persistent = true;
      break;
    case SoftmaxKind::flat: {  // a warp a tile of 32 lanes x P rows
      const int64_t rb = p.cols * int64_t(size_of(p.in)), P = flat_lane_rows(p), warps = c.threads / 32;
      l.grid = (p.rows + 32 * P * warps - 1) / (32 * P * warps);
      l.dynamic_smem = warps * 32 * (P * rb);  // each warp's tile
      break;
    }
    case SoftmaxKind::wide:
      if (c.stages > 0) l.threads = c.threads + kRingExtraThreads;  // the ring's control and loader warps
      l.grid = p.rows * wide_slices(c, p);
      l.dynamic_smem = int64_t(c.stages) * c.threads * c.elems * int64_t(size_of(p.in));  // the ring's slots
      if (c.stages > 0) l.dynamic_smem += int64_t(c.stages) * 16 * 8;                    // and its warps' pairs
      l.persistent = true;
      l.cooperative = true;
      break;
    case SoftmaxKind::band:  // at most a CTA a pack of a row (persistent: as many as are resident)
      l.threads = c.threads + kBandExtraThreads;
      l.grid = std::max<int64_t>(1, std::min<int64_t>(p.cols / c.vec, 0x7fffffff));
      l.dynamic_smem = int64_t(c.stages) * c.threads * c.elems * int64_t(size_of(p.in));
      l.persistent = true;
      l.cooperative = true;
      break;
  }
  if (c.kind == SoftmaxKind::smem) l.dynamic_smem = smem_slice(c, p) * int64_t(size_of(p.in));
  if (c.kind == SoftmaxKind::pipe) {
    l.dynamic_smem = int64_t(c.stages) * c.threads * c.elems * int64_t(size_of(p.in));
    l.persistent = true;
  }
  return l;
}

std::string native_softmax_launch_violation(const NativeSoftmaxLaunch& l, const NativeSoftmaxDeviceLimits& lim,
                                            int64_t static_smem, int regs_per_thread) {
  const std::string at = " (" + l.str() + ")";
  if (l.threads < 32 || l.threads % 32) return "threads must be a positive multiple of 32" + at;
  if (l.threads > lim.max_threads_per_block)
    return std::to_string(l.threads) + " threads exceed the device's " + std::to_string(lim.max_threads_per_block) +
           " per block" + at;
  if (l.launch_bound > 0 && l.threads > l.launch_bound)
    return std::to_string(l.threads) + " threads exceed the kernel's __launch_bounds__ " + std::to_string(l.launch_bound) + at;
  if (int64_t(regs_per_thread) * l.threads > lim.regs_per_block)
    return std::to_string(regs_per_thread) + " registers x " + std::to_string(l.threads) + " threads exceed the " +
           std::to_string(lim.regs_per_block) + " registers of a block" + at;
  if (l.grid < 1 || l.grid > lim.max_grid_x) return "grid must be 1 .. " + std::to_string(lim.max_grid_x) + " blocks" + at;
  if (l.cluster < 1 || l.cluster > lim.max_cluster)
    return "cluster must be 1 .. " + std::to_string(lim.max_cluster) + " CTAs" + at;
  if (l.grid % l.cluster) return "grid must be a multiple of the cluster size" + at;
  if (static_smem + l.dynamic_smem > lim.smem_per_block_optin)
    return std::to_string(static_smem) + " B static + " + std::to_string(l.dynamic_smem) +
           " B dynamic shared memory exceed the device's " + std::to_string(lim.smem_per_block_optin) + " B per block" + at;
  if (l.dynamic_smem > kNativeSmemDynamicOptIn)
    return std::to_string(l.dynamic_smem) + " B dynamic shared memory exceed the " +
           std::to_string(kNativeSmemDynamicOptIn) + " B the kernels opt in to" + at;
  return {};
}

std::string native_softmax_device_check(const NativeSoftmaxConfig& c, const SoftmaxProblem& p) {
  try {
    p.validate();
  } catch (const Error& e) {
    return e.message();
  }
  if (std::string why = c.cannot_run(p); !why.empty()) return why;
  Plan pl;
  t_probe = &pl;
  try {
    dispatch(c, p, nullptr, nullptr, nullptr);
  } catch (const Error& e) {
    t_probe = nullptr;
    return e.message();
  }
  t_probe = nullptr;
  if (std::string why = set_attributes(pl); !why.empty()) return why;
  cudaFuncAttributes fa{};
  if (cudaError_t e = cudaFuncGetAttributes(&fa, pl.func); e != cudaSuccess) return cuda_failure(e, "cudaFuncGetAttributes");
  int dev = 0, v = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return cuda_failure(e, "cudaGetDevice");
  NativeSoftmaxDeviceLimits lim;
  const std::pair<cudaDeviceAttr, const char*> attrs[] = {{cudaDevAttrMaxThreadsPerBlock, "MaxThreadsPerBlock"},
                                                          {cudaDevAttrMaxGridDimX, "MaxGridDimX"},
                                                          {cudaDevAttrMaxSharedMemoryPerBlockOptin, "MaxSharedMemoryPerBlockOptin"},
                                                          {cudaDevAttrMaxRegistersPerBlock, "MaxRegistersPerBlock"}};
  for (const auto& [attr, name] : attrs) {
    if (cudaError_t e = cudaDeviceGetAttribute(&v, attr, dev); e != cudaSuccess)
      return cuda_failure(e, std::string("cudaDeviceGetAttribute(") + name + ")");
    if (attr == cudaDevAttrMaxThreadsPerBlock) lim.max_threads_per_block = v;
    else if (attr == cudaDevAttrMaxGridDimX) lim.max_grid_x = v;
    else if (attr == cudaDevAttrMaxSharedMemoryPerBlockOptin) lim.smem_per_block_optin = v;
    else lim.regs_per_block = v;
  }
  const NativeSoftmaxLaunch& l = pl.launch;
  if (l.threads > fa.maxThreadsPerBlock)
    return std::to_string(l.threads) + " threads exceed the " + std::to_string(fa.maxThreadsPerBlock) +
           " this kernel instance can launch (" + std::to_string(fa.numRegs) + " registers a thread)";
  if (std::string why = native_softmax_launch_violation(l, lim, int64_t(fa.sharedSizeBytes), fa.numRegs); !why.empty())
    return why;
  int clusters = 0, per_sm = 0, sms = 0;
  if (std::string why = residency(pl, &clusters, &per_sm, &sms); !why.empty()) {
    if (why.rfind("cannot be resident", 0) == 0)
      return "cannot be resident on this device (" + l.str() + ", " + std::to_string(fa.sharedSizeBytes) +
             " B static smem, " + std::to_string(fa.numRegs) + " registers a thread)";
    return why;
  }
  if (c.kind == SoftmaxKind::band) {  // the chunks on the grid the launch will have
    if (std::string why = clamp_persistent_grid(pl); !why.empty()) return why;
    return band_fit(c, p, pl.launch.grid);
  }
  return {};
}

void set_native_softmax_persistent_cap(int64_t clusters) { g_persistent_cap.store(clusters > 0 ? clusters : 0); }

NativeSoftmaxKernelInfo native_softmax_kernel_info(const NativeSoftmaxConfig& c, const SoftmaxProblem& p) {
  p.validate();
  if (std::string why = c.cannot_run(p); !why.empty()) GT_THROW("native softmax: " + c.name() + ": " + why);
  Plan pl;
  t_probe = &pl;
  try {
    dispatch(c, p, nullptr, nullptr, nullptr);
  } catch (...) {
    t_probe = nullptr;
    throw;
  }
  t_probe = nullptr;
  auto fail = [&](const std::string& why) { GT_THROW("native softmax: " + c.name() + ": " + why); };
  if (std::string why = set_attributes(pl); !why.empty()) fail(why);
  cudaFuncAttributes fa{};
  if (cudaError_t e = cudaFuncGetAttributes(&fa, pl.func); e != cudaSuccess) fail(cuda_failure(e, "cudaFuncGetAttributes"));
  NativeSoftmaxKernelInfo info;
  switch (c.kind) {
    case SoftmaxKind::warp: info.kernel = "softmax_warp_kernel"; break;
    case SoftmaxKind::block:
    case SoftmaxKind::cluster: info.kernel = "softmax_split_kernel"; break;
    case SoftmaxKind::smem: info.kernel = "softmax_smem_kernel"; break;
    case SoftmaxKind::pipe: info.kernel = "softmax_pipe_kernel"; break;
    case SoftmaxKind::online: info.kernel = "softmax_online_kernel"; break;
    case SoftmaxKind::tiny: info.kernel = "softmax_tiny_kernel"; break;
    case SoftmaxKind::wide: info.kernel = c.stages > 0 ? "softmax_ring_kernel" : "softmax_wide_kernel"; break;
    case SoftmaxKind::row: info.kernel = "softmax_row_kernel"; break;
    case SoftmaxKind::span: info.kernel = "softmax_span_kernel"; break;
    case SoftmaxKind::flat: info.kernel = "softmax_flat_kernel"; break;
    case SoftmaxKind::band: info.kernel = "softmax_band_kernel"; break;
  }
  info.regs_per_thread = fa.numRegs;
  info.static_smem = int64_t(fa.sharedSizeBytes);
  info.local_bytes = int64_t(fa.localSizeBytes);
  int sms = 0;
  if (std::string why = residency(pl, &info.active_clusters, &info.blocks_per_sm, &sms); !why.empty()) fail(why);
  if (std::string why = clamp_persistent_grid(pl); !why.empty()) fail(why);
  info.launch = pl.launch;
  return info;
}

}  // namespace gemmtune::native
