// KernelFor<Op>: a selected candidate, checked arguments, run.
#include "backends/backend.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/kernel.hpp"
#include "gemmtune/grouped.hpp"
#include "gemmtune/softmax.hpp"

namespace gemmtune {

template <class Op>
KernelFor<Op>::KernelFor(Problem problem, std::shared_ptr<detail::CandidateFor<Op>> impl)
    : problem_(std::move(problem)), impl_(std::move(impl)) {}

template <class Op>
std::string KernelFor<Op>::backend() const { return impl_ ? impl_->backend() : ""; }
template <class Op>
std::string KernelFor<Op>::name() const { return impl_ ? impl_->name() : ""; }
template <class Op>
std::string KernelFor<Op>::id() const { return impl_ ? impl_->id() : ""; }

namespace {
bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }
void need(const void* p, const char* field) {
  GT_CHECK(p, std::string("args.") + field + ": null, but the problem needs it");
  GT_CHECK(aligned16(p), std::string("args.") + field + ": must be 16-byte aligned");
}
void check_args(const GemmProblem& p, const GemmArgs& args) {
  need(args.a, "a");
  need(args.b, "b");
  need(args.d, "d");
  if (p.uses_c()) need(args.c, "c (beta != 0)");
  if (p.bias) need(args.bias, "bias");
  if (p.scale == ScaleMode::block) {  // CUTLASS's and the CuTe DSL's kernels load them by TMA
    need(args.scale_a, "scale_a (block scales)");
    need(args.scale_b, "scale_b (block scales)");
  } else if (p.scale != ScaleMode::none) {
    GT_CHECK(args.scale_a, "args.scale_a: null, but the problem has fp8 scales");
    GT_CHECK(args.scale_b, "args.scale_b: null, but the problem has fp8 scales");
  }
}
void check_args(const SoftmaxProblem&, const SoftmaxArgs& args) {
  need(args.x, "x");
  need(args.y, "y");
}
void check_args(const GroupedGemmProblem& p, const GroupedGemmArgs& args) {
  need(args.a, "a");
  need(args.b, "b");
  need(args.d, "d");
  need(args.rows, "rows");
  // The kernels index rows in 32 bits: capacity (contiguous) or groups * capacity (masked).
  const int64_t rows = p.layout == GroupedLayout::masked ? p.groups * args.capacity : args.capacity;
  GT_CHECK(args.capacity >= 1 && rows <= 0x7fffffff,
           "args.capacity: must be >= 1 and address fewer than 2^31 rows (got " + std::to_string(args.capacity) + ")");
  if (p.bias) need(args.bias, "bias");
  if (p.scale != ScaleMode::none) {  // the kernels load them vectorized
    need(args.scale_a, "scale_a (fp8 scales)");
    need(args.scale_b, "scale_b (fp8 scales)");
  }
}
}  // namespace

template <class Op>
void KernelFor<Op>::run(const Args& args, cudaStream_t stream, const RunOptions& options) const {
  GT_CHECK(impl_, "Kernel::run: empty kernel (default-constructed)");
  check_args(problem_, args);
  if (options.overlap_previous && impl_->can_overlap()) impl_->run_overlapped(args, stream);
  else impl_->run(args, stream);
}

template <class Op>
bool KernelFor<Op>::can_overlap() const { return impl_ && impl_->can_overlap(); }

template class KernelFor<GemmOp>;
template class KernelFor<SoftmaxOp>;
template class KernelFor<GroupedOp>;

}  // namespace gemmtune
