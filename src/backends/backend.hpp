// The small interfaces every backend implements, one instance per op (GemmOp, SoftmaxOp).
//
// A BackendFor<Op> turns an op's problem into Candidates (one kernel variant each); available(),
// supports() and candidates() are pure: no compile, no worker start, no GPU work. A candidate
// names the artifacts it runs as compile jobs (jobs(): none for cuBLASLt and native kernels);
// the engine builds every candidate's jobs in one stage (compile/artifact_cache.hpp), then calls
// prepare(built) (load, allocate; never compile; Error when it cannot run: the engine keeps it
// out of the race), then runs it many times. A candidate's id() must let the same backend
// rebuild it with load(problem, id) in another process, from the cache. A backend folder
// implements BackendFor<GemmOp>, BackendFor<SoftmaxOp> or both (as two objects sharing a name;
// the engine keys each op's cache by its own backends' versions).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compile/toolchain.hpp"
#include "core/log.hpp"
#include "core/verdict.hpp"
#include "gemmtune/device.hpp"
#include "gemmtune/grouped.hpp"
#include "gemmtune/kernel.hpp"
#include "gemmtune/problem.hpp"
#include "gemmtune/softmax.hpp"

namespace gemmtune {

namespace compile {
class ArtifactCache;
}

namespace detail {

// What the engine needs of any candidate, whatever its op.
class CandidateBase {
 public:
  virtual ~CandidateBase() = default;
  virtual std::string backend() const = 0;
  virtual std::string id() const = 0;    // stable across processes, for Backend::load
  virtual std::string name() const = 0;  // printable config
  virtual bool is_default() const { return false; }
  // The artifacts run() needs, in the order prepare() receives them. Pure.
  virtual std::vector<compile::Job> jobs() const { return {}; }
  // Loads `built` (one per job, in order) and allocates what run() needs. Called once, before
  // any run(). Throws Error on failure.
  virtual void prepare(std::span<const compile::Built> /*built*/) {}
};

template <class Op>
class CandidateFor : public CandidateBase {
 public:
  // Enqueue one run of the op on `stream`. Pointers were checked by KernelFor<Op>::run.
  virtual void run(const typename Op::Args& args, cudaStream_t stream) = 0;
  // Candidates that support a programmatic dependent launch (RunOptions::overlap_previous)
  // say so and launch with it in run_overlapped; the default is a plain run.
  virtual bool can_overlap() const { return false; }
  virtual void run_overlapped(const typename Op::Args& args, cudaStream_t stream) { run(args, stream); }
};

}  // namespace detail

// What every backend gets from the engine.
struct BackendContext {
  DeviceInfo device;               // index -1: a target without a device (precompile)
  Log log;
  // The engine's artifact cache: toolchain availability and versions, and in load-only mode
  // which artifacts the store holds. Null only for backends that build nothing (tests).
  compile::ArtifactCache* artifacts = nullptr;
  int max_configs = 0;             // candidates per problem at most; 0: the backend's default
  // Of a tune's ranked candidates not yet in the artifact store, how many may compile (the
  // model's best); those already stored always stay. < 0: no budget (precompile, --exhaustive).
  int compile_budget = -1;
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
  // Every variant worth timing for `problem` (deduplicated), not yet prepared; throws Error
  // when there is none (e.g. load-only and the store holds none of them).
  virtual std::vector<std::unique_ptr<Cand>> candidates(const Problem& problem) = 0;
  // Rebuild a candidate from its id (from the cache); throws Error if the id is unusable.
  virtual std::unique_ptr<Cand> load(const Problem& problem, const std::string& id) = 0;
  // Whether the candidate `id` runs what torch's own call for the problem runs (cuBLASLt's torch
  // baseline, docs/cublaslt.md): gemmtune.torch may then call torch's op instead. Pure.
  virtual bool reproduces_torch(const std::string& /*id*/) const { return false; }
};

using Backend = BackendFor<GemmOp>;
using SoftmaxBackend = BackendFor<SoftmaxOp>;
using GroupedBackend = BackendFor<GroupedOp>;

// Factories, one per backend folder and op; each constructs without throwing (an unusable
// backend reports it through available()). The engine's registry (src/engine/registry.hpp)
// lists them per op, in the order ties are broken.
std::unique_ptr<Backend> make_cublaslt_backend(const BackendContext& ctx);
std::unique_ptr<Backend> make_triton_backend(const BackendContext& ctx);
std::unique_ptr<Backend> make_cutlass_backend(const BackendContext& ctx);
std::unique_ptr<Backend> make_cutedsl_backend(const BackendContext& ctx);
std::unique_ptr<Backend> make_native_gemm_backend(const BackendContext& ctx);
std::unique_ptr<SoftmaxBackend> make_native_softmax_backend(const BackendContext& ctx);
std::unique_ptr<SoftmaxBackend> make_triton_softmax_backend(const BackendContext& ctx);
std::unique_ptr<SoftmaxBackend> make_cutedsl_softmax_backend(const BackendContext& ctx);
std::unique_ptr<GroupedBackend> make_triton_grouped_backend(const BackendContext& ctx);
std::unique_ptr<GroupedBackend> make_cutlass_grouped_backend(const BackendContext& ctx);
// Grouped GEMM in cuBLASLt: a backend that says why it does not support it (src/backends/
// grouped_unsupported.cpp); the CuTe DSL's grouped GEMM: src/backends/cutedsl/grouped.cpp.
std::unique_ptr<GroupedBackend> make_cublaslt_grouped_backend(const BackendContext& ctx);
std::unique_ptr<GroupedBackend> make_cutedsl_grouped_backend(const BackendContext& ctx);

// A backend's hold on one toolchain of the artifact cache (cutlass, triton, cutedsl): its
// availability on this device (sm_90a kernels), and the load-only rule every backend follows:
// when the toolchain is load-only, only candidates whose artifacts are in the store are offered.
struct ToolchainLink {
  ToolchainLink(const BackendContext& ctx, std::string toolchain) : ctx(ctx), toolchain(std::move(toolchain)) {}
  Verdict available() const;                      // device check, then the toolchain's
  bool load_only() const;
  std::string version() const;
  std::string sources_digest() const;
  // Whether every job's artifact is in the store (cheap: files, no hash check).
  bool stored(const std::vector<compile::Job>& jobs) const;
  // The compile budget (BackendContext::compile_budget) applied to `ranked` (best first): every
  // config whose jobs(c) are all stored stays, and of the others only the first budget ones
  // (they will compile); order kept. A line at info level says what was left out.
  template <class C, class JobsOf>
  std::vector<C> within_compile_budget(std::vector<C> ranked, JobsOf jobs_of) const {
    if (ctx.compile_budget < 0 || load_only()) return ranked;
    std::vector<C> out;
    int to_compile = 0, left_out = 0;
    for (C& c : ranked) {
      if (stored(jobs_of(c))) out.push_back(std::move(c));
      else if (to_compile < ctx.compile_budget) out.push_back(std::move(c)), ++to_compile;
      else ++left_out;
    }
    if (left_out > 0)
      ctx.log.info(toolchain + ": compile budget " + std::to_string(ctx.compile_budget) + ": " +
                   std::to_string(left_out) + " of the model's lower-ranked candidates not compiled (--exhaustive compiles all)");
    return out;
  }

  BackendContext ctx;
  std::string toolchain;
};

}  // namespace gemmtune
