// The base of candidates that prepare lazily and at most once (triton, cutlass, cutedsl: GEMM and
// softmax): compile or take from the store, load, allocate, all under the candidate's lock, so
// that prepare() and run() may be called from several threads.
#pragma once

#include <mutex>

#include "backends/backend.hpp"

namespace gemmtune {

template <class Op>
class LazyCandidate : public detail::CandidateFor<Op> {
 public:
  double compile_seconds() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return compile_s_;
  }
  void prepare() override {
    std::lock_guard<std::mutex> lock(mu_);
    prepare_locked();
  }

 protected:
  // Called with mu_ held: returns at once when already prepared, else prepares (setting
  // compile_s_) and throws Error on failure, leaving the candidate unprepared (a later call tries
  // again).
  virtual void prepare_locked() = 0;

  mutable std::mutex mu_;
  double compile_s_ = 0;  // compile time of the artifacts prepare used; 0 for store hits
};

}  // namespace gemmtune
