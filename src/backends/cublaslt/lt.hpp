// cuBLASLt plumbing for the cublaslt backend: the check macro, RAII owners, the mapping of a
// GemmProblem onto cuBLASLt's column-major matmul, algo ids and names, and the static rules.
//
// Mapping (cuBLASLt is column-major; a row-major [r, c] matrix is a column-major [c, r] one):
//   D row-major:    compute D^T[n, m] = B^T A^T, i.e. cuBLAS A = our B, cuBLAS B = our A, and
//                   cuBLAS M = n, N = m. Bias over n is then over the rows of D^T, which is what
//                   the BIAS epilogues add. nn.Linear (A row, B col) becomes transa = T, transb = N.
//   D column-major: compute D[m, n] = A B directly (cuBLAS A = our A, cuBLAS B = our B).
// In both cases FP8's required "TN" form (cuBLAS A transposed, B not) means A row-major and
// B column-major.
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/problem.hpp"

// Throws gemmtune::Error with cuBLASLt's status name and text for a failed call.
#define GT_CUBLAS(expr)                                                                         \
  do {                                                                                          \
    cublasStatus_t gt_st_ = (expr);                                                             \
    if (gt_st_ != CUBLAS_STATUS_SUCCESS) GT_THROW(::gemmtune::lt::status_text(gt_st_) + " in " #expr); \
  } while (0)

namespace gemmtune::lt {

// Heuristic preferences: the most workspace a candidate may ask for, and the base-pointer
// alignment every candidate relies on. A, B, C, D and bias must be 16-byte aligned (run() checks).
constexpr size_t kMaxWorkspace = size_t(32) << 20;
constexpr uint32_t kAlignment = 16;
constexpr int kHeuristicCount = 64;

// ---- torch's configuration (docs/cublaslt.md: the attribute-by-attribute comparison) --------

// How PyTorch reaches cuBLAS for the call that computes this problem:
//   scaled_gemm    torch._scaled_mm (every FP8 problem): cublasLtMatmul, heuristic asked for 1
//                  result with MAX_WORKSPACE = the Lt workspace and NO alignment preferences
//                  (cuBLASLt's default: 256 bytes for A, B, C and D);
//   gemm_and_bias  addmm / F.linear with a 1-D bias, no C, m, n, k > 1: cublasLtMatmul,
//                  1 result, the Lt workspace, alignments from the pointers (capped at 256;
//                  torch's D preference is the BIAS pointer's alignment);
//   gemm_ex        torch.mm / F.linear without bias / addmm with a 2-D C, fp32: cublasGemmEx
//                  (torch's default BLAS backend is cuBLAS, not Lt); cuBLAS picks internally
//                  with the handle's workspace. Reproduced here as the closest Lt call: 1 result,
//                  the cuBLAS workspace, 256-byte alignment (not exact: see docs/cublaslt.md).
enum class TorchPath { scaled_gemm, gemm_and_bias, gemm_ex };
TorchPath torch_path(const GemmProblem& p);
const char* torch_path_text(TorchPath path);  // "scaled_gemm", "gemm_and_bias", "gemm_ex"

// Alignment torch's caching allocator gives every tensor (and what torch's _getAlignment caps at).
constexpr uint32_t kTorchAlignment = 256;
constexpr int kTorchHeuristicCount = 1;  // torch asks for one result and takes it

// Workspace sizes as torch computes them (bytes), capped at kMaxWorkspace, from the value of
// torch's environment variable (nullptr: unset):
// cuBLASLt's: CUBLASLT_WORKSPACE_SIZE in KiB, default 1024 KiB (CublasHandlePool.cpp);
// cuBLAS's: CUBLAS_WORKSPACE_CONFIG (":SIZE_KiB:COUNT" pairs), default 32 MiB on sm_90..sm_12x,
// else 4096 KiB x 2 + 16 KiB x 8.
// The backend passes nullptr, i.e. torch's defaults: the library reads the environment only in
// core/settings.cpp, which does not carry these two variables (docs/cublaslt.md).
size_t torch_lt_workspace(const char* cublaslt_workspace_size = nullptr);
size_t torch_cublas_workspace(int cc_major, const char* cublas_workspace_config = nullptr);

// One heuristic preference descriptor's settings. An alignment of 0 leaves the attribute unset
// (cuBLASLt's default, 256 bytes), as torch's scaled_gemm does.
struct Prefs {
  uint64_t max_workspace = kMaxWorkspace;
  uint32_t align_a = kAlignment, align_b = kAlignment, align_c = kAlignment, align_d = kAlignment;
  int count = kHeuristicCount;  // results asked for
};
Prefs gemmtune_prefs();
// torch's preferences for this problem with every pointer aligned to `align` bytes (torch's
// allocator: 256). scaled_gemm ignores `align` where it is 256 (it sets none: default 256).
Prefs torch_prefs(const GemmProblem& p, int cc_major, uint32_t align = kTorchAlignment);

// "CUBLAS_STATUS_NOT_SUPPORTED (the functionality requested is not supported)".
std::string status_text(cublasStatus_t st);

cudaDataType_t cuda_type(DType t);

// ---- RAII owners ---------------------------------------------------------------------------

class Handle {
 public:
  Handle();  // cublasLtCreate; throws Error
  ~Handle();
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  cublasLtHandle_t get() const { return h_; }

 private:
  cublasLtHandle_t h_ = nullptr;
};

class MatmulDesc {
 public:
  MatmulDesc(cublasComputeType_t compute, cudaDataType_t scale);
  ~MatmulDesc();
  MatmulDesc(const MatmulDesc&) = delete;
  MatmulDesc& operator=(const MatmulDesc&) = delete;
  cublasLtMatmulDesc_t get() const { return d_; }
  template <class T>
  void set(cublasLtMatmulDescAttributes_t attr, const T& value) {
    GT_CUBLAS(cublasLtMatmulDescSetAttribute(d_, attr, &value, sizeof(T)));
  }

 private:
  cublasLtMatmulDesc_t d_ = nullptr;
};

class MatrixLayout {
 public:
  // Column-major rows x cols with leading dimension ld (elements).
  MatrixLayout(cudaDataType_t type, uint64_t rows, uint64_t cols, int64_t ld);
  ~MatrixLayout();
  MatrixLayout(const MatrixLayout&) = delete;
  MatrixLayout& operator=(const MatrixLayout&) = delete;
  cublasLtMatrixLayout_t get() const { return l_; }

 private:
  cublasLtMatrixLayout_t l_ = nullptr;
};

class Preference {
 public:
  explicit Preference(const Prefs& prefs = gemmtune_prefs());
  ~Preference();
  Preference(const Preference&) = delete;
  Preference& operator=(const Preference&) = delete;
  cublasLtMatmulPreference_t get() const { return p_; }

 private:
  cublasLtMatmulPreference_t p_ = nullptr;
};

// ---- one problem as a cuBLASLt matmul ------------------------------------------------------

// The matmul descriptor and the four layouts of one problem, created once. Per-call pointers
// (bias, FP8 scales) hold placeholders aligned to `placeholder_align` bytes (16; 256 for the
// torch-style query) until bind() sets the real ones: cuBLASLt's heuristic and AlgoCheck never
// dereference them but read their alignment.
class Plan {
 public:
  explicit Plan(const GemmProblem& p, uint32_t placeholder_align = kAlignment);
  // Sets bias / scale pointers of `args` on the descriptor when they changed since last call.
  void bind(const GemmArgs& args);
  bool swapped() const { return swap_; }  // D row-major: computing D^T = B^T A^T
  // Our operands in cuBLAS's A / B roles.
  const void* lt_a(const GemmArgs& g) const { return swap_ ? g.b : g.a; }
  const void* lt_b(const GemmArgs& g) const { return swap_ ? g.a : g.b; }

  MatmulDesc desc;
  std::unique_ptr<MatrixLayout> a, b, c, d;

 private:
  void configure(const GemmProblem& p, cublasOperation_t op_a, cublasOperation_t op_b);

  bool swap_;
  bool bias_;
  ScaleMode scale_;
  const void* bound_bias_;
  const void* bound_sa_;  // cuBLAS A's scale (ours: swap_ ? sb : sa)
  const void* bound_sb_;
};

cublasComputeType_t compute_type(const GemmProblem& p);
cublasLtEpilogue_t epilogue(const GemmProblem& p);  // silu -> bias-only (a separate pass follows)

// ---- algo ids and names --------------------------------------------------------------------

// 128 lowercase hex digits of the 64 algo bytes; stable within one cuBLASLt version.
std::string algo_to_hex(const cublasLtMatmulAlgo_t& algo);
// Inverse of algo_to_hex (either case); throws Error naming the id when it is not 128 hex digits.
cublasLtMatmulAlgo_t algo_from_hex(std::string_view id);

// The torch baseline candidate's id: "torch-" + hex(main) + "-" + hex(fallback), where main is
// the algo torch's heuristic call gives (256-byte pointers) and fallback the one the same call
// gives for 16-byte pointers (run() takes it for pointers aligned to less than 256 bytes).
constexpr std::string_view kTorchIdPrefix = "torch-";
std::string torch_id(const cublasLtMatmulAlgo_t& main, const cublasLtMatmulAlgo_t& fallback);
bool is_torch_id(std::string_view id);
// Inverse of torch_id; throws Error naming the id when it is malformed.
void parse_torch_id(std::string_view id, cublasLtMatmulAlgo_t& main, cublasLtMatmulAlgo_t& fallback);

bool same_algo(const cublasLtMatmulAlgo_t& x, const cublasLtMatmulAlgo_t& y);  // same 64 bytes
// Indices of `results` that stay plain candidates beside the torch baseline (nullptr: none):
// first occurrence of each algo, and none equal to the baseline's main algo (same algo config
// => one candidate: for the engine's own 256-byte-aligned buffers the two would run the same
// kernel).
std::vector<size_t> plain_candidates(const std::vector<cublasLtMatmulAlgo_t>& results,
                                     const cublasLtMatmulAlgo_t* baseline);

// Enum ids of cublasLt.h as text (lt_names.cpp); unknown ids give "tile#<id>" etc.
std::string tile_text(uint32_t tile_id);        // "128x256", "auto" for UNDEFINED
std::string cluster_text(uint32_t cluster_id);  // "2x1x1", "auto"
// Stage id -> K per stage and stage count (0 = chosen automatically); false if unknown.
bool stages_dims(uint32_t stages_id, int& k, int& count);

// "algo=66 tile=128x256x64 stages=4 splitk=1 swz=0 custom=0 cluster=2x1x1".
std::string describe_algo(const cublasLtMatmulAlgo_t& algo);

// ---- rules ---------------------------------------------------------------------------------

// cuBLASLt's own limits for a valid problem, decided without a GPU (shapes, dtypes, layouts,
// and the device's compute capability from `dev` for rowwise FP8 scales).
Verdict static_verdict(const GemmProblem& p, const DeviceInfo& dev);

}  // namespace gemmtune::lt
