// The one small interface every backend implements.
//
// A Backend turns a problem into Candidates (one kernel variant each). A Candidate compiles
// or prepares itself in prepare() (compile and resource failures throw Error: the engine
// logs them and keeps the candidate out of the race), then runs many times. Its id() must
// let the same backend rebuild it with load(problem, id) in another process, from the cache.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "gemmtune/engine.hpp"
#include "gemmtune/kernel.hpp"
#include "gemmtune/problem.hpp"

namespace gemmtune {

// "yes", or "no" with a reason that is shown to users.
struct Verdict {
  bool ok = true;
  std::string reason;
  static Verdict yes() { return {true, {}}; }
  static Verdict no(std::string why) { return {false, std::move(why)}; }
  explicit operator bool() const { return ok; }
};

namespace detail {

class Candidate {
 public:
  virtual ~Candidate() = default;
  virtual std::string backend() const = 0;
  virtual std::string id() const = 0;    // stable across processes, for Backend::load
  virtual std::string name() const = 0;  // printable config
  virtual bool is_default() const { return false; }
  virtual double compile_seconds() const { return 0; }
  // Compile / load / allocate what run() needs. Throws Error on failure.
  virtual void prepare() {}
  // Enqueue one GEMM on `stream`. Pointers were checked by Kernel::run.
  virtual void run(const GemmArgs& args, cudaStream_t stream) = 0;
};

}  // namespace detail

// What every backend gets from the engine.
struct BackendContext {
  DeviceInfo device;
  std::function<void(const std::string&)> log;  // never empty
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Library / compiler versions that must key the tuning cache.
  virtual std::string version() const = 0;
  virtual Verdict available() const = 0;
  virtual Verdict supports(const GemmProblem& problem) const = 0;
  // Every variant worth timing for `problem` (deduplicated), not yet prepared.
  virtual std::vector<std::unique_ptr<detail::Candidate>> candidates(const GemmProblem& problem) = 0;
  // Rebuild a candidate from its id (from the cache); throws Error if the id is unusable.
  virtual std::unique_ptr<detail::Candidate> load(const GemmProblem& problem, const std::string& id) = 0;
};

// Factories, one per backend folder; each constructs without throwing (an unusable backend
// reports it through available()).
std::unique_ptr<Backend> make_cublaslt_backend(const BackendContext& ctx);
std::unique_ptr<Backend> make_triton_backend(const BackendContext& ctx);
std::unique_ptr<Backend> make_cutlass_backend(const BackendContext& ctx);

}  // namespace gemmtune
