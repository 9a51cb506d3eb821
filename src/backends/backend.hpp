// The small interfaces every backend implements, one instance per op (GemmOp, SoftmaxOp).
//
// A BackendFor<Op> turns an op's problem into Candidates (one kernel variant each). A Candidate
// compiles or prepares itself in prepare() (compile and resource failures throw Error: the
// engine logs them and keeps the candidate out of the race), then runs many times. Its id()
// must let the same backend rebuild it with load(problem, id) in another process, from the
// cache. A backend folder implements BackendFor<GemmOp>, BackendFor<SoftmaxOp> or both (as two
// objects sharing a name; the engine keys each op's cache by its own backends' versions).
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gemmtune/engine.hpp"
#include "gemmtune/kernel.hpp"
#include "gemmtune/problem.hpp"
#include "gemmtune/softmax.hpp"

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

// What the engine needs of any candidate, whatever its op.
class CandidateBase {
 public:
  virtual ~CandidateBase() = default;
  virtual std::string backend() const = 0;
  virtual std::string id() const = 0;    // stable across processes, for Backend::load
  virtual std::string name() const = 0;  // printable config
  virtual bool is_default() const { return false; }
  virtual double compile_seconds() const { return 0; }
  // Compile / load / allocate what run() needs. Throws Error on failure.
  virtual void prepare() {}
};

template <class Op>
class CandidateFor : public CandidateBase {
 public:
  // Enqueue one run of the op on `stream`. Pointers were checked by KernelFor<Op>::run.
  virtual void run(const typename Op::Args& args, cudaStream_t stream) = 0;
};

}  // namespace detail

// What every backend gets from the engine.
struct BackendContext {
  DeviceInfo device;
  std::function<void(const std::string&)> log;  // never empty
};

class BackendBase {
 public:
  virtual ~BackendBase() = default;
  virtual std::string name() const = 0;
  // Library / compiler versions that must key the tuning cache.
  virtual std::string version() const = 0;
  virtual Verdict available() const = 0;
};

template <class Op>
class BackendFor : public BackendBase {
 public:
  using Problem = typename Op::Problem;
  using Cand = detail::CandidateFor<Op>;
  virtual Verdict supports(const Problem& problem) const = 0;
  // Every variant worth timing for `problem` (deduplicated), not yet prepared.
  virtual std::vector<std::unique_ptr<Cand>> candidates(const Problem& problem) = 0;
  // Rebuild a candidate from its id (from the cache); throws Error if the id is unusable.
  virtual std::unique_ptr<Cand> load(const Problem& problem, const std::string& id) = 0;
};

using Backend = BackendFor<GemmOp>;
using SoftmaxBackend = BackendFor<SoftmaxOp>;

// Factories, one per backend folder and op; each constructs without throwing (an unusable
// backend reports it through available()). The engine's registry (src/engine/engine.cpp)
// lists them per op, in the order ties are broken.
std::unique_ptr<Backend> make_cublaslt_backend(const BackendContext& ctx);
std::unique_ptr<Backend> make_triton_backend(const BackendContext& ctx);
std::unique_ptr<Backend> make_cutlass_backend(const BackendContext& ctx);
std::unique_ptr<Backend> make_cutedsl_backend(const BackendContext& ctx);
std::unique_ptr<SoftmaxBackend> make_native_softmax_backend(const BackendContext& ctx);
std::unique_ptr<SoftmaxBackend> make_triton_softmax_backend(const BackendContext& ctx);
std::unique_ptr<SoftmaxBackend> make_cutedsl_softmax_backend(const BackendContext& ctx);

}  // namespace gemmtune
