// `gemmtune info`: what this machine offers gemmtune: version, device, cache, and every
// backend's availability (without a GPU too: what could be compiled here for an H200, and why
// the rest cannot run). Without a GPU it exits 3 after printing; --json prints one object.
#include <iostream>

#include "commands.hpp"
#include "core/cuda.hpp"
#include "gemmtune/backends.hpp"
#include "gemmtune/tuning_cache.hpp"
#include "tune/ceilings.hpp"

namespace gemmtune::cli {
namespace {

std::string status_text(const BackendStatus& b) {
  return b.available ? "available (" + b.version + ")" : "not available: " + b.reason;
}

nlohmann::json status_json(const std::vector<BackendStatus>& all) {
  nlohmann::json out = nlohmann::json::array();
  for (const BackendStatus& b : all)
    out.push_back({{"op", b.op}, {"name", b.name}, {"available", b.available}, {"version", b.version},
                   {"reason", b.reason}});
  return out;
}

}  // namespace

int cmd_info(const InfoArgs& args) {
  std::string cache_path = args.engine.no_cache ? "(disabled: --no-cache)"
                           : args.engine.cache.empty() ? default_cache_path().string()
                                                       : args.engine.cache;
  nlohmann::json j{{"version", version()}};
  std::string why;
  const bool gpu = cuda_device_present(&why);
  std::unique_ptr<Engine> engine;
  std::vector<BackendStatus> backends;
  if (gpu) {
    engine = std::make_unique<Engine>(engine_options(args.engine, log_stderr));
    backends = engine->backends();
    if (engine->cache())
      cache_path = engine->cache()->path().string() + " (" + std::to_string(engine->cache()->list().size()) + " entries)";
    j["device"] = engine->device().str();
    j["environment"] = engine->environment();
  } else {
    // What this machine can do for the GPU it builds for (an H200-class sm_90a target).
    backends = backend_status(engine_options(args.engine, log_stderr), hopper_target());
    j["device"] = nullptr;
    j["device_reason"] = why.empty() ? "unknown reason" : why;
  }
  j["cache"] = cache_path;
  j["backends"] = status_json(backends);
  bool any = false;
  for (const BackendStatus& b : backends) any |= b.available;
  if (args.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "gemmtune     " << version() << "\n"
              << "device       " << (gpu ? engine->device().str() : "none") << "\n";
    if (gpu) std::cout << "environment  " << engine->environment() << "\n";
    std::cout << "cache        " << cache_path << "\n"
              << "backends" << (gpu ? "" : " (for an H200 target: what can be built here)") << "\n";
    for (const BackendStatus& b : backends)
      std::cout << "  " << (b.op == "gemm" ? "" : b.op + "/") << b.name << ": " << status_text(b) << "\n";
  }
  if (!gpu) {
    std::cerr << "gemmtune: no CUDA device: " << (why.empty() ? "unknown reason" : why) << "\n";
    return kNoDevice;
  }
  if (!args.json) {
    if (args.no_measure) {
      std::cout << "ceilings     not measured (--no-measure); tune's nominal H200 ceilings: copy "
                << fixed(kNominalCopyTBps, 2) << " TB/s, bf16 " << fixed(kNominalBf16Tflops, 0) << " TFLOP/s, fp8 "
                << fixed(kNominalFp8Tflops, 0) << " TFLOP/s\n";
    } else {
      const Ceilings c = measure_ceilings(engine->device(), log_stderr);
      std::cout << "ceilings     measured now: copy " << fixed(c.copy_TBps, 2) << " TB/s, bf16 " << fixed(c.bf16_tflops, 0)
                << " TFLOP/s, fp8 " << fixed(c.fp8_tflops, 0) << " TFLOP/s\n";
    }
  }
  if (!any) {
    std::cerr << "gemmtune: no backend is available\n";
    return kNoDevice;
  }
  return kOk;
}

}  // namespace gemmtune::cli
