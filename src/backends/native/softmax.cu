// Our own CUDA softmax kernels: warp-per-row, block-per-row and online (any cols). See softmax.hpp.
//
// Special values mirror torch.softmax (tests/support/host_softmax.hpp lists the cases):
//   warp, block   M = max, S = sum exp(x - M), y = exp(x - M) / S in IEEE fp32, the formula
//                 torch uses: a NaN, a +Inf (inf - inf) or an all -Inf row (-inf - -inf) puts
//                 NaN into S, so the whole row is NaN; -Inf entries of a finite row give 0.
//   online        a running (m, s) where every exp(a - b) with a == b counts as exp(0) = 1, so
//                 -inf - -inf never poisons a row that later meets a finite max; NaN still
//                 enters s. At the end a row whose max is +-Inf is written NaN (what the
//                 two-pass formula gives), any other row y = exp(x - M) / S (NaN if S is).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "backends/native/softmax.hpp"
#include "core/convert.cuh"
#include "core/cuda.hpp"

namespace gemmtune::native {
namespace {

constexpr int kMaxThreads = 1024;

// ---- element conversion and vector access --------------------------------------------------

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
// (j * stride + t) * VEC) against m and returns their sum.
template <int E, int VEC>
__device__ __forceinline__ float exp_and_sum(float* v, float m, int64_t cols, int64_t stride, int64_t t) {
  float s = 0;
#pragma unroll
  for (int j = 0; j < E / VEC; ++j) {
    const int64_t c0 = (j * stride + t) * VEC;
#pragma unroll
    for (int i = 0; i < VEC; ++i)
      if (c0 + i < cols) {
        v[j * VEC + i] = expf(v[j * VEC + i] - m);
        s += v[j * VEC + i];
      }
  }
  return s;
}

// One warp per row; lane l holds packs j = 0 .. E/VEC-1 at columns (j * 32 + l) * VEC.
// Register budget: 512-thread blocks get 128 registers a thread (E = 32 does not spill).
constexpr int kWarpMaxThreads = 512;
template <int E>
constexpr int block_max_threads() { return E >= 32 ? 512 : kMaxThreads; }

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
  const float s = warp_sum(exp_and_sum<E, VEC>(v, m, cols, 32, lane));
  const float inv = 1.0f / s;
#pragma unroll
  for (int i = 0; i < E; ++i) v[i] *= inv;
#pragma unroll
  for (int j = 0; j < E / VEC; ++j) store<VEC>(y, (int64_t(j) * 32 + lane) * VEC, cols, v + j * VEC);
}

// One block per row; thread t holds packs j = 0 .. E/VEC-1 at columns (j * threads + t) * VEC.
template <class Ti, class To, int E, int VEC>
__global__ void __launch_bounds__(block_max_threads<E>())
    softmax_block_kernel(const Ti* __restrict__ x, To* __restrict__ y, int64_t cols, int64_t ld, float scale) {
  static_assert(VEC >= 1 && E % VEC == 0, "block softmax: elems per thread must be a multiple of the vector width");
  static_assert(VEC * sizeof(Ti) <= 16, "block softmax: one vector load is at most 16 bytes");
  static_assert(E <= 64, "block softmax: at most 64 elements per thread stay in registers");
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  x += row * ld;
  y += row * ld;
  const int64_t t = threadIdx.x, nt = blockDim.x;
  float v[E];
#pragma unroll
  for (int j = 0; j < E / VEC; ++j) load_scaled<VEC>(x, (j * nt + t) * VEC, cols, scale, v + j * VEC);
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < E; ++i) m = fmaxf(m, v[i]);
  m = block_max(m, red);
  const float s = block_sum(exp_and_sum<E, VEC>(v, m, cols, nt, t), red);
  const float inv = 1.0f / s;
#pragma unroll
  for (int i = 0; i < E; ++i) v[i] *= inv;
#pragma unroll
  for (int j = 0; j < E / VEC; ++j) store<VEC>(y, (j * nt + t) * VEC, cols, v + j * VEC);
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
    for (int i = 0; i < VEC; ++i) v[i] = expf(v[i] - m) * inv;
    store<VEC>(y, c0, cols, v);
  }
}

// ---- dispatch --------------------------------------------------------------------------------

template <class Ti>
constexpr int vec16() { return int(16 / sizeof(Ti)); }

int vec16_of(DType t) { return int(16 / size_of(t)); }

template <class Ti, class To, int E, int VEC>
void launch_rows(const NativeSoftmaxConfig& c, const SoftmaxProblem& p, const Ti* x, To* y, cudaStream_t s) {
  if constexpr (E % VEC == 0) {
    const int limit = c.kind == SoftmaxKind::warp ? kWarpMaxThreads : block_max_threads<E>();
    if (c.threads > limit)
      GT_THROW("native softmax: " + c.name() + ": at most " + std::to_string(limit) + " threads for this kind and elems");
    const int64_t ld = p.row_stride();
    if (c.kind == SoftmaxKind::warp) {
      const int64_t rpb = c.rows_per_block();
      const int64_t blocks = (p.rows + rpb - 1) / rpb;
      softmax_warp_kernel<Ti, To, E, VEC><<<unsigned(blocks), unsigned(c.threads), 0, s>>>(x, y, p.rows, p.cols, ld, p.scale);
    } else {
      softmax_block_kernel<Ti, To, E, VEC><<<unsigned(p.rows), unsigned(c.threads), 0, s>>>(x, y, p.cols, ld, p.scale);
    }
  } else {
    GT_THROW("native softmax: " + c.name() + ": elems must be a multiple of vec");
  }
}

template <class Ti, class To, int VEC>
void launch_vec(const NativeSoftmaxConfig& c, const SoftmaxProblem& p, const Ti* x, To* y, cudaStream_t s) {
  if (c.kind == SoftmaxKind::online) {
    softmax_online_kernel<Ti, To, VEC><<<unsigned(p.rows), unsigned(c.threads), 0, s>>>(x, y, p.cols, p.row_stride(), p.scale);
    return;
  }
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

constexpr int kWarpElems[] = {1, 2, 4, 8, 16, 32};
constexpr int kBlockElems[] = {4, 8, 16, 32};
constexpr int kWarpThreads[] = {128, 256, 512};
constexpr int kBlockThreads[] = {128, 256, 512, 1024};
constexpr int kOnlineThreads[] = {256, 512, 1024};

}  // namespace

const char* to_string(SoftmaxKind k) {
  switch (k) {
    case SoftmaxKind::warp: return "warp";
    case SoftmaxKind::block: return "block";
    case SoftmaxKind::online: return "online";
  }
  return "?";
}

int64_t NativeSoftmaxConfig::max_cols() const {
  switch (kind) {
    case SoftmaxKind::warp: return int64_t(32) * elems;
    case SoftmaxKind::block: return int64_t(threads) * elems;
    case SoftmaxKind::online: return -1;
  }
  return 0;
}

std::string NativeSoftmaxConfig::name() const {
  std::string n = std::string(to_string(kind)) + "_v" + std::to_string(vec);
  if (kind != SoftmaxKind::online) n += "_e" + std::to_string(elems);
  return n + "_t" + std::to_string(threads);
}

std::vector<NativeSoftmaxConfig> native_softmax_configs(const SoftmaxProblem& p) {
  p.validate();
  std::vector<NativeSoftmaxConfig> out;
  const int v16 = vec16_of(p.in);
  const int64_t ld = p.row_stride();
  // Vector widths: 1 always; 16 bytes when every row starts on a whole pack (ld % v16 == 0).
  std::vector<int> vecs{1};
  if (ld % v16 == 0) vecs.push_back(v16);
  // The fewest elems per thread (a multiple of v) for which `threads` threads hold the row.
  auto fewest = [&](const auto& elems, int64_t threads, int v) {
    for (int e : elems)
      if (e % v == 0 && threads * e >= p.cols) return e;
    return 0;
  };
  // warp: one row per warp (cols <= 1024).
  for (int v : vecs)
    if (int e = fewest(kWarpElems, 32, v))
      for (int t : kWarpThreads) out.push_back({SoftmaxKind::warp, v, e, t});
  // block: rows too long for one warp, blocks no wider than the row.
  if (p.cols > 32)
    for (int t : kBlockThreads) {
      if (t > p.cols) continue;
      for (int v : vecs)
        if (int e = fewest(kBlockElems, t, v); e && !(e >= 32 && t > 512))  // E = 32: 512 threads at most
          out.push_back({SoftmaxKind::block, v, e, t});
    }
  // online: any row.
  for (int v : vecs)
    for (int t : kOnlineThreads) out.push_back({SoftmaxKind::online, v, 0, t});
  return out;
}

void run_native_softmax(const NativeSoftmaxConfig& c, const SoftmaxProblem& p, const void* in, void* out,
                        cudaStream_t s) {
  p.validate();
  const std::string name = c.name();
  if (c.threads < 32 || c.threads > kMaxThreads || c.threads % 32)
    GT_THROW("native softmax: " + name + ": threads must be a multiple of 32 in [32, 1024]");
  if (c.max_cols() >= 0 && p.cols > c.max_cols())
    GT_THROW("native softmax: " + name + " holds rows of at most " + std::to_string(c.max_cols()) + " columns, not " +
             std::to_string(p.cols));
  if ((p.rows + c.rows_per_block() - 1) / c.rows_per_block() > int64_t(0x7fffffff))
    GT_THROW("native softmax: " + name + ": too many rows for one grid (2^31 - 1 blocks of " +
             std::to_string(c.rows_per_block()) + " rows)");
  if (c.vec > 1) {
    const auto misaligned = [&](const void* ptr, DType t) {
      return reinterpret_cast<uintptr_t>(ptr) % (size_t(c.vec) * size_of(t)) != 0;
    };
    if (p.row_stride() % c.vec)
      GT_THROW("native softmax: " + name + ": ld = " + std::to_string(p.row_stride()) + " is not a multiple of vec");
    if (misaligned(in, p.in) || misaligned(out, p.out))
      GT_THROW("native softmax: " + name + ": x and y must be aligned to " + std::to_string(c.vec) + " elements");
  }
  switch (p.in) {
    case DType::bf16: launch_in<__nv_bfloat16>(c, p, in, out, s); break;
    case DType::fp16: launch_in<__half>(c, p, in, out, s); break;
    case DType::fp32: launch_in<float>(c, p, in, out, s); break;
    default: GT_THROW(std::string("softmax.in: ") + to_string(p.in) + " is not supported");
  }
  GT_CUDA(cudaGetLastError());
}

}  // namespace gemmtune::native
