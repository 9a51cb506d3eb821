// gemmtune's CUTLASS 3.x GEMM for Hopper (sm_90a): one templated kernel, instantiated once per
// config by a few generated lines (InstanceSpec::source, src/backends/cutlass/configs.cpp),
// compiled by nvcc, with up to 7 other instances in one translation unit (src/compile/nvcc.cpp),
// into a shared object whose C entry points are in gt_cutlass_abi.h.
//
//   D[m, n] = act( alpha * sa * sb * (A[m, k] @ B[k, n]) + beta * C[m, n] + bias[n] )
//
// Built on CUTLASS's collective builders: a TMA + warp-specialized (cooperative or ping-pong)
// mainloop, a TMA warp-specialized epilogue whose fusion is an epilogue visitor tree (EVT)
// written here, GemmUniversal with the persistent tile scheduler.
//
// Swap-AB: an instance with kSwapAB computes D^T[n, m] = B^T[n, k] @ A^T[k, m] (kernel M = n,
// N = m). wgmma's M is at least 64 rows per warp group while its N goes down to 8, so a problem
// with small m (decode: m = 1..64) wastes less of each tile as the kernel's N. Arguments stay in
// the problem's terms; the swap, the layouts and which broadcast (row or column) carries bias
// and rowwise scales all flip here.
//
// Layout terms: CUTLASS's A is (M, K) and "RowMajor" means K-contiguous; its B is (K, N) and
// "ColumnMajor" means K-contiguous; C and D are (M, N). TMA needs 16-byte-aligned base pointers
// and leading dimensions (checked in can_implement).
#pragma once

// Programmatic dependent launch (GtCutlassArgs.flags GT_CUTLASS_OVERLAP_PREVIOUS): CUTLASS's SM90
// kernels then wait (griddepcontrol.wait) before their first global access and let the next
// kernel launch once their mainloop is done; in a plain launch both instructions are no-ops.
#define CUTLASS_ENABLE_GDC_FOR_SM90

#include <cuda_runtime_api.h>

#include <cstdint>
#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/functional.h"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/detail/blockwise_scale_layout.hpp"
#include "cutlass/kernel_hardware_info.h"
#include "gt_cutlass_abi.h"

#if !defined(CUTLASS_ARCH_MMA_SM90_SUPPORTED) && defined(__CUDA_ARCH__)
#error "gemmtune's CUTLASS kernels need sm_90a (-gencode=arch=compute_90a,code=sm_90a)"
#endif

namespace gemmtune::cutlass_kernel {

// Operand dtypes the template takes (fp32/tf32 are left to cuBLASLt).
enum class Dt : int { bf16 = 0, fp16 = 1, e4m3 = 2, e5m2 = 3 };
enum class Sched : int { cooperative = 0, pingpong = 1 };
enum class Act : int { none = 0, relu = 1, gelu_tanh = 2, silu = 3 };
// block: DeepSeek-V3's block scaling (docs/fp8.md): one fp32 scale per 1x128 slice of A's rows
// and one per 128x128 block of B, applied to each 128-deep k block's partial sums.
enum class Scale : int { none = 0, tensorwise = 1, rowwise = 2, block = 3 };

template <Dt> struct ElementOf;
template <> struct ElementOf<Dt::bf16> { using type = cutlass::bfloat16_t; };
template <> struct ElementOf<Dt::fp16> { using type = cutlass::half_t; };
template <> struct ElementOf<Dt::e4m3> { using type = cutlass::float_e4m3_t; };
template <> struct ElementOf<Dt::e5m2> { using type = cutlass::float_e5m2_t; };

constexpr bool is_fp8(Dt t) { return t == Dt::e4m3 || t == Dt::e5m2; }
constexpr int bytes_of(Dt t) { return is_fp8(t) ? 1 : 2; }

template <Act> struct ActOf;
template <> struct ActOf<Act::none> { template <class T> using fn = cutlass::epilogue::thread::Identity<T>; };
template <> struct ActOf<Act::relu> { template <class T> using fn = cutlass::epilogue::thread::ReLu<T>; };
// GELU_taylor is the tanh approximation (torch's approximate="tanh").
template <> struct ActOf<Act::gelu_tanh> { template <class T> using fn = cutlass::epilogue::thread::GELU_taylor<T>; };
template <> struct ActOf<Act::silu> { template <class T> using fn = cutlass::epilogue::thread::SiLu<T>; };

// A stride type of CUTLASS (one static _1 and dynamic int64 modes) with its dynamic outer mode
// set to `ld` (elements); the batch mode is unused (L = 1).
template <class Stride>
Stride stride_with_ld(int64_t ld) {
  Stride s{};
  if constexpr (cute::is_static_v<cute::remove_cvref_t<decltype(cute::get<0>(s))>>)
    cute::get<1>(s) = ld;
  else
    cute::get<0>(s) = ld;
  cute::get<2>(s) = 0;
  return s;
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Runs CUTLASS's device adapter `Gemm` with `args` on `stream` (can_implement, initialize with
// `workspace`, run; `pdl`: a programmatic dependent launch): a GT_CUTLASS status; a CUDA error
// also goes to *cuda_error.
template <class Gemm>
int launch(typename Gemm::Arguments const& args, void* workspace, cudaStream_t stream, cudaError_t* cuda_error,
           bool pdl = false) {
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return GT_CUTLASS_CANNOT_IMPLEMENT;
  if (gemm.initialize(args, workspace, stream) != cutlass::Status::kSuccess) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return *cuda_error = e, GT_CUTLASS_CUDA_ERROR;
    return GT_CUTLASS_INIT_FAILED;
  }
  cutlass::Status st = gemm.run(stream, /*cuda_adapter=*/nullptr, pdl);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return *cuda_error = e, GT_CUTLASS_CUDA_ERROR;
  return st == cutlass::Status::kSuccess ? GT_CUTLASS_OK : GT_CUTLASS_CUDA_ERROR;
}

inline int device_sm_count(int device) {
  int n = 0;
  cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device);
  return n;
}

// ---- fp8 mainloop with overlapped promotion ---------------------------------------------------
// Hopper's fp8 wgmma accumulates with reduced precision, so fp8 mainloops add ("promote") the
// MMA's partial sums into fp32 accumulators every k tile (128 K elements, as torch's and
// cuBLASLt's non-fast-accumulate modes do). CUTLASS's fp8 mainloop (its CollectiveMma for
// MainloopSm90TmaGmmaWarpSpecializedFP8) promotes with one partial tile: it waits for ALL of a
// warp group's MMAs before each promotion, so that warp group's tensor-core work stops every k
// tile. Here the partial sums alternate between two register tiles: k tile t's MMAs write
// part[t % 2] while part[(t - 1) % 2] is added into the accumulators, so one k tile of MMAs is
// always in flight. It costs a third register tile: instances use it when 3 x the accumulators
// fit (<= 64 per thread: cooperative 128x128, 256x64; ping-pong 64x128, 128x64). The helpers
// first, then Fp8OverlapMainloop.

// The consumer warp group's MMA operands for thread_idx: descriptors of A's and B's tiles in
// every stage, (MMA,MMA_M,MMA_K,PIPE) and (MMA,MMA_N,MMA_K,PIPE), as a tuple. Shared by both
// overlapped mainloops below.
template <class TiledMma, class SmemLayoutA, class SmemLayoutB, class TensorStorage>
CUTLASS_DEVICE auto mma_fragments(TensorStorage& shared_tensors, int thread_idx) {
  using namespace cute;
  Tensor sA = make_tensor(make_smem_ptr(shared_tensors.smem_A.data()), SmemLayoutA{});  // (BLK_M,BLK_K,PIPE)
  Tensor sB = make_tensor(make_smem_ptr(shared_tensors.smem_B.data()), SmemLayoutB{});  // (BLK_N,BLK_K,PIPE)
  constexpr int kWarpGroups = size(TiledMma{}) / cutlass::NumThreadsPerWarpGroup;
  Layout wg_layout = make_layout(Int<kWarpGroups>{}, Int<cutlass::NumThreadsPerWarpGroup>{});
  int wg = __shfl_sync(0xFFFFFFFF, thread_idx / cutlass::NumThreadsPerWarpGroup, 0);
  TiledMma tiled_mma;
  auto thread_mma = tiled_mma.get_slice(wg_layout(wg));
  return make_tuple(thread_mma.make_fragment_A(thread_mma.partition_A(sA)),
                    thread_mma.make_fragment_B(thread_mma.partition_B(sB)));
}

// One k tile of MMAs into `part` (zeroed by the first MMA), committed as one batch, once the
// tile's stage is full; `read` moves to the next stage. Returns the tile's stage. Shared by both
// overlapped mainloops below.
template <class Pipeline, class State, class TiledMma, class FragA, class FragB, class Part>
CUTLASS_DEVICE int issue_k_tile(Pipeline& pipeline, State& read, TiledMma& tiled_mma, FragA const& tCrA,
                                FragB const& tCrB, Part& part) {
  using namespace cute;
  auto token = pipeline.consumer_try_wait(read);
  pipeline.consumer_wait(read, token);
  const int stage = read.index();
  tiled_mma.accumulate_ = GMMA::ScaleOut::Zero;
  warpgroup_fence_operand(part);
  warpgroup_arrive();
  CUTLASS_PRAGMA_UNROLL
  for (int kb = 0; kb < size<2>(tCrA); ++kb) {
    cute::gemm(tiled_mma, tCrA(_, _, kb, stage), tCrB(_, _, kb, stage), part);
    tiled_mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
  warpgroup_fence_operand(part);
  ++read;
  return stage;
}

// The k loop of both overlapped mainloops below: k tile t's MMAs are issued into partial tile
// t % 2 while tile t - 1's partial sums (tile (t - 1) % 2) are promoted once their batch is done
// (warpgroup_wait<1> leaves the newest batch in flight). issue(w) and promote(w, release) name
// the partial tile as cute::Int<0> or cute::Int<1>, at compile time, so that both tiles stay in
// registers. The last tile's promotion releases no stage: the base's mma_tail releases it.
template <class Issue, class Promote>
CUTLASS_DEVICE void overlapped_k_loop(int k_tile_count, Issue&& issue, Promote&& promote) {
  using cute::Int;
  issue(Int<0>{});
  int t = 1;
  CUTLASS_PRAGMA_NO_UNROLL
  for (; t + 1 < k_tile_count; t += 2) {
    issue(Int<1>{});
    cute::warpgroup_wait<1>();
    promote(Int<0>{}, true);
    issue(Int<0>{});
    cute::warpgroup_wait<1>();
    promote(Int<1>{}, true);
  }
  if (t < k_tile_count) {  // an even count: tile t (odd) is the last
    issue(Int<1>{});
    cute::warpgroup_wait<1>();
    promote(Int<0>{}, true);
    cute::warpgroup_wait<0>();
    promote(Int<1>{}, false);
  } else {
    cute::warpgroup_wait<0>();
    promote(Int<0>{}, false);
  }
}

template <class Policy> struct IsFp8Mainloop : std::false_type {};
template <int Stages, class Cluster, class Schedule>
struct IsFp8Mainloop<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecializedFP8<Stages, Cluster, Schedule>> : std::true_type {};

// Fp8OverlapMainloop is derived from the builder's collective (same shared memory, pipeline,
// loads, arguments and mma_tail, which releases the one stage still held, as K_PIPE_MMAS = 1
// there); only the consumer's mma() is replaced. The kernel calls mma() on this type.
template <class Built>
struct Fp8OverlapMainloop : Built {
  static_assert(IsFp8Mainloop<typename Built::DispatchPolicy>::value, "derives from CUTLASS's fp8 (promoting) mainloop");
  using typename Built::MainloopPipeline;
  using typename Built::PipelineState;
  using typename Built::TensorStorage;
  using typename Built::Params;
  using typename Built::TiledMma;
  using typename Built::SmemLayoutA;
  using typename Built::SmemLayoutB;
  static_assert(Built::K_PIPE_MMAS == 1, "mma_tail of the base must release exactly one stage");

  // accum: this thread's (MMA, MMA_M, MMA_N) fp32 accumulators of the tile, overwritten.
  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(MainloopPipeline pipeline, PipelineState smem_pipe_read, FrgTensorC& accum, int k_tile_count,
                          int thread_idx, TensorStorage& shared_tensors, typename Built::Params const&) {
    using namespace cute;
    TiledMma tiled_mma;
    auto frags = mma_fragments<TiledMma, SmemLayoutA, SmemLayoutB>(shared_tensors, thread_idx);
    auto& tCrA = get<0>(frags);
    auto& tCrB = get<1>(frags);
    Tensor part0 = make_fragment_like(accum);
    Tensor part1 = make_fragment_like(accum);
    clear(accum);
    warpgroup_fence_operand(accum);
    if (k_tile_count <= 0) return;

    auto issue = [&](auto& part) { issue_k_tile(pipeline, smem_pipe_read, tiled_mma, tCrA, tCrB, part); };
    // After the previous batch completed (wait<N> leaves the newest N in flight): add `part`
    // into the accumulators, then hand that k tile's stage back to the producer.
    PipelineState smem_pipe_release = smem_pipe_read;
    auto promote = [&](auto& part, bool release) {
      warpgroup_fence_operand(part);
      warpgroup_fence_operand(accum);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(accum); ++i) accum(i) += part(i);
      warpgroup_fence_operand(accum);
      if (release) {
        pipeline.consumer_release(smem_pipe_release);
        ++smem_pipe_release;
      }
    };

    auto part = [&](auto w) -> auto& {
      if constexpr (decltype(w)::value == 0) return part0; else return part1;
    };
    overlapped_k_loop(k_tile_count, [&](auto w) { issue(part(w)); },
                      [&](auto w, bool release) { promote(part(w), release); });
  }
};

// ---- block-scaled fp8 mainloop with overlapped promotion --------------------------------------
// Block scaling (Scale::block) multiplies each 128-deep k block's partial sums by that block's
// scales: A's [row, kb] (one per row of the tile) times B's [n block, kb] (one per tile: tile N is
// 128). CUTLASS's blockwise collective (MainloopSm90TmaGmmaWarpSpecializedBlockwiseFP8) loads the
// scales of each stage beside its tiles (A's by TMA, B's by cp.async) and then, like its tensorwise
// fp8 mainloop, waits for all of a warp group's MMAs before each promotion. Here, as in
// Fp8OverlapMainloop, the partial sums alternate between two register tiles, so that k block t's
// MMAs run while block t - 1's partial sums are scaled into the accumulators:
//   accum += part[(t - 1) % 2] * (sa[row] * sb)
// Each k block's scales are read from its stage into registers when its MMAs are issued, and the
// stage is released after its promotion. Same shared memory, pipeline, loads and mma_tail as the
// base (whose mma_tail releases exactly the last stage).
template <class Policy> struct IsBlockFp8Mainloop : std::false_type {};
template <int Stages, class Cluster, class Schedule>
struct IsBlockFp8Mainloop<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecializedBlockwiseFP8<Stages, Cluster, Schedule>>
    : std::true_type {};

template <class Built>
struct Fp8BlockOverlapMainloop : Built {
  static_assert(IsBlockFp8Mainloop<typename Built::DispatchPolicy>::value, "derives from CUTLASS's blockwise fp8 mainloop");
  using typename Built::MainloopPipeline;
  using typename Built::PipelineState;
  using typename Built::TensorStorage;
  using typename Built::TiledMma;
  using typename Built::SmemLayoutA;
  using typename Built::SmemLayoutB;
  using typename Built::SmemLayoutSFA;
  using typename Built::SmemLayoutSFB;
  using typename Built::TileShape;
  using Scale = typename Built::ElementBlockScale;
  static_assert(Built::ScaleNsPerTile == 1, "one B scale per tile and k block: tile N must be the 128 of a B block");
  static_assert(Built::ScaleMsPerTile == cute::size<0>(TileShape{}), "one A scale per row and k block (1x128 slices)");
  static_assert(cute::size<2>(TileShape{}) == 128, "a k tile is one 128-deep scale block");
  static_assert(Built::K_PIPE_MMAS == 1, "mma_tail of the base must release exactly one stage");

  // accum: this thread's (MMA, MMA_M, MMA_N) fp32 accumulators of the tile, overwritten.
  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(MainloopPipeline pipeline, PipelineState smem_pipe_read, FrgTensorC& accum, int k_tile_count,
                          int thread_idx, TensorStorage& shared_tensors, typename Built::Params const&) {
    using namespace cute;
    // The stages' scales seen as (BLK_M, BLK_N, (1, PIPE)) tensors that broadcast (stride 0) A's
    // over N and B's over M, so that partition_C gives each thread the scales of its accumulators.
    Tensor sSFA = make_tensor(
        make_smem_ptr(shared_tensors.smem_SFA.data()),
        make_layout(make_shape(get<0>(shape(SmemLayoutSFA{})), get<1>(TileShape{}),
                               make_shape(get<1>(shape(SmemLayoutSFA{})), get<2>(shape(SmemLayoutSFA{})))),
                    make_stride(get<0>(stride(SmemLayoutSFA{})), _0{},
                                make_stride(get<1>(stride(SmemLayoutSFA{})), get<2>(stride(SmemLayoutSFA{}))))));
    Tensor sSFB = make_tensor(
        make_smem_ptr(shared_tensors.smem_SFB.data()),
        make_layout(make_shape(get<0>(TileShape{}), get<0>(shape(SmemLayoutSFB{})),
                               make_shape(get<1>(shape(SmemLayoutSFB{})), get<2>(shape(SmemLayoutSFB{})))),
                    make_stride(_0{}, get<0>(stride(SmemLayoutSFB{})),
                                make_stride(get<1>(stride(SmemLayoutSFB{})), get<2>(stride(SmemLayoutSFB{}))))));
    TiledMma tiled_mma;
    auto frags = mma_fragments<TiledMma, SmemLayoutA, SmemLayoutB>(shared_tensors, thread_idx);
    auto& tCrA = get<0>(frags);
    auto& tCrB = get<1>(frags);
    Tensor tCsSFA = tiled_mma.get_slice(thread_idx).partition_C(sSFA);  // (MMA,MMA_M,MMA_N,(1,PIPE))
    Tensor tCsSFB = tiled_mma.get_slice(thread_idx).partition_C(sSFB);
    // Per partial tile: its k block's combined scales sa[row] * sb, broadcast like accum.
    Tensor scale0 = make_tensor_like<Scale>(tCsSFA(_, _, _, _0{}));
    Tensor scale1 = make_tensor_like<Scale>(tCsSFA(_, _, _, _0{}));
    Tensor sfb = make_tensor_like<Scale>(tCsSFB(_, _, _, _0{}));
    Tensor part0 = make_fragment_like(accum);
    Tensor part1 = make_fragment_like(accum);
    clear(accum);
    warpgroup_fence_operand(accum);
    if (k_tile_count <= 0) return;

    // One k block of MMAs into `part`; its scales into `scale` while the MMAs run.
    auto issue = [&](auto& part, auto& scale) {
      const int stage = issue_k_tile(pipeline, smem_pipe_read, tiled_mma, tCrA, tCrB, part);
      copy(tCsSFA(_, _, _, make_coord(_0{}, stage)), scale);
      copy(tCsSFB(_, _, _, make_coord(_0{}, stage)), sfb);
      const Scale sb = sfb(_0{});
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(filter_zeros(scale)); ++i) filter_zeros(scale)(i) = filter_zeros(scale)(i) * sb;
    };
    // After the previous batch completed (wait<N> leaves the newest N in flight): add `part`,
    // scaled, into the accumulators, then hand that k block's stage back to the producer.
    PipelineState smem_pipe_release = smem_pipe_read;
    auto promote = [&](auto& part, auto& scale, bool release) {
      warpgroup_fence_operand(part);
      warpgroup_fence_operand(accum);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(accum); ++i) accum(i) += part(i) * scale(i);
      warpgroup_fence_operand(accum);
      if (release) {
        pipeline.consumer_release(smem_pipe_release);
        ++smem_pipe_release;
      }
    };

    auto part = [&](auto w) -> auto& {
      if constexpr (decltype(w)::value == 0) return part0; else return part1;
    };
    auto scale = [&](auto w) -> auto& {
      if constexpr (decltype(w)::value == 0) return scale0; else return scale1;
    };
    overlapped_k_loop(k_tile_count, [&](auto w) { issue(part(w), scale(w)); },
                      [&](auto w, bool release) { promote(part(w), scale(w), release); });
  }
};

template <Dt kA, Dt kB, Dt kD,                    // operand dtypes (C has D's)
          bool kARow, bool kBRow, bool kDRow,     // problem layouts: A[m,k], B[k,n], D (and C) [m,n]
          int kTileM, int kTileN, int kTileK,     // CTA tile, in kernel terms (after swap-AB)
          int kClusterM, int kClusterN,           // thread-block cluster
          Sched kSched,                           // warp-specialized schedule
          bool kHasC, bool kBias, Act kAct, Scale kScale,
          bool kSwapAB>
struct Sm90Gemm {
  // ---- the parameters' rules ------------------------------------------------------------------
  static_assert(is_fp8(kA) == is_fp8(kB), "A and B must both be 16-bit or both be fp8");
  static_assert(kA == kB || is_fp8(kA), "16-bit A and B must have the same dtype");
  static_assert(!is_fp8(kD), "D must be bf16 or fp16 (fp8 outputs need a D scale: not supported)");
  static_assert(kScale == Scale::none || is_fp8(kA), "scales apply to fp8 inputs only");
  static_assert(kTileM == 64 || kTileM == 128 || kTileM == 256, "tile M must be 64, 128 or 256");
  static_assert(kTileN == 64 || kTileN == 128 || kTileN == 192 || kTileN == 256, "tile N must be 64, 128, 192 or 256");
  static_assert(kTileK * bytes_of(kA) == 128 || kTileK * bytes_of(kA) == 256,
                "tile K must span 128 or 256 bytes (64/128 for 16-bit, 128/256 for fp8)");
  static_assert(kSched != Sched::cooperative || kTileM >= 128,
                "the cooperative schedule splits tile M over two consumer warp groups: tile M >= 128");
  static_assert(kSched != Sched::pingpong || kTileM <= 128,
                "ping-pong gives each consumer warp group a whole tile: tile M <= 128");
  // fp32 accumulators per consumer thread: cooperative splits a tile over 256 threads, ping-pong
  // gives each 128-thread warp group a whole tile; more than 128 registers of them spills, and
  // fp8 keeps at least one more tile of partial sums (promotion), so more than 96 spills there.
  static constexpr int kAccPerThread = kTileM * kTileN / (kSched == Sched::cooperative ? 256 : 128);
  static_assert(kAccPerThread <= (is_fp8(kA) ? 96 : 128),
                "tile M x N too large for the schedule: at most 256x128 cooperative, 128x128 / 64x256 ping-pong "
                "(fp8: 128x192 cooperative, 64x192 ping-pong)");
  static_assert((kClusterM == 1 || kClusterM == 2) && (kClusterN == 1 || kClusterN == 2) &&
                    kClusterM * kClusterN <= 2,
                "cluster must be 1x1, 2x1 or 1x2");
  // fp8 wgmma reads both operands K-major from shared memory: A row-major, B column-major.
  static_assert(!is_fp8(kA) || (kARow && !kBRow), "fp8 needs A row-major and B column-major (K-major)");
  // Block scales: a k tile is one 128-deep scale block, tile N one 128-wide block of B's scales,
  // and the overlapped promotion keeps three accumulator tiles (<= 64 per thread).
  static constexpr bool kBlock = kScale == Scale::block;
  static_assert(!kBlock || (kTileK == 128 && kTileN == 128 && !kSwapAB && kAccPerThread <= 64),
                "block scales: tile N x K must be 128 x 128, no swap-AB, at most 64 accumulators per thread "
                "(cooperative 128x128, ping-pong 64x128)");

  // ---- kernel terms (after swap-AB) -----------------------------------------------------------
  static constexpr Dt kKA = kSwapAB ? kB : kA;
  static constexpr Dt kKB = kSwapAB ? kA : kB;
  // Kernel A = B^T [n, k]: row-major exactly when B [k, n] is column-major; likewise B = A^T.
  static constexpr bool kKARow = kSwapAB ? !kBRow : kARow;
  static constexpr bool kKBRow = kSwapAB ? !kARow : kBRow;
  static constexpr bool kKDRow = kSwapAB ? !kDRow : kDRow;

  using ElementA = typename ElementOf<kKA>::type;
  using ElementB = typename ElementOf<kKB>::type;
  using ElementD = typename ElementOf<kD>::type;
  using ElementC = std::conditional_t<kHasC, ElementD, void>;  // void: C never read
  using ElementAcc = float;
  using ElementCompute = float;
  using LayoutA = std::conditional_t<kKARow, cutlass::layout::RowMajor, cutlass::layout::ColumnMajor>;
  using LayoutB = std::conditional_t<kKBRow, cutlass::layout::RowMajor, cutlass::layout::ColumnMajor>;
  using LayoutD = std::conditional_t<kKDRow, cutlass::layout::RowMajor, cutlass::layout::ColumnMajor>;
  static constexpr int kAlignA = 16 / bytes_of(kKA);  // elements per 16 bytes (TMA)
  static constexpr int kAlignB = 16 / bytes_of(kKB);
  static constexpr int kAlignD = 16 / bytes_of(kD);

  using TileShape = cute::Shape<cute::Int<kTileM>, cute::Int<kTileN>, cute::Int<kTileK>>;  // (BLK_M,BLK_N,BLK_K)
  using ClusterShape = cute::Shape<cute::Int<kClusterM>, cute::Int<kClusterN>, cute::_1>;
  using MainloopSchedule = std::conditional_t<
      kSched == Sched::cooperative,
      std::conditional_t<kBlock, cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8Blockwise,
                         cutlass::gemm::KernelTmaWarpSpecializedCooperative>,
      std::conditional_t<kBlock, cutlass::gemm::KernelTmaWarpSpecializedPingpongFP8Blockwise,
                         cutlass::gemm::KernelTmaWarpSpecializedPingpong>>;
  using EpilogueSchedule = std::conditional_t<kSched == Sched::cooperative,
                                              cutlass::epilogue::TmaWarpSpecializedCooperative,
                                              cutlass::epilogue::TmaWarpSpecialized>;

  // ---- the epilogue visitor tree --------------------------------------------------------------
  // Vectors over the problem's m (rowwise sa) and n (bias, rowwise sb): over the kernel's rows
  // (a column broadcast) or columns (a row broadcast), depending on the swap.
  template <class Element>
  using RowVec = cutlass::epilogue::fusion::Sm90RowBroadcast<0, TileShape, Element, ElementCompute>;  // [N]
  template <class Element>
  using ColVec = cutlass::epilogue::fusion::Sm90ColBroadcast<0, TileShape, Element, ElementCompute>;  // [M]
  template <class Element>
  using VecM = std::conditional_t<kSwapAB, RowVec<Element>, ColVec<Element>>;  // problem [m]
  template <class Element>
  using VecN = std::conditional_t<kSwapAB, ColVec<Element>, RowVec<Element>>;  // problem [n]

  template <template <class> class Fn, class Out = ElementCompute>
  using Compute = cutlass::epilogue::fusion::Sm90Compute<Fn, Out, ElementCompute, cutlass::FloatRoundStyle::round_to_nearest>;
  template <class Node, class... Children>
  using EVT = cutlass::epilogue::fusion::Sm90EVT<Node, Children...>;
  using Acc = cutlass::epilogue::fusion::Sm90AccFetch;
  using Scalar1 = cutlass::epilogue::fusion::Sm90ScalarBroadcast<ElementCompute>;
  // alpha * sa * sb, each factor a value or a device pointer.
  using Scalar3 = cutlass::epilogue::fusion::Sm90ScalarBroadcast<ElementCompute, cute::Stride<cute::_0, cute::_0, cute::_0>, 3>;

  // Block scales (kernel = problem terms, no swap): A's [m, kb] stored M-major (scale of row i, k
  // block b at b * m + i), B's [nb, kb] stored with a leading dimension of round_up(kb, 4), as
  // docs/fp8.md gives them; the mainloop applies them, so the epilogue sees alpha * acc.
  using BlockScales = cutlass::detail::Sm90BlockwiseScaleConfig<1, 128, 128, cute::GMMA::Major::MN, cute::GMMA::Major::K>;
  using LayoutSFA = typename BlockScales::LayoutSFA;  // ((1, m), (128, kb), 1)
  using LayoutSFB = typename BlockScales::LayoutSFB;  // ((128, nb), (128, kb), 1)

  // Z = alpha*sa*sb * acc (tensorwise / none / block, whose scales are in acc), or
  // alpha * (sb[n] * (sa[m] * acc)) (rowwise).
  using ScaledAcc = std::conditional_t<
      kScale == Scale::rowwise,
      EVT<Compute<cutlass::multiplies>, Scalar1,
          EVT<Compute<cutlass::multiplies>, VecN<float>, EVT<Compute<cutlass::multiplies>, VecM<float>, Acc>>>,
      EVT<Compute<cutlass::multiplies>, Scalar3, Acc>>;
  // Y = beta * C + Z.
  using WithC = std::conditional_t<
      kHasC,
      EVT<Compute<cutlass::homogeneous_multiply_add>, Scalar1, cutlass::epilogue::fusion::Sm90SrcFetch<ElementD>, ScaledAcc>,
      ScaledAcc>;
  // X = Y + bias[n].
  using WithBias = std::conditional_t<kBias, EVT<Compute<cutlass::plus>, WithC, VecN<ElementD>>, WithC>;
  // D = act(X), converted to D's dtype.
  using Fusion = EVT<Compute<ActOf<kAct>::template fn, ElementD>, WithBias>;

  // ---- the kernel ----------------------------------------------------------------------------
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, ElementAcc, ElementCompute, ElementC, LayoutD, kAlignD,
      ElementD, LayoutD, kAlignD, EpilogueSchedule, Fusion>::CollectiveOp;
  // Block scales: the scale layouts travel with the operand layouts.
  using MainloopLayoutA = std::conditional_t<kBlock, cute::tuple<LayoutA, LayoutSFA>, LayoutA>;
  using MainloopLayoutB = std::conditional_t<kBlock, cute::tuple<LayoutB, LayoutSFB>, LayoutB>;
  using BuiltMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA, MainloopLayoutA, kAlignA, ElementB,
      MainloopLayoutB, kAlignB, ElementAcc, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;
  // fp8: overlapped promotion where three accumulator tiles fit (see Fp8OverlapMainloop and
  // Fp8BlockOverlapMainloop).
  static constexpr bool kOverlapPromotion = is_fp8(kA) && kAccPerThread <= 64;
  using CollectiveMainloop = std::conditional_t<
      kBlock, Fp8BlockOverlapMainloop<BuiltMainloop>,
      std::conditional_t<kOverlapPromotion, Fp8OverlapMainloop<BuiltMainloop>, BuiltMainloop>>;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, CollectiveMainloop,
                                                       CollectiveEpilogue, cutlass::gemm::PersistentScheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using Arguments = typename Gemm::Arguments;

  // ---- host side ------------------------------------------------------------------------------
  static typename Fusion::Arguments fusion_args(const GtCutlassArgs& g) {
    typename ScaledAcc::Arguments scaled = [&] {
      if constexpr (kScale == Scale::rowwise) {
        const float* sm = g.scale_a;  // [m]
        const float* sn = g.scale_b;  // [n]
        return typename ScaledAcc::Arguments{
            typename Scalar1::Arguments{{g.alpha}},
            {typename VecN<float>::Arguments{sn}, {typename VecM<float>::Arguments{sm}, {}, {}}, {}},
            {}};
      } else {
        typename Scalar3::Arguments s{};
        s.scalars[0] = g.alpha, s.scalars[1] = 1.0f, s.scalars[2] = 1.0f;
        if constexpr (kScale == Scale::tensorwise) s.scalar_ptrs[1] = g.scale_a, s.scalar_ptrs[2] = g.scale_b;
        return typename ScaledAcc::Arguments{s, {}, {}};
      }
    }();
    typename WithC::Arguments with_c = [&] {
      if constexpr (kHasC)
        return typename WithC::Arguments{typename Scalar1::Arguments{{g.beta}}, {}, scaled, {}};
      else
        return scaled;
    }();
    typename WithBias::Arguments with_bias = [&] {
      if constexpr (kBias)
        return typename WithBias::Arguments{
            with_c, typename VecN<ElementD>::Arguments{static_cast<const ElementD*>(g.bias)}, {}};
      else
        return with_c;
    }();
    return typename Fusion::Arguments{with_bias, {}};
  }

  // CUTLASS arguments in kernel terms, or a status when the problem's arguments are unusable.
  // `for_run` false (can_implement, workspace): shapes and leading dimensions only, so the
  // loader can ask before it has buffers; pointers are checked when given.
  static int arguments(const GtCutlassArgs* g, Arguments& out, bool for_run) {
    if (!g || g->abi_version != GT_CUTLASS_ABI_VERSION) return GT_CUTLASS_BAD_ABI;
    if (g->m < 1 || g->n < 1 || g->k < 1 || g->m > INT32_MAX || g->n > INT32_MAX || g->k > INT32_MAX)
      return GT_CUTLASS_BAD_ARGS;
    if (g->raster < 0 || g->raster > 2 || !(g->swizzle == 1 || g->swizzle == 2 || g->swizzle == 4 || g->swizzle == 8) ||
        (g->raster == 0 && g->swizzle != 1) || (g->flags & ~GT_CUTLASS_OVERLAP_PREVIOUS))
      return GT_CUTLASS_BAD_ARGS;
    if (for_run && (!g->a || !g->b || !g->d || (kHasC && !g->c) || (kBias && !g->bias) ||
                    (kScale != Scale::none && (!g->scale_a || !g->scale_b))))
      return GT_CUTLASS_BAD_ARGS;
    // Leading dimensions cover the contiguous extent (problem terms).
    if (g->lda < (kARow ? g->k : g->m) || g->ldb < (kBRow ? g->n : g->k) || g->ldd < (kDRow ? g->n : g->m) ||
        (kHasC && g->ldc < (kDRow ? g->n : g->m)))
      return GT_CUTLASS_BAD_ARGS;
    // TMA: 16-byte-aligned bases and leading dimensions.
    if (!aligned16(g->a) || !aligned16(g->b) || !aligned16(g->d) || !aligned16(g->c) ||
        (g->lda * bytes_of(kA)) % 16 || (g->ldb * bytes_of(kB)) % 16 || (g->ldd * bytes_of(kD)) % 16 ||
        (kHasC && (g->ldc * bytes_of(kD)) % 16))
      return GT_CUTLASS_MISALIGNED;
    // Block scales: A's are loaded by TMA, each k block's m values from b * m: m % 4 == 0 keeps
    // every k block's column on 16 bytes.
    if (kBlock && (!aligned16(g->scale_a) || g->m % 4)) return GT_CUTLASS_MISALIGNED;

    const int m = int(kSwapAB ? g->n : g->m), n = int(kSwapAB ? g->m : g->n), k = int(g->k);
    const void* pa = kSwapAB ? g->b : g->a;
    const void* pb = kSwapAB ? g->a : g->b;
    const int64_t lda = kSwapAB ? g->ldb : g->lda, ldb = kSwapAB ? g->lda : g->ldb;

    using StrideA = typename Gemm::GemmKernel::StrideA;
    using StrideB = typename Gemm::GemmKernel::StrideB;
    using StrideC = typename Gemm::GemmKernel::StrideC;
    using StrideD = typename Gemm::GemmKernel::StrideD;
    cutlass::KernelHardwareInfo hw;
    hw.device_id = g->device;
    hw.sm_count = g->sm_count > 0 ? g->sm_count : device_sm_count(g->device);
    typename CollectiveMainloop::Arguments mainloop{};
    if constexpr (kBlock) {
      using namespace cute;
      const int32_t mb = int32_t(m), kb = int32_t((k + 127) / 128), nb = int32_t((n + 127) / 128);
      const int32_t ldsb = (kb + 3) / 4 * 4;
      mainloop = {static_cast<const ElementA*>(pa), stride_with_ld<StrideA>(lda),
                  static_cast<const ElementB*>(pb), stride_with_ld<StrideB>(ldb),
                  g->scale_a,
                  LayoutSFA{make_shape(make_shape(_1{}, mb), make_shape(Int<128>{}, kb), int32_t(1)),
                            make_stride(make_stride(_0{}, _1{}), make_stride(_0{}, mb), mb * kb)},
                  g->scale_b,
                  LayoutSFB{make_shape(make_shape(Int<128>{}, nb), make_shape(Int<128>{}, kb), int32_t(1)),
                            make_stride(make_stride(_0{}, ldsb), make_stride(_0{}, _1{}), nb * ldsb)}};
    } else {
      mainloop = {static_cast<const ElementA*>(pa), stride_with_ld<StrideA>(lda),
                  static_cast<const ElementB*>(pb), stride_with_ld<StrideB>(ldb)};
    }
    out = Arguments{cutlass::gemm::GemmUniversalMode::kGemm,
                    {m, n, k, 1},
                    mainloop,
                    {fusion_args(*g), static_cast<const ElementD*>(kHasC ? g->c : nullptr),
                     stride_with_ld<StrideC>(kHasC ? g->ldc : g->ldd), static_cast<ElementD*>(g->d),
                     stride_with_ld<StrideD>(g->ldd)},
                    hw};
    using RasterOptions = typename Gemm::GemmKernel::TileScheduler::RasterOrderOptions;
    out.scheduler.raster_order = g->raster == 1   ? RasterOptions::AlongM
                                 : g->raster == 2 ? RasterOptions::AlongN
                                                  : RasterOptions::Heuristic;
    out.scheduler.max_swizzle_size = g->swizzle;
    return GT_CUTLASS_OK;
  }

  static int can_implement(const GtCutlassArgs* g) {
    Arguments args;
    if (int st = arguments(g, args, false); st != GT_CUTLASS_OK) return st;
    return Gemm::can_implement(args) == cutlass::Status::kSuccess ? GT_CUTLASS_OK : GT_CUTLASS_CANNOT_IMPLEMENT;
  }

  static size_t workspace(const GtCutlassArgs* g) {
    Arguments args;
    if (arguments(g, args, false) != GT_CUTLASS_OK) return 0;
    return Gemm::get_workspace_size(args);
  }

  static int run(const GtCutlassArgs* g, void* workspace, cudaStream_t stream, cudaError_t* cuda_error) {
    Arguments args;
    if (int st = arguments(g, args, true); st != GT_CUTLASS_OK) return st;
    // This .so has its own CUDA runtime: make the caller's device current in it.
    if (cudaError_t e = cudaSetDevice(g->device); e != cudaSuccess) return *cuda_error = e, GT_CUTLASS_CUDA_ERROR;
    return launch<Gemm>(args, workspace, stream, cuda_error, (g->flags & GT_CUTLASS_OVERLAP_PREVIOUS) != 0);
  }
};

}  // namespace gemmtune::cutlass_kernel

// The C entry points of one instance (gt_cutlass_abi.h), expanded in its namespace
// GT_CUTLASS_MEMBER: named GT_CUTLASS_MEMBER_ENTRY(gt_cutlass_run) etc., hidden; the member's
// selector exports them (gt_cutlass_abi.h, "Several instances in one translation unit").
// `CONFIG` is a string literal naming the config; the loader compares it with what it asked for.
#define GT_CUTLASS_DEFINE_ENTRY_POINTS(Instance, CONFIG)                                           \
  static thread_local cudaError_t gt_last_cuda_error = cudaSuccess;                                \
  extern "C" int GT_CUTLASS_MEMBER_ENTRY(gt_cutlass_abi_version)(void) { return GT_CUTLASS_ABI_VERSION; } \
  extern "C" const char* GT_CUTLASS_MEMBER_ENTRY(gt_cutlass_config)(void) { return CONFIG; }      \
  extern "C" int GT_CUTLASS_MEMBER_ENTRY(gt_cutlass_can_implement)(const GtCutlassArgs* g) {       \
    return Instance::can_implement(g);                                                             \
  }                                                                                                \
  extern "C" size_t GT_CUTLASS_MEMBER_ENTRY(gt_cutlass_workspace)(const GtCutlassArgs* g) {        \
    return Instance::workspace(g);                                                                 \
  }                                                                                                \
  extern "C" int GT_CUTLASS_MEMBER_ENTRY(gt_cutlass_run)(const GtCutlassArgs* g, void* ws, cudaStream_t s) { \
    gt_last_cuda_error = cudaSuccess;                                                              \
    return Instance::run(g, ws, s, &gt_last_cuda_error);                                           \
  }                                                                                                \
  extern "C" const char* GT_CUTLASS_MEMBER_ENTRY(gt_cutlass_status_text)(int st) {                \
    switch (st) {                                                                                  \
      case GT_CUTLASS_OK: return "ok";                                                             \
      case GT_CUTLASS_BAD_ABI: return "ABI version mismatch";                                      \
      case GT_CUTLASS_BAD_ARGS: return "bad arguments (null pointer, size or leading dimension)";  \
      case GT_CUTLASS_MISALIGNED: return "misaligned: TMA needs 16-byte-aligned pointers and leading dimensions"; \
      case GT_CUTLASS_CANNOT_IMPLEMENT: return "CUTLASS cannot implement this problem with this config"; \
      case GT_CUTLASS_INIT_FAILED: return "CUTLASS initialize failed";                             \
      case GT_CUTLASS_CUDA_ERROR: return cudaGetErrorString(gt_last_cuda_error);                   \
    }                                                                                              \
    return "unknown status";                                                                       \
  }
