// gemmtune's CUTLASS grouped GEMM for Hopper (sm_90a): a mixture-of-experts layer's experts in
// one launch (docs/grouped.md). One templated kernel, instantiated once per config by a few
// generated lines (GroupedInstanceSpec::source, src/backends/cutlass/configs.cpp), with the C
// entry points of gt_cutlass_abi.h (the grouped fields of GtCutlassArgs).
//
//   D[r, :] = alpha * (A[r, :] @ B[g]^T)      for each row r of group g
//
// B is [G, n, k] (k contiguous: kernel B column-major), A and D row-major. The rows of A and D
// belong to the groups as the int32 array `rows` on the GPU says (contiguous: cumulative ends in
// [capacity, *] buffers; masked: counts in [G, capacity, *] buffers; clamped to the buffers).
//
// Built on CUTLASS's SM90 pointer-array grouped GEMM (GemmUniversal over a GroupProblemShape with
// the PtrArray TMA warp-specialized mainloop and epilogue and its persistent group scheduler).
// That kernel takes, per group, the problem shape, the operand pointers and strides in device
// arrays; only the GPU knows the split, so each run first launches setup_groups (one thread a
// group) on the same stream, which writes those arrays into the workspace from `rows`; the host
// never sees a group's rows (no sync, CUDA-graph capturable). Empty groups have no tiles.
#pragma once

#include "sm90_gemm.cuh"  // Dt, ElementOf, Sched, aligned16, the ABI

#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/util/packed_stride.hpp"

namespace gemmtune::cutlass_kernel {

template <class Shape, class ElementA, class ElementB, class ElementD, class StrideA, class StrideB, class StrideD>
struct GroupArrays {
  using StrideAType = StrideA;
  using StrideBType = StrideB;
  using StrideDType = StrideD;
  Shape* shapes;  // [G] (m_g, n, k)
  const ElementA** a;
  const ElementB** b;
  ElementD** d;
  StrideA* stride_a;
  StrideB* stride_b;
  StrideD* stride_d;
};

// One thread a group: group g's rows [start, start + m) of A and D, clamped to the buffers.
template <bool kMasked, class Arrays, class ElementA, class ElementB, class ElementD>
__global__ void setup_groups(Arrays arr, const int32_t* rows, int groups, int64_t capacity, int n, int k,
                             const ElementA* a, const ElementB* b, ElementD* d) {
  const int g = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (g >= groups) return;
  auto clamp = [&](int64_t v) { return v < 0 ? int64_t(0) : v > capacity ? capacity : v; };
  int64_t start, m;
  if constexpr (kMasked) {
    start = int64_t(g) * capacity;
    m = clamp(rows[g]);
  } else {
    start = g == 0 ? 0 : clamp(rows[g - 1]);
    const int64_t end = clamp(rows[g]);
    m = end > start ? end - start : 0;
  }
  arr.shapes[g] = {int(m), n, k};
  arr.a[g] = a + start * k;
  arr.b[g] = b + int64_t(g) * n * k;
  arr.d[g] = d + start * n;
  // Packed: A's and D's rows are k and n apart, B[g]'s columns (its [n, k] rows) k apart.
  arr.stride_a[g] = cutlass::make_cute_packed_stride(typename Arrays::StrideAType{}, {int(m), k, 1});
  arr.stride_b[g] = cutlass::make_cute_packed_stride(typename Arrays::StrideBType{}, {n, k, 1});
  arr.stride_d[g] = cutlass::make_cute_packed_stride(typename Arrays::StrideDType{}, {int(m), n, 1});
}

template <Dt kA,                               // A's, B's and D's dtype: bf16 or fp16
          int kTileM, int kTileN, int kTileK,  // CTA tile
          int kClusterM, int kClusterN,        // thread-block cluster
          Sched kSched,                        // warp-specialized schedule
          bool kMasked>                        // rows layout: counts in [G, capacity] (else cumulative ends)
struct Sm90Grouped {
  static_assert(!is_fp8(kA), "grouped instances take bf16 or fp16");
  static_assert(kTileM == 64 || kTileM == 128 || kTileM == 256, "tile M must be 64, 128 or 256");
  static_assert(kTileN == 64 || kTileN == 128 || kTileN == 256, "tile N must be 64, 128 or 256");
  static_assert(kTileK == 64, "tile K must be 64 (128 bytes of bf16 / fp16)");
  static_assert(kSched != Sched::cooperative || kTileM >= 128, "cooperative splits tile M over two warp groups: >= 128");
  static_assert(kSched != Sched::pingpong || kTileM <= 128, "ping-pong gives a warp group a whole tile: tile M <= 128");
  static_assert(kTileM * kTileN / (kSched == Sched::cooperative ? 256 : 128) <= 128,
                "at most 128 fp32 accumulators per consumer thread");
  static_assert((kClusterM == 1 || kClusterM == 2) && (kClusterN == 1 || kClusterN == 2) && kClusterM * kClusterN <= 2,
                "cluster must be 1x1, 2x1 or 1x2");

  using Element = typename ElementOf<kA>::type;
  using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;  // (m_g, n, k) a group
  using LayoutA = cutlass::layout::RowMajor;
  using LayoutB = cutlass::layout::ColumnMajor;  // B[g] is [n, k]: (K, N) with K contiguous
  using LayoutD = cutlass::layout::RowMajor;
  static constexpr int kAlign = 8;  // 16 bytes
  using TileShape = cute::Shape<cute::Int<kTileM>, cute::Int<kTileN>, cute::Int<kTileK>>;
  using ClusterShape = cute::Shape<cute::Int<kClusterM>, cute::Int<kClusterN>, cute::_1>;
  using MainloopSchedule = std::conditional_t<kSched == Sched::cooperative,
                                              cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                                              cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong>;
  using EpilogueSchedule = std::conditional_t<kSched == Sched::cooperative,
                                              cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative,
                                              cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong>;
  // D = alpha * acc; no C.
  using Fusion = cutlass::epilogue::fusion::LinearCombination<Element, float, void, float>;
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD*, kAlign, Element, LayoutD*,
      kAlign, EpilogueSchedule, Fusion>::CollectiveOp;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA*, kAlign, Element, LayoutB*, kAlign, float,
      TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using Arguments = typename Gemm::Arguments;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  using StrideD = typename Kernel::InternalStrideD;
  using Arrays = GroupArrays<typename ProblemShape::UnderlyingProblemShape, Element, Element, Element, StrideA, StrideB,
                             StrideD>;

  // ---- host side ------------------------------------------------------------------------------
  static constexpr size_t kAlignBytes = 256;
  static size_t round_up(size_t v) { return (v + kAlignBytes - 1) / kAlignBytes * kAlignBytes; }
  // The per-group arrays at the start of the workspace, CUTLASS's workspace after them.
  static size_t arrays_bytes(int groups) {
    const size_t g = size_t(groups);
    return round_up(g * sizeof(typename ProblemShape::UnderlyingProblemShape)) + 3 * round_up(g * sizeof(void*)) +
           round_up(g * sizeof(StrideA)) + round_up(g * sizeof(StrideB)) + round_up(g * sizeof(StrideD));
  }
  static Arrays arrays_in(void* workspace, int groups) {
    auto* p = static_cast<char*>(workspace);
    const size_t g = size_t(groups);
    Arrays arr;
    arr.shapes = reinterpret_cast<typename ProblemShape::UnderlyingProblemShape*>(p);
    p += round_up(g * sizeof(*arr.shapes));
    arr.a = reinterpret_cast<const Element**>(p), p += round_up(g * sizeof(void*));
    arr.b = reinterpret_cast<const Element**>(p), p += round_up(g * sizeof(void*));
    arr.d = reinterpret_cast<Element**>(p), p += round_up(g * sizeof(void*));
    arr.stride_a = reinterpret_cast<StrideA*>(p), p += round_up(g * sizeof(StrideA));
    arr.stride_b = reinterpret_cast<StrideB*>(p), p += round_up(g * sizeof(StrideB));
    arr.stride_d = reinterpret_cast<StrideD*>(p);
    return arr;
  }

  // CUTLASS arguments over the arrays (which setup_groups fills on the GPU), or a status.
  // Problem terms: m is the capacity, A [capacity, k] or [G, capacity, k], B [G, n, k], D like A.
  static int arguments(const GtCutlassArgs* g, const Arrays& arr, Arguments& out, bool for_run) {
    if (!g || g->abi_version != GT_CUTLASS_ABI_VERSION) return GT_CUTLASS_BAD_ABI;
    if (g->groups < 1 || g->groups > 1024 || g->m < 1 || g->n < 1 || g->k < 1 || g->n > INT32_MAX ||
        g->k > INT32_MAX || g->m * (kMasked ? g->groups : 1) > INT32_MAX)
      return GT_CUTLASS_BAD_ARGS;
    if (g->raster < 0 || g->raster > 2 || !(g->swizzle == 1 || g->swizzle == 2 || g->swizzle == 4 || g->swizzle == 8) ||
        (g->raster == 0 && g->swizzle != 1) || g->flags != 0)
      return GT_CUTLASS_BAD_ARGS;
    if (for_run && (!g->a || !g->b || !g->d || !g->rows)) return GT_CUTLASS_BAD_ARGS;
    // Packed operands only: A's and D's rows k and n apart, B[g]'s rows k apart.
    if (g->lda != g->k || g->ldb != g->k || g->ldd != g->n) return GT_CUTLASS_BAD_ARGS;
    if (!aligned16(g->a) || !aligned16(g->b) || !aligned16(g->d) || (g->k * bytes_of(kA)) % 16 ||
        (g->n * bytes_of(kA)) % 16)
      return GT_CUTLASS_MISALIGNED;
    cutlass::KernelHardwareInfo hw;
    hw.device_id = g->device;
    hw.sm_count = g->sm_count > 0 ? g->sm_count : device_sm_count(g->device);
    typename CollectiveEpilogue::FusionCallbacks::Arguments fusion{};
    fusion.alpha = g->alpha;
    fusion.beta = 0.0f;
    fusion.alpha_ptr = nullptr;
    fusion.beta_ptr = nullptr;
    fusion.alpha_ptr_array = nullptr;
    fusion.beta_ptr_array = nullptr;
    fusion.dAlpha = {cute::_0{}, cute::_0{}, 0};
    fusion.dBeta = {cute::_0{}, cute::_0{}, 0};
    out = Arguments{cutlass::gemm::GemmUniversalMode::kGrouped,
                    {int(g->groups), arr.shapes, nullptr},  // the shapes are known on the GPU only
                    {arr.a, arr.stride_a, arr.b, arr.stride_b},
                    {fusion, nullptr, nullptr, arr.d, arr.stride_d},
                    hw};
    // The group scheduler's tile order: along M unless asked along N (it has no heuristic: a
    // group's largest dimension is known on the GPU only), in bands of `swizzle` tiles.
    using RasterOptions = typename Kernel::TileScheduler::RasterOrderOptions;
    out.scheduler.raster_order = g->raster == 2 ? RasterOptions::AlongN : RasterOptions::AlongM;
    out.scheduler.max_swizzle_size = g->swizzle;
    return GT_CUTLASS_OK;
  }

  static int can_implement(const GtCutlassArgs* g) {
    Arguments args;
    const Arrays none{};
    if (int st = arguments(g, none, args, false); st != GT_CUTLASS_OK) return st;
    return Gemm::can_implement(args) == cutlass::Status::kSuccess ? GT_CUTLASS_OK : GT_CUTLASS_CANNOT_IMPLEMENT;
  }

  static size_t workspace(const GtCutlassArgs* g) {
    Arguments args;
    const Arrays none{};
    if (arguments(g, none, args, false) != GT_CUTLASS_OK) return 0;
    return arrays_bytes(int(g->groups)) + Gemm::get_workspace_size(args);
  }

  static int run(const GtCutlassArgs* g, void* workspace, cudaStream_t stream, cudaError_t* cuda_error) {
    if (!g || g->abi_version != GT_CUTLASS_ABI_VERSION) return GT_CUTLASS_BAD_ABI;
    if (!workspace || g->groups < 1 || g->groups > 1024) return GT_CUTLASS_BAD_ARGS;
    const int groups = int(g->groups);
    const Arrays arr = arrays_in(workspace, groups);
    Arguments args;
    if (int st = arguments(g, arr, args, true); st != GT_CUTLASS_OK) return st;
    if (cudaError_t e = cudaSetDevice(g->device); e != cudaSuccess) return *cuda_error = e, GT_CUTLASS_CUDA_ERROR;
    setup_groups<kMasked><<<(groups + 127) / 128, 128, 0, stream>>>(
        arr, g->rows, groups, g->m, int(g->n), int(g->k), static_cast<const Element*>(g->a),
        static_cast<const Element*>(g->b), static_cast<Element*>(g->d));
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return *cuda_error = e, GT_CUTLASS_CUDA_ERROR;
    return launch<Gemm>(args, static_cast<char*>(workspace) + arrays_bytes(groups), stream, cuda_error);
  }
};

}  // namespace gemmtune::cutlass_kernel
