// Timing candidates on the GPU, the way a kernel runs in isolation: cold L2, one launch
// between two CUDA events.
//
// Every timed launch is preceded by an L2 flush (a read of 2x the L2 that leaves clean lines:
// l2_flush.hpp says why not a memset) and a short GPU spin
// (TuneOptions::spin_us), both outside the timed region; launches rotate over copies of the
// inputs that together exceed 3x the L2. One sample is the median of several such launches.
// No CUDA graph is needed for short kernels: the spin keeps the GPU busy while the host
// enqueues the launch, so host launch overhead never lands inside the timed region, and the
// timed kernel starts behind a compute kernel, as the bench times it (without the spin, the
// race timed some short fp8 kernels ~1 us slower and some lm_head tiles 20% slower than the
// bench's head-to-head did). A graph of back-to-back launches was tried on the H200 and hid
// the second-kernel gap of split-k candidates, which isolated launches, as torch and users see
// them, do pay.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <vector>

#include "backends/backend.hpp"
#include "core/cuda.hpp"
#include "gemmtune/device.hpp"
#include "gemmtune/engine_options.hpp"
#include "tune/l2_flush.hpp"
#include "tune/ops.hpp"

namespace gemmtune {

// One instance per op (GemmOp, SoftmaxOp, GroupedOp; explicit instantiations in gpu_bench.cpp).
// Inputs come from OpTraits<Op>::timing_operands, per workload (timing_splits: grouped GEMMs are
// timed on a balanced and a skewed split); ops whose inputs exceed 3x L2 (softmax's 1 GiB rows)
// use one set a workload.
template <class Op>
class GpuBench {
 public:
  using Problem = typename Op::Problem;
  using Operands = typename OpTraits<Op>::Operands;

  // Allocates the rotated operand sets, warms the GPU up for opt.warmup_ms, and picks the
  // launches per sample from a first estimate of the candidates' times. `before_run` (may be
  // empty) is told the index of each candidate the warm-up is about to run (the tuning helper
  // names it to the caller, src/engine/isolate.hpp); each warm-up run is waited for.
  GpuBench(const Problem& p, std::vector<detail::CandidateFor<Op>*> cands, const TuneOptions& opt,
           const DeviceInfo& dev, const Stream& stream, const std::function<void(size_t)>& before_run = {});

  // Microseconds of one launch of candidate i: per workload the median of launches_per_sample()
  // isolated, cold-L2 launches, and the mean of those medians over the workloads. Throws Error
  // if the candidate fails.
  double sample(size_t i);
  int launches_per_sample() const { return reps_; }

 private:
  void run_once(size_t i, size_t w);

  Problem p_;
  std::vector<detail::CandidateFor<Op>*> cands_;
  const Stream& stream_;
  std::vector<std::vector<std::unique_ptr<Operands>>> sets_;  // [workload][rotated copy]
  std::vector<size_t> next_set_;                              // per workload
  L2Flush flush_;
  std::vector<Event> start_, stop_;  // one pair per launch of a sample
  int reps_ = 1;                     // launches per workload and sample
  double spin_us_ = 0;
};

extern template class GpuBench<GemmOp>;
extern template class GpuBench<SoftmaxOp>;
extern template class GpuBench<GroupedOp>;

}  // namespace gemmtune
