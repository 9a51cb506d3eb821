// Every backend the engine knows, per op, in the order ties are broken; shared by the engine,
// precompile and backend_status.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/backend.hpp"
#include "compile/artifact_cache.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/engine_options.hpp"

namespace gemmtune {

template <class Op>
struct Registered {
  const char* name;
  std::unique_ptr<BackendFor<Op>> (*make)(const BackendContext&);
  bool builds;  // its candidates have compile jobs (what precompile asks by default)
};

inline constexpr Registered<GemmOp> kGemmBackends[] = {
    {"cublaslt", &make_cublaslt_backend, false},
    {"triton", &make_triton_backend, true},
    {"cutlass", &make_cutlass_backend, true},
    {"cutedsl", &make_cutedsl_backend, true},
    {"native", &make_native_gemm_backend, false},
};
inline constexpr Registered<SoftmaxOp> kSoftmaxBackends[] = {
    {"native", &make_native_softmax_backend, false},
    {"triton", &make_triton_softmax_backend, true},
    {"cutedsl", &make_cutedsl_softmax_backend, true},
};

inline constexpr Registered<GroupedOp> kGroupedBackends[] = {
    {"cublaslt", &make_cublaslt_grouped_backend, false},
    {"triton", &make_triton_grouped_backend, true},
    {"cutlass", &make_cutlass_grouped_backend, true},
    {"cutedsl", &make_cutedsl_grouped_backend, true},
};

template <class Op>
constexpr auto& registry() {
  if constexpr (std::is_same_v<Op, GemmOp>) return kGemmBackends;
  else if constexpr (std::is_same_v<Op, GroupedOp>) return kGroupedBackends;
  else return kSoftmaxBackends;
}

// Backends registered at run time by a program (the GPU tests' fault-injection backends,
// tests/gpu/fault_backend.*): never part of the library. One joins an engine only when
// EngineOptions::backends names it, and then after the built-in ones. Register before any engine
// is made (in main(), before run_tuner too: the tuning helper must know the same backends).
using GemmBackendFactory = std::unique_ptr<BackendFor<GemmOp>> (*)(const BackendContext&);
void register_extra_backend(const std::string& name, GemmBackendFactory make);
// The extra backends' names.
std::vector<std::string> extra_backend_names();
std::unique_ptr<BackendFor<GemmOp>> make_extra_backend(const std::string& name, const BackendContext& ctx);

// Throws Error (ErrorCode::invalid) naming the known backends when `names` has an unknown one.
void check_backend_names(const std::vector<std::string>& names);

// What an engine, a precompile and backend_status set up alike: the options checked (backend
// names) and resolved (core/settings.hpp), the log, and the artifact cache with its toolchain
// probes started.
struct EngineSetup {
  explicit EngineSetup(const EngineOptions& options);
  // No compile budget (a precompile's unless its request sets one).
  BackendContext context(const DeviceInfo& dev) const { return {dev, log, artifacts.get(), opt.max_configs, -1}; }

  EngineOptions opt;
  Log log;
  std::unique_ptr<compile::ArtifactCache> artifacts;
};

// The backends of Op that `names` asks for (empty: all; with `builders_only`, all that build
// artifacts), constructed with ctx.
template <class Op>
std::vector<std::unique_ptr<BackendFor<Op>>> make_backends(const std::vector<std::string>& names,
                                                           const BackendContext& ctx, bool builders_only = false) {
  std::vector<std::unique_ptr<BackendFor<Op>>> out;
  for (auto& r : registry<Op>()) {
    const bool wanted = names.empty() ? (!builders_only || r.builds)
                                      : std::find(names.begin(), names.end(), r.name) != names.end();
    if (wanted) out.push_back(r.make(ctx));
  }
  if constexpr (std::is_same_v<Op, GemmOp>)
    for (const std::string& name : extra_backend_names())
      if (std::find(names.begin(), names.end(), name) != names.end()) out.push_back(make_extra_backend(name, ctx));
  return out;
}

}  // namespace gemmtune
