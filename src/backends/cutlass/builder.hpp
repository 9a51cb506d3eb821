// The CUTLASS backend's compile side (no GPU needed): an InstanceSpec -> generated .cu -> nvcc
// -> shared object in the content-addressed artifact store (src/store/artifact_store.*).
//
//   cutlass_backend::Builder builder(cutlass_backend::BuilderOptions::defaults(log));
//   if (Verdict v = builder.available(); !v) ... v.reason ...
//   cutlass_backend::Built so = builder.build(InstanceSpec::of(config, problem));
//
// Toolchain: nvcc ($GEMMTUNE_NVCC, else $CUDA_HOME/bin/nvcc, else /usr/local/cuda/bin/nvcc),
// CUTLASS headers ($GEMMTUNE_CUTLASS_DIR: a directory holding include/cutlass/version.h, or the
// include directory itself; else site-packages/cutlass_library/source of $VIRTUAL_ENV or of the
// repository's .venv, where `pip install --no-deps nvidia-cutlass` puts them), our kernel headers
// ($GEMMTUNE_CUTLASS_KERNEL_DIR, else the build's src/backends/cutlass/kernel).
//
// Artifact key: SHA-256 of (key format, nvcc's full --version text, the flags, CUTLASS's
// version, the bytes of our kernel headers, the generated source). The toolchain part is also
// written to <store>/cutlass/toolchain.json, so that a machine without nvcc or CUTLASS (the GPU
// machine) can compute the same keys from a copied store: "load-only" mode (docs/cutlass.md).
//
// Build: in a fresh temp directory under <store>/cutlass/tmp, with a per-job timeout, at most
// `jobs` nvcc processes at once across threads; published through ArtifactStore::put (atomic).
// A failed build throws Error with nvcc's message (its tail) and is not retried in this process.
#pragma once

#include <condition_variable>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "backends/backend.hpp"
#include "backends/cutlass/configs.hpp"
#include "compile/single_flight.hpp"
#include "store/artifact_store.hpp"

namespace gemmtune::cutlass_backend {

constexpr int kKeyFormat = 1;

// What determines compiled bytes besides the generated source.
struct Toolchain {
  std::filesystem::path nvcc;            // empty in load-only mode
  std::string nvcc_version_text;         // `nvcc --version`, whole
  std::string nvcc_version;              // "13.0.88"
  std::filesystem::path cutlass_include; // .../include (cutlass/version.h under it)
  std::filesystem::path cutlass_util_include;
  std::string cutlass_version;           // "4.2.0"
  std::filesystem::path kernel_dir;      // sm90_gemm.cuh, gt_cutlass_abi.h
  std::string kernel_digest;             // SHA-256 of our kernel headers' bytes
  std::vector<std::string> flags;        // nvcc flags (without -I, -o and the input)
  bool load_only = false;

  // Everything above that keys an artifact, as canonical JSON text.
  std::string fingerprint() const;
  nlohmann::json to_json() const;
  static Toolchain from_json(const nlohmann::json& j);
};

// The flags every instance is built with.
std::vector<std::string> nvcc_flags();

struct BuilderOptions {
  std::filesystem::path artifacts;  // store root; empty: ArtifactStore::default_root()
  int jobs = 1;                     // nvcc processes at once
  double timeout_s = 600;           // per nvcc job
  std::function<void(const std::string&)> log;  // may be empty
  // jobs from $GEMMTUNE_NVCC_JOBS, else the hardware's cores; timeout from
  // $GEMMTUNE_NVCC_TIMEOUT (seconds).
  static BuilderOptions defaults(std::function<void(const std::string&)> log = {});
};

struct Built {
  Artifact artifact;     // verified .so bytes and metadata
  double compile_s = 0;  // nvcc wall time; 0 on a store hit
  bool store_hit = false;
};

class Builder {
 public:
  explicit Builder(BuilderOptions options);

  // Whether instances can be built (nvcc and CUTLASS found) or at least loaded from a store
  // made elsewhere (load-only); the reason when neither.
  Verdict available() const { return available_; }
  bool load_only() const { return toolchain_.load_only; }
  const Toolchain& toolchain() const { return toolchain_; }
  // "cutlass=4.2.0 nvcc=13.0.88 kernel=<12 hex>", for the tuning cache's environment.
  std::string version() const;

  std::string key(const InstanceSpec& spec) const;
  // Whether the store holds a (verified) artifact for `spec`.
  bool cached(const InstanceSpec& spec);
  // Store hit, or build and publish. Thread-safe; concurrent builds of one key in this process
  // share one nvcc run. Throws Error ("cutlass: nvcc failed ...: <message>", timed out, load-only
  // and not in the store, ...).
  Built build(const InstanceSpec& spec);

  ArtifactStore& store() { return *store_; }

 private:
  Built compile_miss(const std::string& key, const InstanceSpec& spec);
  void acquire_job();
  void release_job();

  BuilderOptions opt_;
  Toolchain toolchain_;
  Verdict available_;
  std::unique_ptr<ArtifactStore> store_;
  std::mutex mu_;
  std::condition_variable job_freed_;
  int jobs_running_ = 0;
  SingleFlight<Built> flights_{true};  // one compile per key at a time (failures not retried in this process)
};

// Runs `argv` (argv[0] a path) with stdout and stderr to `log_file`, in its own process group,
// killed with the group after `timeout_s`. Returns the exit status (128 + signal when killed by
// one); `timed_out` tells a timeout apart. Throws Error when it cannot start.
int run_process(const std::vector<std::string>& argv, const std::filesystem::path& log_file, double timeout_s,
                bool* timed_out);

}  // namespace gemmtune::cutlass_backend
