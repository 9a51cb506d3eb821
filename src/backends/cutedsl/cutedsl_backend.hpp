// The cutedsl backend: one candidate per CuTe DSL config (configs.hpp) for a problem; each is
// our Hopper GEMM (python/gemmtune/cutedsl/gemm_sm90.py) compiled ahead of time by a Python
// worker (toolchain "cutedsl", src/compile/python_worker.hpp) into a shared object that needs
// the toolchain's shared runtime library, loaded with dlopen from its verified bytes, and run
// through its C entry points (gt_cutedsl_abi.h).
//
// What is exposed beyond make_cutedsl_backend (backend.hpp): the loader of one .so (and the one
// every CuTe DSL instance kind shares: GEMM, grouped GEMM, softmax) and the compile job of a config.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.hpp"
#include "backends/cutedsl/configs.hpp"
#include "backends/kernel_library.hpp"
#include "store/shared_object.hpp"
#include "../../../python/gemmtune/cutedsl/gt_cutedsl_abi.h"

namespace gemmtune::cutedsl {

// The entry points of one loaded instance. Loaded from the artifact's verified bytes through a
// memfd (what runs is what was hashed); never unloaded (the .so carries its own CUDA runtime,
// whose teardown at dlclose would race the process's). One load per key per process.
struct Library {
  std::string key;
  gt_cutedsl_config_fn config = nullptr;
  gt_cutedsl_can_implement_fn can_implement = nullptr;
  gt_cutedsl_run_fn run = nullptr;
  gt_cutedsl_status_text_fn status_text = nullptr;

  // Loads `built`'s runtime (once per process: the kernel .so names it as DT_NEEDED by soname,
  // which the dynamic loader then finds among the loaded objects), then the kernel .so. Throws
  // Error when the bytes cannot be loaded, a symbol is missing, the ABI version differs, or the
  // instance's config text is not `expect_config`.
  static std::shared_ptr<const Library> open(const compile::Built& built, const std::string& expect_config);
};

// Loads `built.deps` (the shared runtime library its kernel .so names by soname) once per
// process; every loader (open_instance) calls it before loading a kernel. Thread-safe.
void load_runtime(const compile::Built& built);

// What the loaders of every CuTe DSL instance kind share (Library, GroupedLibrary, SoftmaxLibrary):
// `built`'s runtime first, then its .so from the verified bytes, once per artifact key per process
// (one map per Lib; never unloaded). bind(handle, lib) resolves Lib's entry points into `lib` and
// returns the .so's ABI version, which must be `abi`; lib.config() must return `expect_config`
// (also on a later open of the same key). `what` names the kind in errors ("cutedsl: grouped
// artifact"). Throws Error. Thread-safe.
template <class Lib, class Bind>
std::shared_ptr<const Lib> open_instance(const compile::Built& built, const std::string& expect_config, int abi,
                                         std::string_view what, Bind bind) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const Lib>> libs;  // by artifact key
  const Artifact& artifact = built.artifact;
  std::lock_guard<std::mutex> lock(mu);
  load_runtime(built);
  if (auto it = libs.find(artifact.key); it != libs.end()) {
    check_config(what, artifact.key, it->second->config(), expect_config);
    return it->second;
  }
  GT_CHECK(artifact.bytes, std::string(what) + " " + artifact.key.substr(0, 16) + " has no bytes");
  void* h = dlopen_bytes("cutedsl", artifact.key, *artifact.bytes);
  auto lib = std::make_shared<Lib>();
  lib->key = artifact.key;
  check_abi_version(what, artifact.key, bind(h, *lib), abi);
  check_config(what, artifact.key, lib->config(), expect_config);
  libs[artifact.key] = lib;
  return lib;
}

// The compile job of config `c` for `p` (toolchain "cutedsl").
compile::Job job(const Config& c, const GemmProblem& p);

}  // namespace gemmtune::cutedsl
