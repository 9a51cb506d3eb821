// One checked run of a candidate, in two halves shared by the tune's verification
// (Engine::Impl::verify) and the first-load check of a cached choice (first_load_check.hpp):
//
//   run_poisoned(cand, ops, s)     the op's outputs poisoned (NaN), one run, its launch error
//                                  thrown as Error, `s` synchronized
//   check_outputs(checker, ops, s) the outputs against the checker's GPU reference, then the
//                                  op's guard past them (a run that wrote beyond is wrong)
//
// The tune path announces its stages between the halves (a crash in the comparison is then not
// blamed on the run), so they stay two calls.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "backends/backend.hpp"
#include "core/cuda.hpp"
#include "tune/ops.hpp"

namespace gemmtune::detail {

template <class Op>
void run_poisoned(CandidateFor<Op>& cand, typename OpTraits<Op>::Operands& ops, cudaStream_t s) {
  ops.poison_outputs(s);
  cand.run(ops.args(), s);
  GT_CUDA(cudaGetLastError());
  GT_CUDA(cudaStreamSynchronize(s));
}

template <class Op>
CheckResult check_outputs(const typename OpTraits<Op>::Checker& checker, const typename OpTraits<Op>::Operands& ops,
                          cudaStream_t s) {
  CheckResult c = checker.check(s);
  if (c.ok)
    if (std::string beyond = OpTraits<Op>::guard_violation(ops, s); !beyond.empty()) c.ok = false, c.reason = beyond;
  return c;
}

}  // namespace gemmtune::detail
