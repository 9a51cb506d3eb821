// Timing candidates on the GPU: one sample = several launches over rotated input copies,
// between CUDA events, after an L2 flush.
//
// Cold L2: the inputs are copied enough times that the copies together exceed 3x the L2, and
// launches rotate through them; the L2 is also flushed (a memset of 2x its size, outside the
// timed region) before each sample. Short kernels are captured as a CUDA graph of the launches
// and the graph is replayed, so that host launch gaps do not count.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

#include "backends/backend.hpp"
#include "core/cuda.hpp"
#include "gemmtune/engine.hpp"
#include "tune/operands.hpp"

namespace gemmtune {

class GpuBench {
 public:
  // Allocates the rotated operand sets, warms the GPU up for opt.warmup_ms, and picks the
  // launches per sample from a first estimate of the candidates' times.
  GpuBench(const GemmProblem& p, std::vector<detail::Candidate*> cands, const TuneOptions& opt,
           const DeviceInfo& dev, const Stream& stream);
  ~GpuBench();

  // Microseconds per launch of candidate i, one sample. Throws Error if the candidate fails.
  double sample(size_t i);
  int launches_per_sample() const { return reps_; }

 private:
  struct Graph;
  void run_once(size_t i);
  double time_launches(size_t i);

  GemmProblem p_;
  std::vector<detail::Candidate*> cands_;
  const Stream& stream_;
  std::vector<std::unique_ptr<OperandSet>> sets_;
  DeviceBuffer flush_;
  Event start_, stop_;
  size_t next_set_ = 0;
  int reps_ = 1;
  std::vector<std::unique_ptr<Graph>> graphs_;  // per candidate; null: plain launches
};

}  // namespace gemmtune
