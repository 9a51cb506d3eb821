// Throwaway probe (not committed): the "band" softmax for few long rows, the whole GPU on one
// row at a time, against a device copy of the same bytes. nvcc -O3 -gencode arch=compute_90a,code=sm_90a
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#define CK(x)                                                                                    \
  do {                                                                                           \
    cudaError_t e_ = (x);                                                                        \
    if (e_ != cudaSuccess) {                                                                     \
      printf("CUDA error %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__, __LINE__, #x);     \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

constexpr float kLog2e = 1.4426950408889634f;
constexpr uint32_t kBulkChunk = 32768;
constexpr int kMaxSlots = 64;

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <class T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float exp_sub(float a, float m) { return ex2((a - m) * kLog2e); }
__device__ __forceinline__ float weight(float m, float M) { return m == -INFINITY ? 0.0f : exp_sub(m, M); }
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
__device__ __forceinline__ uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void fence_mbar_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
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
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  if (mbar_try_wait(bar, parity)) return;
  const uint64_t t0 = global_ns();
  while (!mbar_try_wait(bar, parity))
    if (global_ns() - t0 > 5000000000ull) __trap();
}
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
          smem_u32(dst)),
      "l"(src), "r"(bytes), "r"(smem_u32(bar)), "l"(policy)
      : "memory");
}
__device__ __forceinline__ void named_barrier(int id, int count) { asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(count) : "memory"); }
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
template <class To, int N>
__device__ __forceinline__ void store_streaming(To* y, const float* v) {
  constexpr int kBytes = N * int(sizeof(To));
  uint32_t w[kBytes / 4];
  if constexpr (sizeof(To) == 4) {
#pragma unroll
    for (int i = 0; i < N; ++i) w[i] = __float_as_uint(v[i]);
  } else {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      const __nv_bfloat162 h = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
      w[i] = *reinterpret_cast<const uint32_t*>(&h);
    }
  }
#pragma unroll
  for (int q = 0; q < kBytes / 16; ++q)
    asm volatile("st.global.cs.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(reinterpret_cast<char*>(y) + 16 * q), "r"(w[4 * q]),
                 "r"(w[4 * q + 1]), "r"(w[4 * q + 2]), "r"(w[4 * q + 3])
                 : "memory");
}

// (m, s) merged with (m2, s2) against max(m, m2); W(-Inf, .) = 0, NaN kept.
__device__ __forceinline__ void merge_ms(float& m, float& s, float m2, float s2) {
  const float mm = fmaxf(m, m2);
  s = s * weight(m, mm) + s2 * weight(m2, mm);
  m = mm;
}

// band: CTA b owns packs [b Cp, min(b Cp + Cp, R)) of every row (R = cols / VEC packs, Cp =
// ceil(R / G)), np = ceil(Cp / Pq) pieces of Pq = T PK packs; the loader warp streams piece k
// (row k / np, piece k % np) into slot k % N; compute warps: reduce row r's pieces (kept in
// their slots), publish, merge the row's G pairs, write y from the slots, release them.
template <class Ti, class To, int PK>
__global__ void __launch_bounds__(512 + 32) band_kernel(const Ti* __restrict__ x, To* __restrict__ y, int64_t rows, int64_t cols,
                                                        int64_t ld, float scale, float2* __restrict__ part,
                                                        unsigned* __restrict__ cnt, int N, int mode) {
  constexpr int VEC = int(16 / sizeof(Ti));
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t full[kMaxSlots], empty[kMaxSlots];
  __shared__ float2 wred[32];
  __shared__ float2 rowstat;
  const int T = int(blockDim.x) - 32, t = int(threadIdx.x), lane = t & 31, warp = t >> 5, nw = T >> 5;
  const int Pq = T * PK;
  const int64_t G = gridDim.x, b = blockIdx.x, R = cols / VEC, Cp = (R + G - 1) / G;
  const int np = int((Cp + Pq - 1) / Pq);
  const int64_t c0 = b * Cp, c1 = c0 + Cp < R ? c0 + Cp : R;
  const int64_t K = rows * np;
  if (t == 0) {
    for (int st = 0; st < N; ++st) {
      mbar_init(&full[st], 1);
      mbar_init(&empty[st], uint32_t(nw));
    }
    fence_mbar_init();
  }
  __syncthreads();
  auto piece_packs = [&](int p) -> int {
    const int64_t n = c1 - (c0 + int64_t(p) * Pq);
    return n <= 0 ? 0 : n < Pq ? int(n) : Pq;
  };
  if (warp == nw) {
    if (lane == 0) {
      const uint64_t policy = evict_first_policy();
      for (int64_t k = 0; k < K; ++k) {
        const int st = int(k % N);
        if (k >= N) mbar_wait(&empty[st], uint32_t(k / N - 1) & 1u);
        const int64_t r = k / np;
        const int p = int(k - r * np);
        const uint32_t bytes = uint32_t(piece_packs(p)) * 16u;
        mbar_arrive_expect_tx(&full[st], bytes);
        unsigned char* const dst = smem_raw + int64_t(st) * Pq * 16;
        const char* const src = reinterpret_cast<const char*>(x + r * ld) + (c0 + int64_t(p) * Pq) * 16;
        for (uint32_t o = 0; o < bytes; o += kBulkChunk)
          bulk_load(dst + o, src + o, bytes - o < kBulkChunk ? bytes - o : kBulkChunk, &full[st], policy);
      }
    }
    return;
  }
  int64_t k0 = 0;
  for (int64_t r = 0; r < rows; ++r, k0 += np) {
    float m = -INFINITY, s = 0.0f;
    for (int p = 0; p < np; ++p) {
      const int64_t k = k0 + p;
      const int st = int(k % N), n = piece_packs(p);
      mbar_wait(&full[st], uint32_t(k / N) & 1u);
      const Pack<Ti, VEC>* sp = reinterpret_cast<const Pack<Ti, VEC>*>(smem_raw + int64_t(st) * Pq * 16);
      float v[PK * VEC];
#pragma unroll
      for (int q = 0; q < PK; ++q) {
        const int idx = q * T + t;
        if (idx < n) {
          const Pack<Ti, VEC> pk = sp[idx];
#pragma unroll
          for (int e = 0; e < VEC; ++e) v[q * VEC + e] = scale * to_float(pk.v[e]);
        } else {
#pragma unroll
          for (int e = 0; e < VEC; ++e) v[q * VEC + e] = -INFINITY;
        }
      }
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
    for (int o = 16; o > 0; o >>= 1) merge_ms(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    if (lane == 0) wred[warp] = make_float2(m, s);
    named_barrier(1, T);
    if (warp == 0) {
      const float2 q = lane < nw ? wred[lane] : make_float2(-INFINITY, 0.0f);
      const float M = warp_max(q.x);
      const float Z = warp_sum(q.y * weight(q.x, M));
      if (lane == 0) {
        part[r * G + b] = make_float2(M, Z);
        red_release_add(cnt + r, 1u);
      }
      if (ld_acquire(cnt + r) < unsigned(G)) {
        const uint64_t t0 = global_ns();
        while (ld_acquire(cnt + r) < unsigned(G))
          if (global_ns() - t0 > 5000000000ull) __trap();
      }
      const float2 mz = merge_pairs(part + r * G, int(G), lane);
      if (lane == 0) {
        rowstat = mz;
        if (atomicAdd(cnt + r, 1u) == unsigned(2 * G) - 1u) atomicExch(cnt + r, 0u);
      }
    }
    named_barrier(1, T);
    const float M = rowstat.x, inv = 1.0f / rowstat.y;
    for (int p = 0; p < np; ++p) {
      const int64_t k = k0 + p;
      const int st = int(k % N), n = piece_packs(p);
      const Pack<Ti, VEC>* sp = reinterpret_cast<const Pack<Ti, VEC>*>(smem_raw + int64_t(st) * Pq * 16);
      To* const gy = y + r * ld + (c0 + int64_t(p) * Pq) * VEC;
#pragma unroll
      for (int q = 0; q < PK; ++q) {
        const int idx = q * T + t;
        if (idx < n) {
          const Pack<Ti, VEC> pk = sp[idx];
          float o[VEC];
#pragma unroll
          for (int e = 0; e < VEC; ++e) o[e] = exp_sub(scale * to_float(pk.v[e]), M) * inv;
          store_streaming<To, VEC>(gy + int64_t(idx) * VEC, o);
        }
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[st]);
    }
  }
}

#include "ahead.cuh"
#include "async.cuh"
#include "sync4.cuh"

__global__ void copy_kernel(const uint4* __restrict__ a, uint4* __restrict__ b, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 v0 = __ldcs(a + i), v1 = __ldcs(a + i + stride), v2 = __ldcs(a + i + 2 * stride), v3 = __ldcs(a + i + 3 * stride);
    __stcs(b + i, v0), __stcs(b + i + stride, v1), __stcs(b + i + 2 * stride, v2), __stcs(b + i + 3 * stride, v3);
  }
  for (; i < n; i += stride) __stcs(b + i, __ldcs(a + i));
}

template <class T>
__global__ void init_kernel(T* x, int64_t n, uint64_t seed) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint64_t h = (uint64_t(i) + seed) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    const float u = float(h >> 40) / float(1 << 24);  // [0, 1)
    x[i] = from_float<T>(8.0f * u - 4.0f);
  }
}

// Double reference per row: M (NaN-ignoring max), Z = sum exp(s x - M); stats[r] = (M, Z).
template <class T>
__global__ void ref_stats(const T* x, int64_t cols, int64_t ld, float scale, double2* stats) {
  __shared__ double red[1024];
  const T* xr = x + blockIdx.x * ld;
  double m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const double v = double(scale) * double(to_float(xr[c]));
    if (v > m) m = v;
  }
  red[threadIdx.x] = m;
  __syncthreads();
  for (int o = blockDim.x / 2; o > 0; o >>= 1) {
    if (threadIdx.x < o) red[threadIdx.x] = fmax(red[threadIdx.x], red[threadIdx.x + o]);
    __syncthreads();
  }
  const double M = red[0];
  __syncthreads();
  double s = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += exp(double(scale) * double(to_float(xr[c])) - M);
  red[threadIdx.x] = s;
  __syncthreads();
  for (int o = blockDim.x / 2; o > 0; o >>= 1) {
    if (threadIdx.x < o) red[threadIdx.x] += red[threadIdx.x + o];
    __syncthreads();
  }
  if (threadIdx.x == 0) stats[blockIdx.x] = make_double2(M, red[0]);
}
// bad[0]: elements off beyond atol + rtol |ref|; bad[1]: NaN outputs.
template <class Ti, class To>
__global__ void ref_check(const Ti* x, const To* y, int64_t rows, int64_t cols, int64_t ld, float scale, const double2* stats,
                          double rtol, double atol, unsigned long long* bad) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * cols; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i - r * cols;
    const double ref = exp(double(scale) * double(to_float(x[r * ld + c])) - stats[r].x) / stats[r].y;
    const double got = double(to_float(y[r * ld + c]));
    if (got != got) atomicAdd(bad + 1, 1ull);
    else if (!(fabs(got - ref) <= atol + rtol * fabs(ref))) atomicAdd(bad, 1ull);
  }
}
template <class To>
__global__ void count_nan_rows(const To* y, int64_t cols, int64_t ld, unsigned long long* nn) {
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < cols; c += int64_t(gridDim.x) * blockDim.x) {
    const float v = to_float(y[blockIdx.y * ld + c]);
    if (v != v) atomicAdd(nn + blockIdx.y, 1ull);
  }
}

struct Variant {
  std::string name;
  const void* func;
  int threads;  // compute threads
  int pk;
  int slots;
  int h = 0;  // band2: pieces held in registers
  int mode = 0;
  int extra = 32;  // threads past the compute warps  // 1: no grid sync (wrong y), 2: publish, no wait (wrong y), 3: loads without L2 hint
};

int main(int argc, char** argv) {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int64_t rows = 8, cols = 4194304, ld = cols;
  const float scale = 0.9f;
  const int kSets = 4;  // rotating buffers: 4 x (128 + 128) MiB
  const int reps = argc > 1 ? atoi(argv[1]) : 20;
  for (int dt = 0; dt < 2; ++dt) {
    const size_t es = dt == 0 ? 4 : 2;
    const size_t bytes = size_t(rows) * cols * es;
    std::vector<void*> xs(kSets), ys(kSets);
    for (int i = 0; i < kSets; ++i) {
      CK(cudaMalloc(&xs[i], bytes));
      CK(cudaMalloc(&ys[i], bytes));
      if (dt == 0) init_kernel<float><<<1024, 256>>>((float*)xs[i], rows * cols, 1234 + i);
      else init_kernel<__nv_bfloat16><<<1024, 256>>>((__nv_bfloat16*)xs[i], rows * cols, 1234 + i);
    }
    float2* part;
    unsigned* cnt;
    CK(cudaMalloc(&part, rows * sms * sizeof(float2)));
    CK(cudaMalloc(&cnt, 4096));
    CK(cudaMemset(cnt, 0, 4096));
    std::vector<Variant> vs;
    auto add = [&](const char* nm, const void* f, int T, int pk) {
      const int piece = T * pk * 16;
      const int slots = std::min(kMaxSlots, int(229376 / piece));
      vs.push_back({std::string(dt == 0 ? "fp32 " : "bf16 ") + nm, f, T, pk, slots});
    };
    auto add2 = [&](const char* nm, const void* f, int T, int pk, int h, int mode = 0) {
      add(nm, f, T, pk);
      vs.back().h = h;
      vs.back().mode = mode;
    };
    auto add4 = [&](const char* nm, const void* f, int T, int pk, int h, int mode = 0) {
      add(nm, f, T, pk);
      vs.back().h = h;
      vs.back().mode = mode;
      vs.back().extra = 64;
    };
    auto add3 = [&](const char* nm, const void* f, int T, int pk) {
      add(nm, f, T, pk);
      vs.back().extra = 64;
    };
    if (dt == 0) {
      add2("A t512_pk4_h2 (32K)", (const void*)&band2_kernel<float, float, 4, 2>, 512, 4, 2);
      add4("Y t512_pk4_h2 (32K)", (const void*)&band4_kernel<float, float, 4, 2>, 512, 4, 2);
      add4("Y t512_pk4_h2 (32K) m1", (const void*)&band4_kernel<float, float, 4, 2>, 512, 4, 2, 1);
      add4("Y t448_pk4_h3 (28K)", (const void*)&band4_kernel<float, float, 4, 3, 512>, 448, 4, 3);
      add4("Y t448_pk4_h4 (28K)", (const void*)&band4_kernel<float, float, 4, 4, 512>, 448, 4, 4);
      add4("Y t448_pk2_h6 (14K)", (const void*)&band4_kernel<float, float, 2, 6, 512>, 448, 2, 6);
      add4("Y t448_pk2_h8 (14K)", (const void*)&band4_kernel<float, float, 2, 8, 512>, 448, 2, 8);
      add4("Y t384_pk4_h4 (24K)", (const void*)&band4_kernel<float, float, 4, 4, 512>, 384, 4, 4);
      add4("Y t448_pk4_h4 (28K) m1", (const void*)&band4_kernel<float, float, 4, 4, 512>, 448, 4, 4, 1);
    } else {
      add2("A t512_pk4_h0 (32K)", (const void*)&band2_kernel<__nv_bfloat16, __nv_bfloat16, 4, 0>, 512, 4, 0);
      add4("Y t512_pk4_h0 (32K)", (const void*)&band4_kernel<__nv_bfloat16, __nv_bfloat16, 4, 0>, 512, 4, 0);
      add4("Y t512_pk4_h0 (32K) m1", (const void*)&band4_kernel<__nv_bfloat16, __nv_bfloat16, 4, 0>, 512, 4, 0, 1);
      add4("Y t512_pk2_h0 (16K)", (const void*)&band4_kernel<__nv_bfloat16, __nv_bfloat16, 2, 0>, 512, 2, 0);
      add4("Y t448_pk4_h2 (28K)", (const void*)&band4_kernel<__nv_bfloat16, __nv_bfloat16, 4, 2, 512>, 448, 4, 2);
    }
    for (auto& v : vs) {
      {
        const int64_t R = cols / (16 / es), Cp = (R + sms - 1) / sms, np = (Cp + v.threads * v.pk - 1) / (v.threads * v.pk);
        if (v.extra == 64 && v.name.find(" S ") != std::string::npos && v.slots > (kW - 2) * np) v.slots = int((kW - 2) * np);
      }
      const int smem = v.slots * v.threads * v.pk * 16;
      CK(cudaFuncSetAttribute(v.func, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      int per = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, v.func, v.threads + v.extra, smem));
      const int64_t R = cols / (16 / es), Cp = (R + sms - 1) / sms, np = (Cp + v.threads * v.pk - 1) / (v.threads * v.pk);
      printf("%-22s slots %d (%d B), np %lld, resident %d/SM\n", v.name.c_str(), v.slots, smem, (long long)np, per);
      if ((v.h == 0 && v.name.find(" A ") == std::string::npos && v.name.find(" Y ") == std::string::npos ? np > v.slots : 2 * np - std::min<int64_t>(v.h, np) > v.slots) || per < 1) {
        printf("   skipped\n");
        v.func = nullptr;
      }
    }
    auto run = [&](const Variant& v, int set, float sc, cudaStream_t st) {
      const void* x = xs[set];
      void* y = ys[set];
      int64_t r_ = rows, c_ = cols, l_ = ld;
      float s_ = sc;
      int N = v.slots, mode = v.mode;
      void* args[] = {(void*)&x, (void*)&y, &r_, &c_, &l_, &s_, &part, &cnt, &N, &mode};
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = dim3(sms);
      cfg.blockDim = dim3(v.threads + v.extra);
      cfg.dynamicSmemBytes = size_t(v.slots) * v.threads * v.pk * 16;
      cfg.stream = st;
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeCooperative;
      attr[0].val.cooperative = 1;
      cfg.attrs = attr;
      cfg.numAttrs = 1;
      CK(cudaLaunchKernelExC(&cfg, v.func, args));
    };
    // correctness: every variant, set 0, reference in double
    double2* stats;
    unsigned long long* bad;
    CK(cudaMalloc(&stats, rows * sizeof(double2)));
    CK(cudaMalloc(&bad, 64 * sizeof(unsigned long long)));
    for (auto& v : vs) {
      if (!v.func) continue;
      CK(cudaMemset(ys[0], 0xff, bytes));  // poison (NaN)
      run(v, 0, scale, 0);
      CK(cudaDeviceSynchronize());
      CK(cudaMemset(bad, 0, 64 * sizeof(unsigned long long)));
      if (dt == 0) {
        ref_stats<float><<<rows, 1024>>>((float*)xs[0], cols, ld, scale, stats);
        ref_check<float, float><<<2048, 256>>>((float*)xs[0], (float*)ys[0], rows, cols, ld, scale, stats, 2e-5, 1e-30, bad);
      } else {
        ref_stats<__nv_bfloat16><<<rows, 1024>>>((__nv_bfloat16*)xs[0], cols, ld, scale, stats);
        ref_check<__nv_bfloat16, __nv_bfloat16><<<2048, 256>>>((__nv_bfloat16*)xs[0], (__nv_bfloat16*)ys[0], rows, cols, ld, scale,
                                                               stats, 8e-3, 1e-30, bad);
      }
      unsigned long long hb[2];
      CK(cudaMemcpy(hb, bad, sizeof(hb), cudaMemcpyDeviceToHost));
      printf("check %-22s wrong %llu nan %llu of %lld%s\n", v.name.c_str(), hb[0], hb[1], (long long)(rows * cols),
             v.mode == 1 || v.mode == 2 ? " (diagnostic mode: wrong by design)" : "");
    }
    // special rows on set 3 (then restored): row 1 a NaN, row 2 a +Inf, row 3 all -Inf
    if (dt == 0) {
      float* x3 = (float*)xs[3];
      const float nanv = NAN, inf = INFINITY;
      CK(cudaMemcpy(x3 + 1 * ld + 777, &nanv, 4, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(x3 + 2 * ld + 4000000, &inf, 4, cudaMemcpyHostToDevice));
      std::vector<float> ninf(cols, -INFINITY);
      CK(cudaMemcpy(x3 + 3 * ld, ninf.data(), cols * 4, cudaMemcpyHostToDevice));
      for (auto& v : vs) {
        if (!v.func) continue;
        CK(cudaMemset(ys[3], 0, bytes));
        run(v, 3, scale, 0);
        CK(cudaMemset(bad, 0, 64 * sizeof(unsigned long long)));
        count_nan_rows<float><<<dim3(256, rows), 256>>>((float*)ys[3], cols, ld, bad);
        unsigned long long hb[8];
        CK(cudaMemcpy(hb, bad, sizeof(hb), cudaMemcpyDeviceToHost));
        printf("special %-22s NaN per row:", v.name.c_str());
        for (int r = 0; r < rows; ++r) printf(" %llu", hb[r]);
        printf("  (want 0 %lld %lld %lld 0 0 0 0)\n", (long long)cols, (long long)cols, (long long)cols);
      }
      init_kernel<float><<<1024, 256>>>((float*)xs[3], rows * cols, 1234 + 3);
    }
    // timing, interleaved: copy kernel, memcpy, each variant
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const int nv = int(vs.size()) + 2;
    std::vector<std::vector<float>> ts(nv);
    for (int rep = 0; rep < reps + 3; ++rep)
      for (int i = 0; i < nv; ++i) {
        const int set = (rep * nv + i) % kSets;
        if (i >= 2 && !vs[i - 2].func) continue;
        CK(cudaEventRecord(e0));
        if (i == 0) copy_kernel<<<sms * 8, 512>>>((const uint4*)xs[set], (uint4*)ys[set], int64_t(bytes / 16));
        else if (i == 1) CK(cudaMemcpyAsync(ys[set], xs[set], bytes, cudaMemcpyDeviceToDevice));
        else run(vs[i - 2], set, scale, 0);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (rep >= 3) ts[i].push_back(ms * 1000.0f);
      }
    CK(cudaGetLastError());
    auto med = [](std::vector<float> v) {
      std::sort(v.begin(), v.end());
      return v.empty() ? 0.0f : v[v.size() / 2];
    };
    const float copy = std::min(med(ts[0]), med(ts[1]));
    printf("%s %lld x %lld: copy kernel %.1f us, memcpy %.1f us (%.2f TB/s read+write)\n", dt == 0 ? "fp32" : "bf16",
           (long long)rows, (long long)cols, med(ts[0]), med(ts[1]), 2.0 * bytes / (copy * 1e-6) / 1e12);
    for (size_t i = 0; i < vs.size(); ++i) {
      if (!vs[i].func) continue;
      const float m = med(ts[i + 2]);
      std::sort(ts[i + 2].begin(), ts[i + 2].end());
      printf("  %-22s median %.1f us (min %.1f max %.1f)  %.1f%% of copy\n", vs[i].name.c_str(), m, ts[i + 2].front(),
             ts[i + 2].back(), 100.0 * copy / m);
    }
    for (int i = 0; i < kSets; ++i) { CK(cudaFree(xs[i])); CK(cudaFree(ys[i])); }
    CK(cudaFree(part));
    CK(cudaFree(cnt));
    CK(cudaFree(stats));
    CK(cudaFree(bad));
  }
  return 0;
}
