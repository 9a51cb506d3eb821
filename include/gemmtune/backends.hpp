// gemmtune: which backends there are and whether they can run here.
#pragma once

#include <string>
#include <vector>

#include "gemmtune/device.hpp"
#include "gemmtune/engine_options.hpp"

namespace gemmtune {

struct BackendStatus {
  std::string op;       // "gemm", "softmax"
  std::string name;     // "cublaslt", "triton", "cutlass", "cutedsl", "native"
  bool available = false;
  std::string version;  // what keys the tuning cache (when available)
  std::string reason;   // why not (when not available)
};

// Every registered backend of every op, in the engine's order: GEMM backends, then softmax ones.
std::vector<std::string> backend_names(const std::string& op);

// The status of every backend (of `options.backends`, or all) as an engine with `options` on
// `target` would see it. Needs no GPU: pass hopper_target() where there is none (backends that
// need one say so in their reason).
std::vector<BackendStatus> backend_status(const EngineOptions& options, const DeviceInfo& target);

}  // namespace gemmtune
