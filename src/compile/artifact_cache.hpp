// The one way a config becomes a loadable artifact: DeepGEMM's Compiler::build, for every
// toolchain. Owned by the engine (and by a precompile); every backend reaches it through its
// BackendContext.
//
//   ArtifactCache cache(options, make_toolchains(options, log), log);
//   std::vector<Outcome> out = cache.build_all(jobs);   // store hits, else compiled in one pool
//
// key(job) = ArtifactStore::make_key(toolchain.key_material(job)): the toolchain decides the
// bytes, so keys stay what each compiler made them before this class existed. build(job) is a
// store hit (verified, with its deps), or one compile per key at a time in this process (single
// flight; a failed key fails again at once with the same message), in a fresh folder under
// <store>/<toolchain>/tmp, within the one timeout, published atomically.
//
// Availability, once per toolchain (probed in the background from start_probes()): a toolchain
// that can compile here writes its record (<store>/<name>/toolchain.json); one that cannot, or
// that options.load_only names, is load-only when the store holds its record (the keys then come
// from the record and only artifacts already in the store are used), else not available with the
// reasons.
#pragma once

#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "compile/single_flight.hpp"
#include "compile/toolchain.hpp"
#include "core/log.hpp"
#include "gemmtune/engine_options.hpp"
#include "store/artifact_store.hpp"

namespace gemmtune::compile {

class ArtifactCache {
 public:
  // `options` resolved (core/settings.hpp). Throws Error when the store root cannot be used.
  ArtifactCache(CompileOptions options, std::vector<std::unique_ptr<Toolchain>> toolchains, Log log);
  ~ArtifactCache();  // waits for probes still running
  ArtifactCache(const ArtifactCache&) = delete;
  ArtifactCache& operator=(const ArtifactCache&) = delete;

  const CompileOptions& options() const { return opt_; }
  ArtifactStore& store() { return store_; }

  // Starts every toolchain's probe on a background thread (a worker start imports Python
  // packages for about a second), so that it overlaps the engine's start-up.
  void start_probes();
  // Waits for the toolchain's probe. "no" for a toolchain this cache does not have.
  Verdict available(const std::string& toolchain);
  bool load_only(const std::string& toolchain);  // false when not available
  std::string version(const std::string& toolchain);  // "" when not available
  std::string sources_digest(const std::string& toolchain);  // "" when not available

  // Require available(job.toolchain); throw Error otherwise.
  std::string key(const Job& job);
  // Whether the artifact's files and its deps' are in the store (cheap: no hash check).
  bool has(const Job& job);
  // The verified artifact with its deps from the store, or nullopt.
  std::optional<Built> find(const Job& job);
  // Store hit, or compile and publish (see above). Throws Error.
  Built build(const Job& job);

  struct Outcome {
    std::optional<Built> built;
    std::string error;  // when not built
  };
  // Builds every job, distinct keys once, on one pool of threads (the toolchains bound their own
  // parallelism: nvcc jobs, worker processes); warms each toolchain's workers for its misses
  // first. A toolchain that builds groups (Toolchain::group_limit) and has more misses than
  // compile slots gets them in groups: sorted by family, cut into groups of at most its limit,
  // at least one a slot. Outcomes in `jobs`' order; `progress` (may be empty) sees each distinct job once when
  // it finishes, one call at a time, with the index of its first occurrence.
  std::vector<Outcome> build_all(const std::vector<Job>& jobs,
                                 const std::function<void(size_t, const Outcome&)>& progress = {});

 private:
  struct State {
    Verdict verdict;
    bool load_only = false;
  };
  struct Slot {
    std::unique_ptr<Toolchain> toolchain;
    std::shared_future<State> state;
  };
  Slot& slot(const std::string& name);          // throws Error for an unknown toolchain
  const State& state(const std::string& name);  // waits for the probe
  State probe(Toolchain& t);
  // The artifact with its deps, or nullopt when the store lacks it. A dep the store lacks (or
  // set aside as corrupt) throws Error naming it, or, with `missing_dep`, is a miss that says
  // why there (build() then compiles the artifact again, which publishes the dep again).
  std::optional<Built> find_key(Toolchain& t, const std::string& key, std::string* missing_dep = nullptr);
  Built compile_miss(Toolchain& t, const Job& job, const std::string& key);
  // A group of one toolchain's misses (build_all): what the store has meanwhile is taken from
  // there, the rest compiled in one compile_group run (each alone, for its own message, when
  // that run fails); each key's flight is held throughout. Outcomes in `jobs`' order.
  std::vector<Outcome> build_group(Toolchain& t, const std::vector<Job>& jobs);
  // Publishes a compiled miss (its extras first) and reads it back; `wall` is its compile's share
  // of the wall time, used when the toolchain reports no time.
  Built publish(Toolchain& t, const Job& job, const std::string& key, Output out, double wall);
  // <store>/<toolchain>/tmp, made private (the parent of each compile's fresh folder).
  std::filesystem::path build_parent(Toolchain& t);

  CompileOptions opt_;
  Log log_;
  ArtifactStore store_;
  std::mutex mu_;
  std::map<std::string, Slot> slots_;
  SingleFlight<Built> flights_{true};
};

}  // namespace gemmtune::compile
