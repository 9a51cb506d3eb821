// The compile stage's words: a Job (what one artifact is made from), a Toolchain (what turns a
// job into bytes: nvcc for CUTLASS, a Python compile worker for Triton and the CuTe DSL) and
// Built (an artifact ready to load). The artifact cache (artifact_cache.hpp) owns keying, store
// hits, single flight, publishing, load-only mode and the one build pool; a toolchain only
// says whether it can compile here, what keys its artifacts and how to compile a miss.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/verdict.hpp"
#include "gemmtune/error.hpp"
#include "store/artifact_store.hpp"

namespace gemmtune::compile {

// What one artifact is made from. Printable (what), and hashable through its toolchain's
// key_material: two jobs with the same material are one artifact.
struct Job {
  std::string toolchain;   // "cutlass" (nvcc), "triton", "cutedsl"
  std::string what;        // for messages: "cutlass co128x128x64c2x1 (bf16 rc ...)"
  std::string source;      // nvcc: the generated translation unit; else empty
  nlohmann::json params;   // Python workers: the compile request's params; else null
  nlohmann::json meta = nlohmann::json::object();  // recorded in the artifact's metadata (not keyed)
  // Jobs of one family share most of their compile work (CUTLASS: one instance's dtypes, layouts
  // and epilogue; the tiles differ): a toolchain that builds groups (Toolchain::group_limit)
  // gets them grouped by family first. Not keyed.
  std::string family = {};
};

// A compiled miss, before the cache publishes it.
struct Output {
  struct Extra {            // another artifact the main one needs (the CuTe DSL runtime library)
    std::string key, bytes;
    nlohmann::json meta;
  };
  std::string bytes;
  nlohmann::json meta;
  std::vector<Extra> extras;  // published first, when not yet in the store
  double seconds = 0;         // the compiler's own time (wall time when it reports none)
  double cpu_seconds = -1;    // CPU seconds (user + system) of the compile, its child processes included; -1: unknown
};

// An artifact ready to load, with what must be loaded before it.
struct Built {
  Artifact artifact;
  std::vector<Artifact> deps;  // in load order
  double seconds = 0;          // compile time; 0 on a store hit
  double cpu_seconds = -1;     // the compile's CPU seconds (Output::cpu_seconds); -1 on a hit or unknown
  bool hit = false;
};

class Toolchain {
 public:
  virtual ~Toolchain() = default;
  virtual std::string name() const = 0;

  // Whether this machine can compile (it may start a worker; the cache calls it once). When it
  // cannot, the cache falls back to the toolchain's record in the store (load-only).
  virtual Verdict probe() = 0;
  // What a load-only machine needs to compute the same keys (written to
  // <store>/<name>/toolchain.json after a successful probe), and taking it back there.
  virtual nlohmann::json record() const = 0;
  virtual void restore(const nlohmann::json& record) = 0;  // throws on a malformed record

  // For the tuning cache's environment (after probe or restore): the compiler's version text.
  virtual std::string version() const = 0;
  // The first 12 hex digits of the hash of the kernel sources it keys ("" when it keys none).
  virtual std::string sources_digest() const { return ""; }
  // The text hashed into `job`'s artifact key (after probe or restore).
  virtual std::string key_material(const Job& job) const = 0;
  // The keys of the artifacts `a` needs loaded first, from its metadata; throws Error when the
  // metadata does not name them properly.
  virtual std::vector<std::string> deps(const Artifact&) const { return {}; }

  // A build of `misses` artifacts is about to start: start workers ahead of need (optional).
  virtual void warm(size_t /*misses*/) {}
  // Compiles `job` (a store miss) in the fresh private folder `tmp` within `timeout_s`; throws
  // Error with the compiler's message (or "timed out") on failure. Called from several threads.
  virtual Output compile(const Job& job, const std::filesystem::path& tmp, double timeout_s) = 0;

  // Groups (optional). A toolchain whose compiler shares work between the artifacts of one run
  // (nvcc: CUTLASS instances in one translation unit share most of their template instantiation)
  // builds up to group_limit() misses in one compile_group() call. The cache forms groups only
  // when a build has more misses than the toolchain runs compiles at once (slots()), so that
  // groups never cost parallelism.
  virtual size_t group_limit() const { return 1; }
  virtual size_t slots() const { return 1; }
  // Compiles 2 to group_limit() misses in one run in the fresh private folder `tmp`, within
  // `timeout_s` for each job: one Output per job, in order (its seconds a share of the run's).
  // Throws Error when the run fails (the cache then compiles each job alone, for its own message).
  virtual std::vector<Output> compile_group(const std::vector<Job>& jobs, const std::filesystem::path& /*tmp*/,
                                            double /*timeout_s*/) {
    GT_THROW(name() + ": compiles no groups (asked for " + std::to_string(jobs.size()) + " jobs)");
  }
};

}  // namespace gemmtune::compile
