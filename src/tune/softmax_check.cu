// Softmax operands, the float64 GPU reference and the element-wise check (softmax_check.hpp).
#include "tune/softmax_check.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/convert.cuh"
#include "gemmtune/error.hpp"
#include "tune/operands.hpp"

namespace gemmtune {
namespace {

constexpr int kThreads = 256;

__device__ inline double load_elem(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::bf16: return double(to_float(static_cast<const __nv_bfloat16*>(base)[i]));
    case DType::fp16: return double(to_float(static_cast<const __half*>(base)[i]));
    default: return double(static_cast<const float*>(base)[i]);
  }
}
__device__ inline void store_elem(void* base, DType t, int64_t i, float v) {
  switch (t) {
    case DType::bf16: static_cast<__nv_bfloat16*>(base)[i] = from_float<__nv_bfloat16>(v); break;
    case DType::fp16: static_cast<__half*>(base)[i] = from_float<__half>(v); break;
    default: static_cast<float*>(base)[i] = v; break;
  }
}
// s * x as every kernel forms it: the fp32 product of the fp32 scale and the input's value.
__device__ inline double scaled(float scale, double x) { return double(scale * float(x)); }

__device__ inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Block-wide reductions (blockDim.x == kThreads); every thread gets the result.
template <class T, class F>
__device__ T block_reduce(T v, F op, T* sh) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  T r = sh[0];
  for (int w = 1; w < kThreads / 32; ++w) r = op(r, sh[w]);
  __syncthreads();
  return r;
}

// Padding between cols and ld: NaN. Special rows: see SoftmaxOperands.
__global__ void prepare_x_kernel(void* x, DType t, int64_t rows, int64_t cols, int64_t ld, uint64_t key, bool specials) {
  const int64_t r = blockIdx.x;
  const int64_t base = r * ld;
  for (int64_t c = cols + threadIdx.x; c < ld; c += blockDim.x) store_elem(x, t, base + c, NAN);
  if (!specials || rows < 8) return;
  const int kind = int(r % 8);
  const int64_t at = int64_t(mix64(key + uint64_t(r)) % uint64_t(cols));
  switch (kind) {
    case 1: if (threadIdx.x == 0) store_elem(x, t, base + at, NAN); break;
    case 2: if (threadIdx.x == 0) store_elem(x, t, base + at, INFINITY); break;
    case 3: for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) store_elem(x, t, base + c, -INFINITY); break;
    case 4: for (int64_t c = 1 + 2 * int64_t(threadIdx.x); c < cols; c += 2 * int64_t(blockDim.x)) store_elem(x, t, base + c, -INFINITY); break;
    case 5:
      if (threadIdx.x == 0) {
        store_elem(x, t, base + at, -INFINITY);
        if (cols > 1) store_elem(x, t, base + (at + 1) % cols, 1e4f);
      }
      break;
    default: break;
  }
}

// One block per row, float64: M (NaN ignored), S = sum exp(v - M), y = exp(v - M) / S. A row
// with a NaN, a +Inf or only -Inf is NaN throughout (what torch's formula gives).
__global__ void __launch_bounds__(kThreads)
    reference_kernel(const void* x, DType t, int64_t cols, int64_t ld, float scale, float* ref, double* row_max) {
  __shared__ double shd[kThreads / 32];
  __shared__ int shi[kThreads / 32];
  const int64_t r = blockIdx.x;
  const int64_t base = r * ld;
  double m = -INFINITY;
  int nan = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const double v = scaled(scale, load_elem(x, t, base + c));
    if (isnan(v)) nan = 1;
    else m = fmax(m, v);
  }
  m = block_reduce(m, [](double a, double b) { return fmax(a, b); }, shd);
  nan = block_reduce(nan, [](int a, int b) { return a | b; }, shi);
  if (threadIdx.x == 0) row_max[r] = m;
  float* out = ref + r * cols;
  if (nan || isinf(m)) {
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[c] = NAN;
    return;
  }
  double s = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += exp(scaled(scale, load_elem(x, t, base + c)) - m);
  s = block_reduce(s, [](double a, double b) { return a + b; }, shd);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    out[c] = float(exp(scaled(scale, load_elem(x, t, base + c)) - m) / s);
}

struct CmpTotals {
  unsigned long long bad;        // elements over their bound (NaN mismatches included)
  unsigned long long nonfinite;  // NaN / Inf in y where the reference is finite
  unsigned long long pad_bad;    // padding elements that lost the poison
  unsigned long long worst;      // (float bits of the worst ratio) << 32 | row
  double err2, ref2;             // sum (y - ref)^2, sum ref^2 over the finite reference
};

__device__ inline bool all_ones(const void* y, DType t, int64_t i) {
  if (t == DType::fp32) return static_cast<const uint32_t*>(y)[i] == 0xffffffffu;
  return static_cast<const uint16_t*>(y)[i] == 0xffffu;
}

__global__ void __launch_bounds__(kThreads)
    compare_kernel(const void* x, const void* y, DType tin, DType tout, int out_bits, int64_t cols, int64_t ld,
                   float scale, const float* ref, const double* row_max, CmpTotals* tot) {
  __shared__ double shd[kThreads / 32];
  __shared__ unsigned long long shu[kThreads / 32];
  const int64_t r = blockIdx.x;
  const double m = row_max[r];
  unsigned long long bad = 0, nonfinite = 0, pad_bad = 0;
  float worst = 0;
  double err2 = 0, ref2 = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const double want = ref[r * cols + c];
    const double got = load_elem(y, tout, r * ld + c);
    double ratio;
    if (isnan(want)) {
      ratio = isnan(got) ? 0.0 : INFINITY;
    } else if (!isfinite(got)) {
      ratio = INFINITY;
      ++nonfinite;
    } else {
      const double diff = fabs(got - want);
      const double sx = scaled(scale, load_elem(x, tin, r * ld + c));
      const double bound = softmax_elem_bound(out_bits, cols, want, isfinite(sx) ? sx : 0.0, m);
      ratio = diff == 0 ? 0.0 : diff / bound;
      err2 += diff * diff;
      ref2 += want * want;
    }
    if (ratio > 1) ++bad;
    worst = fmaxf(worst, ratio > 3e38 ? INFINITY : float(ratio));
  }
  for (int64_t c = cols + threadIdx.x; c < ld; c += blockDim.x) pad_bad += !all_ones(y, tout, r * ld + c);
  auto add = [](unsigned long long a, unsigned long long b) { return a + b; };
  bad = block_reduce(bad, add, shu);
  nonfinite = block_reduce(nonfinite, add, shu);
  pad_bad = block_reduce(pad_bad, add, shu);
  const unsigned long long wkey = (static_cast<unsigned long long>(__float_as_uint(worst)) << 32) | uint64_t(r);
  const unsigned long long wmax = block_reduce(wkey, [](unsigned long long a, unsigned long long b) { return a > b ? a : b; }, shu);
  err2 = block_reduce(err2, [](double a, double b) { return a + b; }, shd);
  ref2 = block_reduce(ref2, [](double a, double b) { return a + b; }, shd);
  if (threadIdx.x == 0) {
    if (bad) atomicAdd(&tot->bad, bad);
    if (nonfinite) atomicAdd(&tot->nonfinite, nonfinite);
    if (pad_bad) atomicAdd(&tot->pad_bad, pad_bad);
    atomicMax(&tot->worst, wmax);
    atomicAdd(&tot->err2, err2);
    atomicAdd(&tot->ref2, ref2);
  }
}

double host_elem(const std::vector<uint8_t>& bytes, DType t, int64_t i) {
  if (t == DType::fp32) {
    float f;
    std::memcpy(&f, bytes.data() + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, bytes.data() + 2 * i, 2);
  if (t == DType::bf16) {
    const uint32_t u = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  // fp16 -> double
  const int sign = h >> 15, e = (h >> 10) & 31, mant = h & 1023;
  double v = e == 0 ? std::ldexp(double(mant), -24) : e == 31 ? (mant ? NAN : INFINITY) : std::ldexp(double(mant | 1024), e - 25);
  return sign ? -v : v;
}

}  // namespace

int softmax_out_bits(DType out) { return out == DType::bf16 ? 8 : out == DType::fp16 ? 11 : 24; }

SoftmaxOperands::SoftmaxOperands(const SoftmaxProblem& p, uint64_t seed, cudaStream_t s, bool specials) : p_(p) {
  p.validate();
  const size_t n = size_t(p.elems());
  x_ = DeviceBuffer(n * size_of(p.in));
  y_ = DeviceBuffer(n * size_of(p.out));
  fill_random(x_.get(), p.in, p.elems(), seed, 8.0f, s);
  if (p.row_stride() > p.cols || specials) {
    prepare_x_kernel<<<unsigned(p.rows), kThreads, 0, s>>>(x_.get(), p.in, p.rows, p.cols, p.row_stride(), seed,
                                                         specials);
    GT_CUDA(cudaGetLastError());
  }
  poison_outputs(s);
}

void SoftmaxOperands::poison_outputs(cudaStream_t s) const { GT_CUDA(cudaMemsetAsync(y_.get(), 0xff, y_.bytes(), s)); }

void reference_softmax(const SoftmaxProblem& p, const void* x, float* ref, double* row_max, cudaStream_t s) {
  p.validate();
  GT_CHECK(x && ref && row_max, "reference_softmax: null pointer");
  GT_CHECK(p.rows <= int64_t(0x7fffffff), "reference_softmax: more than 2^31 - 1 rows");
  reference_kernel<<<unsigned(p.rows), kThreads, 0, s>>>(x, p.in, p.cols, p.row_stride(), p.scale, ref, row_max);
  GT_CUDA(cudaGetLastError());
}

CheckResult compare_softmax(const SoftmaxProblem& p, const void* x, const void* y, const float* ref,
                            const double* row_max, cudaStream_t s) {
  DeviceBuffer dtot(sizeof(CmpTotals));
  GT_CUDA(cudaMemsetAsync(dtot.get(), 0, sizeof(CmpTotals), s));
  compare_kernel<<<unsigned(p.rows), kThreads, 0, s>>>(x, y, p.in, p.out, softmax_out_bits(p.out), p.cols,
                                                     p.row_stride(), p.scale, ref, row_max, dtot.as<CmpTotals>());
  GT_CUDA(cudaGetLastError());
  CmpTotals t{};
  GT_CUDA(cudaMemcpyAsync(&t, dtot.get(), sizeof t, cudaMemcpyDeviceToHost, s));
  GT_CUDA(cudaStreamSynchronize(s));
  CheckResult res;
  res.bad = int64_t(t.bad);
  res.nonfinite = int64_t(t.nonfinite);
  res.rel_err = t.ref2 > 0 ? std::sqrt(t.err2 / t.ref2) : 0.0;
  uint32_t wbits = uint32_t(t.worst >> 32);
  float worst;
  std::memcpy(&worst, &wbits, 4);
  res.worst_ratio = worst;
  res.ok = t.bad == 0 && t.pad_bad == 0;
  if (t.bad) {
    // Find the worst column of the worst row on the host (one row of y and ref).
    const int64_t r = int64_t(t.worst & 0xffffffffull);
    std::vector<uint8_t> yrow(size_t(p.cols) * size_of(p.out));
    std::vector<float> rrow(size_t(p.cols));
    GT_CUDA(cudaMemcpy(yrow.data(), static_cast<const uint8_t*>(y) + size_t(r * p.row_stride()) * size_of(p.out),
                       yrow.size(), cudaMemcpyDeviceToHost));
    GT_CUDA(cudaMemcpy(rrow.data(), ref + r * p.cols, rrow.size() * 4, cudaMemcpyDeviceToHost));
    int64_t wc = 0;
    double wd = -1;
    for (int64_t c = 0; c < p.cols; ++c) {
      const double got = host_elem(yrow, p.out, c), want = rrow[size_t(c)];
      const double d = std::isnan(want) ? (std::isnan(got) ? 0 : INFINITY) : std::isfinite(got) ? std::fabs(got - want) : INFINITY;
      if (d > wd) wd = d, wc = c;
    }
    res.reason = std::to_string(t.bad) + " of " + std::to_string(p.rows * p.cols) + " elements over bound (worst " +
                 std::to_string(worst) + "x in row " + std::to_string(r) + "; col " + std::to_string(wc) + ": got " +
                 std::to_string(host_elem(yrow, p.out, wc)) + ", want " + std::to_string(rrow[size_t(wc)]) + ")";
  } else if (t.pad_bad) {
    res.reason = std::to_string(t.pad_bad) + " elements of the padding between cols and ld were written";
  }
  return res;
}

}  // namespace gemmtune
