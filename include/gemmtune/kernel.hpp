// gemmtune: a selected, loaded kernel, cheap to run many times.
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
  const float* scale_a = nullptr; // fp8 with scales: [1] tensorwise or [m] rowwise
  const float* scale_b = nullptr; // fp8 with scales: [1] tensorwise or [n] rowwise
};

namespace detail {
class Candidate;
}

class Kernel {
 public:
  Kernel() = default;
  Kernel(GemmProblem problem, std::shared_ptr<detail::Candidate> impl);

  const GemmProblem& problem() const { return problem_; }
  std::string backend() const;
  std::string name() const;  // printable config
  std::string id() const;    // stable id the backend reloads it from
  explicit operator bool() const { return impl_ != nullptr; }

  // Enqueues D = ... on `stream`. Throws Error when a required pointer is missing.
  void run(const GemmArgs& args, cudaStream_t stream = nullptr) const;

 private:
  GemmProblem problem_;
  std::shared_ptr<detail::Candidate> impl_;
};

}  // namespace gemmtune
