// Verification: a plain tiled CUDA reference GEMM (fp32 accumulation, the full epilogue) and a
// two-pass element-wise comparison of a candidate's D with it.
#include "tune/verify.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "core/cuda.hpp"

namespace gemmtune {
namespace {

// ---- element access ---------------------------------------------------------------------

// Element i of a buffer of `dt`, widened exactly to fp32 (every input format is a subset).
__device__ inline float load_as_float(const void* base, DType dt, int64_t i) {
  switch (dt) {
    case DType::bf16: return __uint_as_float(uint32_t(static_cast<const uint16_t*>(base)[i]) << 16);
    case DType::fp16: return __half2float(__ushort_as_half(static_cast<const unsigned short*>(base)[i]));
    case DType::fp32: return static_cast<const float*>(base)[i];
    case DType::e4m3:
      return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<const __nv_fp8_storage_t*>(base)[i], __NV_E4M3)));
    case DType::e5m2:
      return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<const __nv_fp8_storage_t*>(base)[i], __NV_E5M2)));
  }
  return 0.0f;
}

// Offset of element (r, c) of a matrix with the given layout and leading dimension.
__host__ __device__ inline int64_t offset(bool row_major, int64_t ld, int64_t r, int64_t c) {
  return row_major ? r * ld + c : c * ld + r;
}

__device__ inline float activate(Activation act, float x) {
  switch (act) {
    case Activation::none: return x;
    case Activation::relu: return x > 0.0f ? x : 0.0f;
    case Activation::gelu_tanh: {
      const float kSqrt2OverPi = 0.7978845608028654f;
      return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
    }
    case Activation::silu: return x / (1.0f + expf(-x));  // x -> -inf: x / inf = -0
  }
  return x;
}

// ---- reference GEMM -----------------------------------------------------------------------

struct RefParams {
  int64_t m, n, k;
  const void* a; DType a_dt; bool a_row; int64_t lda;
  const void* b; DType b_dt; bool b_row; int64_t ldb;
  const void* c; DType c_dt; bool c_row; int64_t ldc;  // c null: no beta * C term
  const void* bias; DType bias_dt;                     // null: no bias
  const float* sa; const float* sb; ScaleMode scale;
  int64_t ldsb;                                        // block scales: sb's leading dimension
  float alpha, beta;
  Activation act;
  float* ref;  // [m, n] packed row-major
};

// Block tile BM x BN, k-step BK; 16 x 16 threads, each owning TM x TN outputs at rows
// ty + 16 i and cols tx + 16 j (strided, so shared-memory reads are conflict-free broadcasts).
constexpr int BM = 128, BN = 128, BK = 16, TM = BM / 16, TN = BN / 16, kRefThreads = 256;

__global__ void __launch_bounds__(kRefThreads) reference_kernel(RefParams q, int64_t tiles_n, int64_t tiles) {
  // [kk][row] / [kk][col], +1 padding so the transposing stores of either layout spread over banks.
  __shared__ float As[BK][BM + 1];
  __shared__ float Bs[BK][BN + 1];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;

  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t m0 = (tile / tiles_n) * BM, n0 = (tile % tiles_n) * BN;
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    for (int64_t k0 = 0; k0 < q.k; k0 += BK) {
      // A tile [BM x BK]: the contiguous index of the layout varies fastest across threads.
      for (int idx = tid; idx < BM * BK; idx += kRefThreads) {
        const int r = q.a_row ? idx / BK : idx % BM;
        const int kk = q.a_row ? idx % BK : idx / BM;
        const int64_t gr = m0 + r, gk = k0 + kk;
        float v = (gr < q.m && gk < q.k) ? load_as_float(q.a, q.a_dt, offset(q.a_row, q.lda, gr, gk)) : 0.0f;
        // Block scales multiply the inputs here (exact math: sum_k sa a sb b over each k block
        // equals sa sb times its partial sum; fp32 rounding of the product is far below the
        // tolerance). sa is M-major: sa[kb * m + row].
        if (q.scale == ScaleMode::block && v != 0.0f) v *= q.sa[(gk / kScaleBlock) * q.m + gr];
        As[kk][r] = v;
      }
      // B tile [BK x BN].
      for (int idx = tid; idx < BK * BN; idx += kRefThreads) {
        const int c = q.b_row ? idx % BN : idx / BK;
        const int kk = q.b_row ? idx / BN : idx % BK;
        const int64_t gk = k0 + kk, gc = n0 + c;
        float v = (gk < q.k && gc < q.n) ? load_as_float(q.b, q.b_dt, offset(q.b_row, q.ldb, gk, gc)) : 0.0f;
        // sb is [nb, ldsb] row-major: sb[(col / 128) * ldsb + kb].
        if (q.scale == ScaleMode::block && v != 0.0f) v *= q.sb[(gc / kScaleBlock) * q.ldsb + gk / kScaleBlock];
        Bs[kk][c] = v;
      }
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < BK; ++kk) {
        float av[TM], bv[TN];
#pragma unroll
        for (int i = 0; i < TM; ++i) av[i] = As[kk][ty + 16 * i];
#pragma unroll
        for (int j = 0; j < TN; ++j) bv[j] = Bs[kk][tx + 16 * j];
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
      }
      __syncthreads();
    }

    // Epilogue: act(alpha * sa * sb * acc + beta * C + bias), all in fp32.
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int64_t r = m0 + ty + 16 * i;
      if (r >= q.m) continue;
      // Tensorwise and rowwise scales apply here; block scales were applied to the inputs.
      const bool epi_scale = q.scale == ScaleMode::tensorwise || q.scale == ScaleMode::rowwise;
      const float sa = epi_scale ? q.sa[q.scale == ScaleMode::rowwise ? r : 0] : 1.0f;
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const int64_t c = n0 + tx + 16 * j;
        if (c >= q.n) continue;
        const float sb = epi_scale ? q.sb[q.scale == ScaleMode::rowwise ? c : 0] : 1.0f;
        float v = q.alpha * sa * sb * acc[i][j];
        if (q.c) v = fmaf(q.beta, load_as_float(q.c, q.c_dt, offset(q.c_row, q.ldc, r, c)), v);
        if (q.bias) v += load_as_float(q.bias, q.bias_dt, c);
        q.ref[r * q.n + c] = activate(q.act, v);
      }
    }
  }
}

// ---- comparison ---------------------------------------------------------------------------

constexpr int kCmpThreads = 256;
constexpr int64_t kCmpMaxBlocks = 1024;

struct CmpView {
  int64_t m, n;
  const void* d; DType d_dt; bool d_row; int64_t ldd;
  const float* ref;  // [m, n] packed row-major
};

struct Pass1 {  // per block
  double ref2, err2;          // sums over elements with finite ref (err2: and finite d)
  long long nonfinite;        // d non-finite where ref is finite
  long long ref_nonfinite;    // ref non-finite
  long long ref_finite;       // elements with finite ref
};

struct Pass2 {  // per block
  double worst;               // max |d - r| / bound (inf for NaN/Inf d or bound 0 < diff)
  long long worst_index;      // row-major index of the first element reaching `worst`; -1 none
  long long bad;              // elements over bound
};

__device__ inline float load_d(const CmpView& v, int64_t i) {
  const int64_t r = i / v.n, c = i % v.n;
  return load_as_float(v.d, v.d_dt, offset(v.d_row, v.ldd, r, c));
}

template <class T>
__device__ T block_sum(T x, T* sh) {
  sh[threadIdx.x] = x;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  T r = sh[0];
  __syncthreads();
  return r;
}

__global__ void __launch_bounds__(kCmpThreads) compare_pass1(CmpView v, Pass1* out) {
  __shared__ double shd[kCmpThreads];
  __shared__ long long shl[kCmpThreads];
  double ref2 = 0, err2 = 0;
  long long nonfinite = 0, ref_nonfinite = 0, ref_finite = 0;
  const int64_t total = v.m * v.n;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const double r = v.ref[i], d = load_d(v, i);
    if (!isfinite(r)) {
      ++ref_nonfinite;
      continue;
    }
    ++ref_finite;
    ref2 += r * r;
    if (isfinite(d)) err2 += (d - r) * (d - r);
    else ++nonfinite;
  }
  Pass1 p;
  p.ref2 = block_sum(ref2, shd);
  p.err2 = block_sum(err2, shd);
  p.nonfinite = block_sum(nonfinite, shl);
  p.ref_nonfinite = block_sum(ref_nonfinite, shl);
  p.ref_finite = block_sum(ref_finite, shl);
  if (threadIdx.x == 0) out[blockIdx.x] = p;
}

__global__ void __launch_bounds__(kCmpThreads) compare_pass2(CmpView v, double elem_rel, double abs_bound, Pass2* out) {
  __shared__ double sh_worst[kCmpThreads];
  __shared__ long long sh_index[kCmpThreads];
  __shared__ long long sh_bad[kCmpThreads];
  double worst = 0;
  long long worst_index = -1, bad = 0;
  const int64_t total = v.m * v.n;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const double r = v.ref[i], d = load_d(v, i);
    double ratio;
    if (!isfinite(r)) {
      // A non-finite reference matches only the same non-finite value.
      ratio = ((isnan(r) && isnan(d)) || r == d) ? 0.0 : INFINITY;
    } else {
      const double diff = fabs(d - r);  // NaN when d is NaN
      const double bound = elem_rel * fabs(r) + abs_bound;
      if (!isfinite(diff)) ratio = INFINITY;  // NaN compares false: handled explicitly
      else if (diff == 0.0) ratio = 0.0;
      else ratio = bound > 0.0 ? diff / bound : INFINITY;
    }
    if (ratio > 1.0) ++bad;
    if (ratio > worst) {  // strictly greater: the first (lowest) index per thread wins ties
      worst = ratio;
      worst_index = i;
    }
  }
  sh_worst[threadIdx.x] = worst;
  sh_index[threadIdx.x] = worst_index;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) {
      const double w2 = sh_worst[threadIdx.x + s];
      const long long i2 = sh_index[threadIdx.x + s];
      const bool take = w2 > sh_worst[threadIdx.x] ||
                        (w2 == sh_worst[threadIdx.x] && i2 >= 0 && (sh_index[threadIdx.x] < 0 || i2 < sh_index[threadIdx.x]));
      if (take) {
        sh_worst[threadIdx.x] = w2;
        sh_index[threadIdx.x] = i2;
      }
    }
    __syncthreads();
  }
  const long long total_bad = block_sum(bad, sh_bad);
  if (threadIdx.x == 0) out[blockIdx.x] = Pass2{sh_worst[0], sh_index[0], total_bad};
}

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

}  // namespace

// ---- tolerances ---------------------------------------------------------------------------
//
// The candidate and the reference read the same input bits and both accumulate in fp32, so
// what may legitimately differ is:
//   o  rounding of D to its dtype: at most one unit roundoff u_out relative (round to nearest),
//      plus whatever lower-precision epilogue steps a kernel takes (alpha * acc, + beta * C,
//      + bias each rounded): allow 4 u_out per element (2 ulps), 2.5 u_out in norm (the rms
//      of round-to-nearest error is about u_out / sqrt(3), so that is a ~4x margin);
//   t  tf32: each fp32 input truncated / rounded to 10 mantissa bits (relative error up to
//      2^-10 each when truncated, mean 2^-11): the products carry a bias of ~2^-10 of |D| plus
//      a random part of ~4e-4 rms(D) (up to ~6 sigma over 2^28 elements): 4t in norm and
//      relative, 8t absolute, i.e. ~4e-3 / 8e-3 with a 2-4x margin;
//   a  accumulation order (split-k, MMA blocking, fp32 FMA vs. truncating tensor-core adds):
//      random-walk error ~ sqrt(k) * eps_fp32 of rms(D) per operand; with margin for
//      truncation bias and 4-sigma tails: 16 * 2^-24 * sqrt(k) (k = 4096: 6e-5; 16384: 1.2e-4),
//      floored at k = 16;
//   f  gelu / silu: fast tanh / exp approximations (tanh.approx.f32 is good to ~2^-11 rel).
// fp16 x fp16 and bf16 x bf16 products are exact in fp32, as are fp8 products, so fp8 inputs
// cost nothing beyond accumulation and output rounding. Note: fp8 "fast accumulation"
// (Hopper's ~14-bit FP8 MMA accumulator without promotion) can exceed these bounds at large
// k for fp16 / fp32 outputs; such kernels then fail verification, which is intended.
// Elements near zero get an absolute allowance of elem_abs * rms(ref): 2 u_out (cancellation
// in a rounded epilogue) + 8t + 4a + f.
Tolerance tolerance_for(const GemmProblem& p) {
  double o = 0;
  switch (p.d.dtype) {
    case DType::bf16: o = 0x1p-8; break;   // 8 significant bits
    case DType::fp16: o = 0x1p-11; break;  // 11
    case DType::fp32: o = 0x1p-24; break;  // 24
    case DType::e4m3: o = 0x1p-4; break;   // 4
    case DType::e5m2: o = 0x1p-3; break;   // 3
  }
  const bool fp32_in = p.a.dtype == DType::fp32 || p.b.dtype == DType::fp32;
  const double t = (fp32_in && p.tf32) ? 0x1p-10 : 0.0;
  const double a = 16.0 * 0x1p-24 * std::sqrt(double(std::max<int64_t>(p.k, 16)));
  const double f = (p.act == Activation::gelu_tanh || p.act == Activation::silu) ? 0x1p-11 : 0.0;
  // Hopper's fp8 MMA accumulates with fewer than fp32's bits (about 14 effective bits of sum
  // before the kernel promotes to fp32): with fp32 output this, not D's rounding, dominates.
  // Measured on the H200: rel err 7.9e-5, worst element 1.27x the fp32 bound at k = 4096.
  const double q = (is_fp8(p.a.dtype) || is_fp8(p.b.dtype)) ? 0x1p-13 : 0.0;
  Tolerance tol;
  tol.rel_norm = 2.5 * o + 4 * t + 2 * a + f + 2 * q;
  tol.elem_rel = 4 * o + 4 * t + f;
  tol.elem_abs = 2 * o + 8 * t + 4 * a + f + 4 * q;
  return tol;
}

// ---- entry points -------------------------------------------------------------------------

void reference_gemm(const GemmProblem& p, const GemmArgs& args, float* ref, cudaStream_t s) {
  GT_CHECK(p.m >= 1 && p.n >= 1 && p.k >= 1, "reference_gemm: m, n, k must be >= 1");
  GT_CHECK(ref != nullptr, "reference_gemm: null output");
  GT_CHECK(args.a != nullptr && args.b != nullptr, "reference_gemm: A and B are required");
  GT_CHECK(!p.uses_c() || args.c != nullptr, "reference_gemm: beta != 0 needs C");
  GT_CHECK(!p.bias || args.bias != nullptr, "reference_gemm: bias needs a bias pointer");
  GT_CHECK(p.scale == ScaleMode::none || (args.scale_a != nullptr && args.scale_b != nullptr),
           "reference_gemm: scales need scale_a and scale_b");
  RefParams q{};
  q.m = p.m; q.n = p.n; q.k = p.k;
  q.a = args.a; q.a_dt = p.a.dtype; q.a_row = p.a.layout == Layout::row; q.lda = p.lda();
  q.b = args.b; q.b_dt = p.b.dtype; q.b_row = p.b.layout == Layout::row; q.ldb = p.ldb();
  if (p.uses_c()) {  // C has D's dtype, its own layout and ldc
    q.c = args.c; q.c_dt = p.d.dtype; q.c_row = p.c.layout == Layout::row; q.ldc = p.ldc();
  }
  if (p.bias) { q.bias = args.bias; q.bias_dt = p.d.dtype; }
  q.sa = args.scale_a; q.sb = args.scale_b; q.scale = p.scale; q.ldsb = p.scale_b_ld();
  q.alpha = p.alpha; q.beta = p.beta; q.act = p.act;
  q.ref = ref;
  const int64_t tiles_n = (p.n + BN - 1) / BN, tiles = ((p.m + BM - 1) / BM) * tiles_n;
  const int blocks = int(std::min<int64_t>(tiles, std::numeric_limits<int>::max()));
  reference_kernel<<<blocks, kRefThreads, 0, s>>>(q, tiles_n, tiles);
  GT_CUDA(cudaGetLastError());
}

CheckResult compare(const GemmProblem& p, const void* d, const float* ref, cudaStream_t s) {
  GT_CHECK(d != nullptr && ref != nullptr, "compare: null D or reference");
  CheckResult res;
  const int64_t total = p.m * p.n;
  if (total <= 0) {
    res.ok = true;
    return res;
  }
  const CmpView v{p.m, p.n, d, p.d.dtype, p.d.layout == Layout::row, p.ldd(), ref};
  const int blocks = int(std::min<int64_t>((total + kCmpThreads - 1) / kCmpThreads, kCmpMaxBlocks));
  DeviceBuffer part1(sizeof(Pass1) * blocks), part2(sizeof(Pass2) * blocks);

  // Pass 1: norms and non-finite counts (summed on the host in block order: deterministic).
  compare_pass1<<<blocks, kCmpThreads, 0, s>>>(v, part1.as<Pass1>());
  GT_CUDA(cudaGetLastError());
  std::vector<Pass1> h1(blocks);
  GT_CUDA(cudaMemcpyAsync(h1.data(), part1.get(), sizeof(Pass1) * blocks, cudaMemcpyDeviceToHost, s));
  GT_CUDA(cudaStreamSynchronize(s));
  double ref2 = 0, err2 = 0;
  int64_t ref_nonfinite = 0, ref_finite = 0;
  for (const Pass1& b : h1) {
    ref2 += b.ref2;
    err2 += b.err2;
    res.nonfinite += b.nonfinite;
    ref_nonfinite += b.ref_nonfinite;
    ref_finite += b.ref_finite;
  }
  const double rms = ref_finite > 0 ? std::sqrt(ref2 / double(ref_finite)) : 0.0;
  res.rel_err = ref2 > 0 ? std::sqrt(err2 / ref2) : (err2 > 0 ? INFINITY : 0.0);

  // Pass 2: element bounds against rms(ref).
  const Tolerance tol = tolerance_for(p);
  compare_pass2<<<blocks, kCmpThreads, 0, s>>>(v, tol.elem_rel, tol.elem_abs * rms, part2.as<Pass2>());
  GT_CUDA(cudaGetLastError());
  std::vector<Pass2> h2(blocks);
  GT_CUDA(cudaMemcpyAsync(h2.data(), part2.get(), sizeof(Pass2) * blocks, cudaMemcpyDeviceToHost, s));
  GT_CUDA(cudaStreamSynchronize(s));
  int64_t worst_index = -1;
  for (const Pass2& b : h2) {
    res.bad += b.bad;
    if (b.worst_index >= 0 && (b.worst > res.worst_ratio || (b.worst == res.worst_ratio && b.worst_index < worst_index))) {
      res.worst_ratio = b.worst;
      worst_index = b.worst_index;
    }
  }

  res.ok = res.bad == 0 && res.nonfinite == 0 && res.rel_err <= tol.rel_norm;
  if (!res.ok) {
    std::string r = std::to_string(res.bad) + " of " + std::to_string(total) + " elements over bound";
    if (worst_index >= 0 && res.worst_ratio > 0)
      r += " (worst " + (std::isfinite(res.worst_ratio) ? fmt("%.3g", res.worst_ratio) + "x" : std::string("non-finite")) +
           " at row " + std::to_string(worst_index / p.n) + ", col " + std::to_string(worst_index % p.n) + ")";
    r += "; " + std::to_string(res.nonfinite) + " non-finite";
    if (!(res.rel_err <= tol.rel_norm))
      r += "; relative error " + fmt("%.3g", res.rel_err) + " > " + fmt("%.3g", tol.rel_norm);
    if (ref_nonfinite > 0) r += "; reference has " + std::to_string(ref_nonfinite) + " non-finite values";
    res.reason = r;
  }
  return res;
}

}  // namespace gemmtune
