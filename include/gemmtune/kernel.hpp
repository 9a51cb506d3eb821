// gemmtune: a selected, loaded kernel, cheap to run many times.
//
// One class template serves every op the engine tunes: KernelFor<Op> holds the op's problem
// and the chosen candidate. Kernel (GEMM) and SoftmaxKernel (gemmtune/softmax.hpp) are its
// two instances.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "gemmtune/problem.hpp"

namespace gemmtune {

// Device pointers for one run; shapes and dtypes are the kernel's problem's.
struct GemmArgs {
  const void* a = nullptr;        // [m, k]
  const void* b = nullptr;        // [k, n]
  const void* c = nullptr;        // [m, n], needed when problem.beta != 0
  void* d = nullptr;              // [m, n]
  const void* bias = nullptr;     // [n], needed when problem.bias
  const float* scale_a = nullptr; // fp8 with scales: [1] tensorwise, [m] rowwise, [kb, m] block
  const float* scale_b = nullptr; // fp8 with scales: [1] tensorwise, [n] rowwise, [nb, round_up(kb, 4)]
                                  // block (layouts: gemmtune/problem.hpp; scale_a/b_elems())
};

// How one run is launched.
struct RunOptions {
  // Programmatic dependent launch (PDL): a kernel that supports it (Kernel::can_overlap(): the
  // native decode, CuTe DSL and CUTLASS GEMM kernels) may start before the previous kernel on
  // the stream has finished and read its weights (B) meanwhile; it waits for that kernel to
  // complete before it reads anything else (A, C, bias, scales) or writes D. The caller promises
  // that the previous kernel does not write B. cuBLASLt's and Triton's kernels launch as usual.
  // Off by default.
  bool overlap_previous = false;
};

// The op tag of GEMMs: names the problem and argument types of the tune path's instance.
struct GemmOp {
  using Problem = GemmProblem;
  using Args = GemmArgs;
  static constexpr const char* name = "gemm";
};

namespace detail {
template <class Op>
class CandidateFor;
using Candidate = CandidateFor<GemmOp>;
}  // namespace detail

template <class Op>
class KernelFor {
 public:
  using Problem = typename Op::Problem;
  using Args = typename Op::Args;

  KernelFor() = default;
  KernelFor(Problem problem, std::shared_ptr<detail::CandidateFor<Op>> impl);

  const Problem& problem() const { return problem_; }
  std::string backend() const;
  std::string name() const;  // printable config
  std::string id() const;    // stable id the backend reloads it from
  explicit operator bool() const { return impl_ != nullptr; }

  // Enqueues the op on `stream`. Throws Error when a required pointer is missing or misaligned.
  void run(const Args& args, cudaStream_t stream = nullptr, const RunOptions& options = {}) const;
  // Whether RunOptions::overlap_previous changes how this kernel launches.
  bool can_overlap() const;

 private:
  Problem problem_;
  std::shared_ptr<detail::CandidateFor<Op>> impl_;
};

// GEMM: D = act(alpha * scale(A @ B) + beta * C + bias).
using Kernel = KernelFor<GemmOp>;
extern template class KernelFor<GemmOp>;

}  // namespace gemmtune
