// The native decode GEMM kernels (decode_gemm.hpp): a swap-AB weight stream on mma.sync.
//
// Fragments (PTX ISA, mma.m16n8k16 .bf16 / .f16, row.col), lane = 4 g + t:
//   A (16 x 16, the weights): 4 registers: a0 row g, a1 row g + 8, a2 row g, a3 row g + 8;
//     a0/a1 hold k slots 2t, 2t+1, a2/a3 the slots 2t+8, 2t+9.
//   B (16 x 8, the tokens): 2 registers for token g: b0 slots 2t, 2t+1, b1 slots 2t+8, 2t+9.
//   C (16 x 8, fp32): c0, c1 row g, tokens 2t, 2t+1; c2, c3 row g + 8.
// So per k step a lane holds two 4-byte pieces of each of its rows and tokens. The physical k
// order is free, so one 64-byte chunk of a row is split into four 16-byte loads, lane t taking
// bytes [16 t, 16 t + 16) = four 4-byte pieces P0..P3: bf16/fp16 (32 per chunk): step 0 gets P0
// (its first slots) and P1 (its second), step 1 gets P2 and P3; e4m3 (64 per chunk): piece s,
// widened to two f16x2, feeds step s (its low half the first slots, its high half the second).
// Both operands use the same map, so each product pairs the same physical k: the dot products
// are exact permutations of the sums.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "backends/native/decode_gemm.hpp"
#include "core/convert.cuh"
#include "core/cuda.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune::native {
namespace {

namespace cg = cooperative_groups;

constexpr int kChunkBytes = 64;   // k bytes of one row per chunk: 4 lanes x 16 bytes
constexpr int kMaxThreads = 256;  // warps_n * warps_k <= 8

// e4m3: each 4-byte piece widened to two f16x2 in registers, then mma.m16n8k16 .f16 (exact:
// every e4m3 is an fp16; four k steps per chunk instead of two). Measured on the H200, the
// decode problems of the suite at m = 16 took 1.37x the streaming time of their bytes this way
// and 1.57x with mma.m16n8k32 .e4m3 on the bytes (bench/results/2026-12-02-h200-s7-decode-probe.txt).
enum class In : uint8_t { bf16, fp16, e4m3 };

struct Params {
  const uint8_t* a;  // tokens, [m, k] row-major, lda_bytes apart
  const uint8_t* w;  // weights W[n, k] row-major (B = W^T), ldw_bytes apart
  const void* c;     // [m, n] row-major, ldc elements (D's dtype), read when has_c
  void* d;           // [m, n] row-major, ldd elements
  const void* bias;  // [n], D's dtype, when has_bias
  const float* sa;   // fp8 scales: [1] or [m]; null for none
  const float* sb;   // [1] or [n]
  int m, n;
  int64_t k_bytes, lda_bytes, ldw_bytes, ldc, ldd;
  int chunks;            // ceil(k_bytes / 64)
  int chunks_per_split;  // chunks per (cluster rank, warp_k): a multiple of the batch
  int warps_n, warps_k, cluster;
  float alpha, beta;
  DType out;
  Activation act;
  ScaleMode scale;
  bool has_c, has_bias;
};

__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t pol;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}

// Weights: read once, not kept in L1, first out of L2 (the activations stay); the L2 fetches
// the whole 256-byte block from DRAM on a miss (a batch reads 128 or 256 bytes of each row).
__device__ __forceinline__ uint4 load_weight(const uint8_t* p, uint64_t pol) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(pol));
  return v;
}

// Two e4m3 (the low and high byte of `v`) as an f16x2 (exact: every e4m3 is an fp16).
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t v) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(v & 0xffffu), __NV_E4M3);
  return uint32_t(h.x) | (uint32_t(h.y) << 16);
}

__device__ __forceinline__ uint4 load_token(const uint8_t* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }

template <In IN>
__device__ __forceinline__ void mma(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1) {
  if constexpr (IN == In::bf16) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {  // fp16, and e4m3 widened to fp16
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
}

__device__ __forceinline__ float load_out(const void* base, DType dt, int64_t i) {
  switch (dt) {
    case DType::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
    case DType::fp16: return __half2float(static_cast<const __half*>(base)[i]);
    default: return static_cast<const float*>(base)[i];
  }
}

__device__ __forceinline__ void store_out(void* base, DType dt, int64_t i, float v) {
  switch (dt) {
    case DType::bf16: static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(v); break;
    case DType::fp16: static_cast<__half*>(base)[i] = __float2half_rn(v); break;
    default: static_cast<float*>(base)[i] = v; break;
  }
}

__device__ __forceinline__ float activate(Activation act, float x) {
  switch (act) {
    case Activation::relu: return x > 0.0f ? x : 0.0f;
    case Activation::gelu_tanh: return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    case Activation::silu: return x / (1.0f + __expf(-x));
    default: return x;
  }
}

// One CTA: warps_n x warps_k warps over cta_rows = 16 * RT * warps_n weight rows and 8 * MT
// tokens; blockIdx.x = row block * cluster + cluster rank. Dynamic shared memory: the partial
// sums, [warps_k][8 * MT tokens][cta_rows] fp32.
template <In IN, int MT, int RT>
__global__ void __launch_bounds__(kMaxThreads) decode_gemm_kernel(const Params p) {
  constexpr int U = RT == 1 ? 4 : 2;  // chunks per batch (DecodeConfig::chunks_per_batch)
  constexpr int TOK = 8 * MT;
  extern __shared__ float partial[];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int wi = warp % p.warps_n, wk = warp / p.warps_n;
  const int rank = int(blockIdx.x) % p.cluster, block = int(blockIdx.x) / p.cluster;
  const int cta_rows = 16 * RT * p.warps_n;
  const int row0 = block * cta_rows + wi * 16 * RT;
  // This warp's chunks: one range of chunks_per_split. (Taking batches in turn across the k
  // splits, so that a CTA's warps read adjacent bytes of each row at once, measured no faster.)
  const int c_first = (rank * p.warps_k + wk) * p.chunks_per_split;
  const int c_end = min(c_first + p.chunks_per_split, p.chunks);

  // This lane's rows (16 r + 8 h + g) and tokens (8 j + g); out-of-range ones read zeros.
  const uint8_t* wrow[RT][2];
  bool wok[RT][2];
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + 16 * r + 8 * h + g;
      wok[r][h] = row < p.n;
      wrow[r][h] = p.w + int64_t(wok[r][h] ? row : 0) * p.ldw_bytes + 16 * t;
    }
  const uint8_t* xrow[MT];
  bool xok[MT];
#pragma unroll
  for (int j = 0; j < MT; ++j) {
    const int tok = 8 * j + g;
    xok[j] = tok < p.m;
    xrow[j] = p.a + int64_t(xok[j] ? tok : 0) * p.lda_bytes + 16 * t;
  }
  const uint64_t pol = evict_first_policy();
  const int64_t lane_k = 16 * t;
  // The next kernel on the stream may launch now (a programmatic dependent launch of it): its
  // CTAs take SM room as ours leave and fetch their weights while we finish; its
  // griddepcontrol.wait still waits for our whole grid and its memory. Triggered here rather
  // than after the main loop: llama3 decoder chains of native kernels, overlapped, ran 1.2%
  // faster in geomean (12 chains, m = 1 / 8 / 16, bf16 and fp8, two runs; 0.0-2.7% each; H100).
  asm volatile("griddepcontrol.launch_dependents;");

  auto load_w = [&](uint4 (&w)[RT][2][U], int c0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + u;
      const bool kin = c < c_end && int64_t(c) * kChunkBytes + lane_k < p.k_bytes;
#pragma unroll
      for (int r = 0; r < RT; ++r)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          w[r][h][u] = kin && wok[r][h] ? load_weight(wrow[r][h] + int64_t(c) * kChunkBytes, pol) : make_uint4(0, 0, 0, 0);
    }
  };
  auto load_x = [&](uint4 (&x)[MT][U], int c0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + u;
      const bool kin = c < c_end && int64_t(c) * kChunkBytes + lane_k < p.k_bytes;
#pragma unroll
      for (int j = 0; j < MT; ++j)
        x[j][u] = kin && xok[j] ? load_token(xrow[j] + int64_t(c) * kChunkBytes) : make_uint4(0, 0, 0, 0);
    }
  };

  float acc[RT][MT][4];
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int j = 0; j < MT; ++j) acc[r][j][0] = acc[r][j][1] = acc[r][j][2] = acc[r][j][3] = 0.0f;

  auto multiply = [&](const uint4 (&w)[RT][2][U], const uint4 (&x)[MT][U]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if constexpr (IN == In::e4m3) {
        // k step s takes piece s of each row and token: its low two bytes are the slots
        // 2t, 2t+1, its high two the slots 2t+8, 2t+9.
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          uint32_t xb[MT][2];
#pragma unroll
          for (int j = 0; j < MT; ++j) {
            const uint32_t v = (&x[j][u].x)[s];
            xb[j][0] = e4m3x2_to_f16x2(v), xb[j][1] = e4m3x2_to_f16x2(v >> 16);
          }
#pragma unroll
          for (int r = 0; r < RT; ++r) {
            const uint32_t lo = (&w[r][0][u].x)[s], hi = (&w[r][1][u].x)[s];
            const uint32_t a0 = e4m3x2_to_f16x2(lo), a1 = e4m3x2_to_f16x2(hi);
            const uint32_t a2 = e4m3x2_to_f16x2(lo >> 16), a3 = e4m3x2_to_f16x2(hi >> 16);
#pragma unroll
            for (int j = 0; j < MT; ++j) mma<IN>(acc[r][j], a0, a1, a2, a3, xb[j][0], xb[j][1]);
          }
        }
      } else {
#pragma unroll
        for (int r = 0; r < RT; ++r)
#pragma unroll
          for (int j = 0; j < MT; ++j) {
            mma<IN>(acc[r][j], w[r][0][u].x, w[r][1][u].x, w[r][0][u].y, w[r][1][u].y, x[j][u].x, x[j][u].y);
            mma<IN>(acc[r][j], w[r][0][u].z, w[r][1][u].z, w[r][0][u].w, w[r][1][u].w, x[j][u].z, x[j][u].w);
          }
      }
    }
  };

  // Two weight buffers in turn: the next batch is in flight while this one is multiplied.
  uint4 wa[RT][2][U], wb[RT][2][U], x[MT][U];
  load_w(wa, c_first);
  // Weights are constant: fetched before waiting for the previous kernel on the stream (a
  // programmatic dependent launch); the activations and D only after it.
  asm volatile("griddepcontrol.wait;" ::: "memory");
#pragma unroll 1
  for (int c0 = c_first; c0 < c_end; c0 += 2 * U) {
    load_x(x, c0);
    if (c0 + U < c_end) load_w(wb, c0 + U);
    multiply(wa, x);
    if (c0 + U >= c_end) break;
    load_x(x, c0 + U);
    if (c0 + 2 * U < c_end) load_w(wa, c0 + 2 * U);
    multiply(wb, x);
  }

  // Partial sums to shared memory: partial[(wk * TOK + token) * cta_rows + row].
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int j = 0; j < MT; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int row = wi * 16 * RT + 16 * r + g + 8 * (q >> 1);
        const int tok = 8 * j + 2 * t + (q & 1);
        partial[(wk * TOK + tok) * cta_rows + row] = acc[r][j][q];
      }
  cg::cluster_group cluster = cg::this_cluster();
  if (p.cluster > 1) cluster.sync();
  else __syncthreads();

  // This CTA's slice of the tile's outputs, rows fastest (coalesced stores of D's rows); each
  // sum over cluster ranks, then warps_k, in that fixed order.
  const int elems = TOK * cta_rows;
  const int per = (elems + p.cluster - 1) / p.cluster;
  const int e_end = min(elems, (rank + 1) * per);
  for (int e = rank * per + int(threadIdx.x); e < e_end; e += int(blockDim.x)) {
    const int tok = e / cta_rows, row = e % cta_rows;
    const int col = block * cta_rows + row;
    if (tok >= p.m || col >= p.n) continue;
    float s = 0.0f;
    for (int q = 0; q < p.cluster; ++q) {
      const float* src = p.cluster > 1 ? cluster.map_shared_rank(partial, q) : partial;
      for (int kk = 0; kk < p.warps_k; ++kk) s += src[(kk * TOK + tok) * cta_rows + row];
    }
    float v = s * p.alpha;
    if (p.scale == ScaleMode::tensorwise) v *= p.sa[0] * p.sb[0];
    else if (p.scale == ScaleMode::rowwise) v *= p.sa[tok] * p.sb[col];
    if (p.has_c) v += p.beta * load_out(p.c, p.out, int64_t(tok) * p.ldc + col);
    if (p.has_bias) v += load_out(p.bias, p.out, col);
    store_out(p.d, p.out, int64_t(tok) * p.ldd + col, activate(p.act, v));
  }
  // No CTA leaves while another may still read its shared memory.
  if (p.cluster > 1) cluster.sync();
}

using KernelFn = void (*)(Params);

template <In IN>
KernelFn pick_kernel(const DecodeConfig& c) {
  switch (c.tiles * 10 + c.rows) {
    case 11: return decode_gemm_kernel<IN, 1, 1>;
    case 12: return decode_gemm_kernel<IN, 1, 2>;
    case 21: return decode_gemm_kernel<IN, 2, 1>;
    case 22: return decode_gemm_kernel<IN, 2, 2>;
    default: return nullptr;
  }
}

// The compiled kernel for cfg's tiles / rows and p's input dtype; null when there is none.
KernelFn kernel_for(const DecodeConfig& cfg, const GemmProblem& p) {
  switch (p.a.dtype) {
    case DType::bf16: return pick_kernel<In::bf16>(cfg);
    case DType::fp16: return pick_kernel<In::fp16>(cfg);
    case DType::e4m3: return pick_kernel<In::e4m3>(cfg);
    default: return nullptr;
  }
}

int64_t chunks_of(const GemmProblem& p) { return (p.k * int64_t(size_of(p.a.dtype)) + kChunkBytes - 1) / kChunkBytes; }

// Chunks per k split, rounded up to whole batches.
int64_t chunks_per_split(const DecodeConfig& cfg, const GemmProblem& p) {
  const int64_t per = (chunks_of(p) + cfg.k_splits() - 1) / cfg.k_splits();
  const int64_t b = cfg.chunks_per_batch();
  return (per + b - 1) / b * b;
}

std::string cuda_failure(cudaError_t e, const std::string& what) {
  cudaGetLastError();
  return what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

// Sets the function attributes cfg's launch needs (once per kernel and size); "" or why not.
std::string set_attributes(KernelFn fn, const DecodeLaunch& l) {
  if (l.smem > 48 * 1024)
    if (cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(l.smem)); e != cudaSuccess)
      return cuda_failure(e, "cudaFuncSetAttribute(MaxDynamicSharedMemorySize, " + std::to_string(l.smem) + ")");
  return {};
}

cudaLaunchConfig_t launch_config(const DecodeLaunch& l, cudaLaunchAttribute* attr, cudaStream_t s) {
  cudaLaunchConfig_t c{};
  c.gridDim = dim3(unsigned(l.grid));
  c.blockDim = dim3(unsigned(l.threads));
  c.dynamicSmemBytes = size_t(l.smem);
  c.stream = s;
  c.attrs = attr;
  c.numAttrs = 0;
  if (l.cluster > 1) {
    attr[c.numAttrs].id = cudaLaunchAttributeClusterDimension;
    attr[c.numAttrs].val.clusterDim.x = unsigned(l.cluster);
    attr[c.numAttrs].val.clusterDim.y = 1;
    attr[c.numAttrs].val.clusterDim.z = 1;
    ++c.numAttrs;
  }
  return c;
}

std::string launch_text(const DecodeLaunch& l) {
  return "grid " + std::to_string(l.grid) + " x " + std::to_string(l.threads) + " threads, " + std::to_string(l.smem) +
         " B dynamic smem, cluster " + std::to_string(l.cluster);
}

bool aligned(const void* ptr, size_t bytes) { return (reinterpret_cast<uintptr_t>(ptr) % bytes) == 0; }

}  // namespace

std::string DecodeConfig::name() const {
  return "decode_t" + std::to_string(tiles) + "_r" + std::to_string(rows) + "_n" + std::to_string(warps_n) + "_k" +
         std::to_string(warps_k) + "_c" + std::to_string(cluster) ;
}

DecodeConfig DecodeConfig::parse(const std::string& name) {
  DecodeConfig c;
  char tail = 0;
  GT_CHECK(std::sscanf(name.c_str(), "decode_t%d_r%d_n%d_k%d_c%d%c", &c.tiles, &c.rows, &c.warps_n, &c.warps_k,
                       &c.cluster, &tail) == 5,
           "native: config id '" + name + "' is not decode_t<tiles>_r<rows>_n<warps_n>_k<warps_k>_c<cluster>");
  auto one_of = [&](int v, std::initializer_list<int> ok, const char* field) {
    GT_CHECK(std::find(ok.begin(), ok.end(), v) != ok.end(),
             "native: config id '" + name + "': " + field + " = " + std::to_string(v) + " is not supported");
  };
  one_of(c.tiles, {1, 2}, "tiles");
  one_of(c.rows, {1, 2}, "rows");
  one_of(c.warps_n, {1, 2, 4, 8}, "warps_n");
  one_of(c.warps_k, {1, 2, 4, 8}, "warps_k");
  one_of(c.cluster, {1, 2, 4, 8}, "cluster");
  one_of(c.warps_n * c.warps_k, {4, 8}, "warps_n * warps_k");
  return c;
}

std::string decode_unsupported(const GemmProblem& p) {
  try {
    p.validate();
  } catch (const Error& e) {
    return e.message();
  }
  if (p.a.layout != Layout::row || p.b.layout != Layout::col || p.d.layout != Layout::row ||
      (p.uses_c() && p.c.layout != Layout::row))
    return "needs the nn.Linear layout (A row-major, B column-major = W[n, k] row-major, C and D row-major)";
  if (p.a.dtype != p.b.dtype || !(p.a.dtype == DType::bf16 || p.a.dtype == DType::fp16 || p.a.dtype == DType::e4m3))
    return std::string("needs A and B both bf16, both fp16 or both e4m3 (got ") + to_string(p.a.dtype) + " x " +
           to_string(p.b.dtype) + ")";
  if (p.scale == ScaleMode::block)
    return "block FP8 scales are not implemented in the decode kernels (tensorwise and rowwise only)";
  if (!(p.d.dtype == DType::bf16 || p.d.dtype == DType::fp16 || p.d.dtype == DType::fp32))
    return std::string("needs D bf16, fp16 or fp32 (got ") + to_string(p.d.dtype) + ")";
  if (p.m > kDecodeMaxM) return "m = " + std::to_string(p.m) + " > " + std::to_string(kDecodeMaxM) + " (the decode kernels' largest)";
  if (p.n >= (int64_t(1) << 31)) return "n = " + std::to_string(p.n) + " does not fit 32 bits";
  const int64_t es = int64_t(size_of(p.a.dtype));
  if (p.k * es % 16) return "k * element size = " + std::to_string(p.k * es) + " bytes is not a multiple of 16";
  if (p.lda() * es % 16) return "lda * element size = " + std::to_string(p.lda() * es) + " bytes is not a multiple of 16";
  if (p.ldb() * es % 16) return "ldb * element size = " + std::to_string(p.ldb() * es) + " bytes is not a multiple of 16";
  if (chunks_of(p) >= (int64_t(1) << 30)) return "k is too long";
  return {};
}

std::string DecodeConfig::cannot_run(const GemmProblem& p) const {
  if (std::string why = decode_unsupported(p); !why.empty()) return why;
  const int need = p.m <= 8 ? 1 : 2;
  if (tiles < need) return "tiles = " + std::to_string(tiles) + " holds m <= " + std::to_string(8 * tiles) + ", not " + std::to_string(p.m);
  if (!kernel_for(*this, p)) return "no kernel compiled for tiles = " + std::to_string(tiles) + ", rows = " + std::to_string(rows);
  if (threads() > kMaxThreads || (warps_n * warps_k != 4 && warps_n * warps_k != 8))
    return "warps_n * warps_k must be 4 or 8";
  if ((int64_t(p.n) + cta_rows() - 1) / cta_rows() * cluster >= (int64_t(1) << 31)) return "grid too large";
  return {};
}

DecodeLaunch decode_launch(const DecodeConfig& cfg, const GemmProblem& p) {
  const std::string why = cfg.cannot_run(p);
  GT_CHECK(why.empty(), "native: " + cfg.name() + " cannot run " + p.str() + ": " + why);
  DecodeLaunch l;
  l.cluster = cfg.cluster;
  l.grid = (p.n + cfg.cta_rows() - 1) / cfg.cta_rows() * cfg.cluster;
  l.threads = cfg.threads();
  l.smem = int64_t(cfg.warps_k) * 8 * cfg.tiles * cfg.cta_rows() * int64_t(sizeof(float));
  return l;
}

std::vector<DecodeConfig> decode_configs(const GemmProblem& p, int sms, int max_configs) {
  if (!decode_unsupported(p).empty()) return {};
  if (sms <= 0) sms = 132;
  if (max_configs <= 0) max_configs = 12;
  const int tiles = p.m <= 8 ? 1 : 2;
  struct Scored {
    double score;
    DecodeConfig c;
  };
  std::vector<Scored> all;
  const int64_t chunks = chunks_of(p);
  for (int rows : {1, 2})
    for (auto [wn, wk] : {std::pair{4, 1}, {2, 2}, {1, 4}, {8, 1}, {4, 2}, {2, 4}, {1, 8}})
      for (int cluster : {1, 2, 4, 8}) {
        const DecodeConfig c{tiles, rows, wn, wk, cluster};
        if (!c.cannot_run(p).empty()) continue;
        const int64_t per = chunks_per_split(c, p);
        // Every k split gets at least two batches (else the split is no use), but one split is always allowed.
        if (c.k_splits() > 1 && per < 2 * c.chunks_per_batch()) continue;
        if (c.k_splits() > 1 && per * (c.k_splits() - 1) >= chunks) continue;  // a split with no work
        const int64_t warps = decode_launch(c, p).grid / cluster * cluster * wn * wk;
        // Enough weight loads in flight: about 16 warps per SM; k splits and clusters cost a
        // reduction, and a CTA wider than the weight rows wastes warps.
        const double fill = std::abs(std::log2(double(warps) / (16.0 * sms)));
        const double waste = double((p.n + c.cta_rows() - 1) / c.cta_rows() * c.cta_rows()) / double(p.n) - 1.0;
        all.push_back({fill + 0.1 * std::log2(double(cluster)) + 0.05 * std::log2(double(wk)) + 4.0 * waste, c});
      }
  std::stable_sort(all.begin(), all.end(), [](const Scored& x, const Scored& y) { return x.score < y.score; });
  std::vector<DecodeConfig> out;
  for (const auto& s : all) {
    if (int(out.size()) >= max_configs) break;
    out.push_back(s.c);
  }
  return out;
}

std::string decode_device_check(const DecodeConfig& cfg, const GemmProblem& p) {
  if (std::string why = cfg.cannot_run(p); !why.empty()) return why;
  const KernelFn fn = kernel_for(cfg, p);
  const DecodeLaunch l = decode_launch(cfg, p);
  cudaFuncAttributes fa{};
  if (cudaError_t e = cudaFuncGetAttributes(&fa, fn); e != cudaSuccess) return cuda_failure(e, "cudaFuncGetAttributes");
  if (std::string why = set_attributes(fn, l); !why.empty()) return why;
  if (l.cluster > 1) {
    cudaLaunchAttribute attr[1];
    cudaLaunchConfig_t c = launch_config(l, attr, nullptr);
    int clusters = 0;
    if (cudaError_t e = cudaOccupancyMaxActiveClusters(&clusters, fn, &c); e != cudaSuccess)
      return cuda_failure(e, "cudaOccupancyMaxActiveClusters (" + launch_text(l) + ")");
    if (clusters < 1) return "cannot be resident: no cluster of " + std::to_string(l.cluster) + " fits (" + launch_text(l) + ")";
  } else {
    int blocks = 0;
    if (cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn, l.threads, size_t(l.smem)); e != cudaSuccess)
      return cuda_failure(e, "cudaOccupancyMaxActiveBlocksPerMultiprocessor (" + launch_text(l) + ")");
    if (blocks < 1) return "cannot be resident (" + launch_text(l) + ")";
  }
  return {};
}

void run_decode_gemm(const DecodeConfig& cfg, const GemmProblem& p, const GemmArgs& a, cudaStream_t s, bool overlap) {
  const DecodeLaunch l = decode_launch(cfg, p);  // throws when cfg cannot run p
  const KernelFn fn = kernel_for(cfg, p);
  const size_t out_size = size_of(p.d.dtype);
  GT_CHECK(a.a && aligned(a.a, 16), "native: args.a must be 16-byte aligned");
  GT_CHECK(a.b && aligned(a.b, 16), "native: args.b must be 16-byte aligned");
  GT_CHECK(a.d && aligned(a.d, out_size), "native: args.d must be aligned to its element size");
  GT_CHECK(!p.uses_c() || (a.c && aligned(a.c, out_size)), "native: args.c must be given (beta != 0) and aligned");
  GT_CHECK(!p.bias || (a.bias && aligned(a.bias, out_size)), "native: args.bias must be given and aligned");
  const bool scaled = is_fp8(p.a.dtype) && p.scale != ScaleMode::none;
  GT_CHECK(!scaled || (a.scale_a && a.scale_b), "native: args.scale_a and args.scale_b must be given for scaled fp8");

  const int64_t es = int64_t(size_of(p.a.dtype));
  Params q{};
  q.a = static_cast<const uint8_t*>(a.a);
  q.w = static_cast<const uint8_t*>(a.b);
  q.c = a.c;
  q.d = a.d;
  q.bias = a.bias;
  q.sa = a.scale_a;
  q.sb = a.scale_b;
  q.m = int(p.m);
  q.n = int(p.n);
  q.k_bytes = p.k * es;
  q.lda_bytes = p.lda() * es;
  q.ldw_bytes = p.ldb() * es;
  q.ldc = p.ldc();
  q.ldd = p.ldd();
  q.chunks = int(chunks_of(p));
  q.chunks_per_split = int(chunks_per_split(cfg, p));
  q.warps_n = cfg.warps_n;
  q.warps_k = cfg.warps_k;
  q.cluster = cfg.cluster;
  q.alpha = p.alpha;
  q.beta = p.beta;
  q.out = p.d.dtype;
  q.act = p.act;
  q.scale = scaled ? p.scale : ScaleMode::none;
  q.has_c = p.uses_c();
  q.has_bias = p.bias;

  // The function attributes were set by decode_device_check (the candidate's prepare).
  cudaLaunchAttribute attr[2];
  cudaLaunchConfig_t c = launch_config(l, attr, s);
  if (overlap) {
    attr[c.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[c.numAttrs].val.programmaticStreamSerializationAllowed = 1;
    ++c.numAttrs;
  }
  if (cudaError_t e = cudaLaunchKernelEx(&c, fn, q); e != cudaSuccess)
    GT_THROW("native: " + cfg.name() + " (" + launch_text(l) + "): " + cuda_failure(e, "cudaLaunchKernelEx"));
}

}  // namespace gemmtune::native
