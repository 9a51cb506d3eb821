// `gemmtune info`: what this machine offers gemmtune. Without a GPU it prints what it can and
// exits 3.
#include <iostream>

#include "commands.hpp"
#include "core/cuda.hpp"
#include "gemmtune/tuning_cache.hpp"
#include "tune/ceilings.hpp"

namespace gemmtune::cli {

int cmd_info(const InfoArgs& args) {
  std::cout << "gemmtune     " << version() << "\n";
  std::string cache_path = args.engine.no_cache ? "(disabled: --no-cache)"
                           : args.engine.cache.empty() ? default_cache_path().string()
                                                       : args.engine.cache;
  std::string why;
  if (!cuda_device_present(&why)) {
    std::cout << "device       none\n"
              << "cache        " << cache_path << "\n";
    std::cerr << "gemmtune: no CUDA device: " << (why.empty() ? "unknown reason" : why) << "\n";
    return kNoDevice;
  }

  Engine engine(engine_options(args.engine, log_stderr));
  std::cout << "device       " << engine.device().str() << "\n"
            << "environment  " << engine.environment() << "\n";
  if (engine.cache()) cache_path = engine.cache()->path().string() + " (" + std::to_string(engine.cache()->list().size()) + " entries)";
  std::cout << "cache        " << cache_path << "\n"
            << "backends\n";
  bool any = false;
  for (const BackendStatus& b : engine.backends()) {
    std::cout << "  " << (b.op == "gemm" ? "" : b.op + "/") << b.name << ": "
              << (b.available ? "available (" + b.version + ")" : "not available: " + b.reason) << "\n";
    any |= b.available;
  }
  if (args.no_measure) {
    std::cout << "ceilings     not measured (--no-measure); tune's nominal H200 ceilings: copy "
              << fixed(kNominalCopyTBps, 2) << " TB/s, bf16 " << fixed(kNominalBf16Tflops, 0) << " TFLOP/s, fp8 "
              << fixed(kNominalFp8Tflops, 0) << " TFLOP/s\n";
  } else {
    const Ceilings c = measure_ceilings(engine.device(), log_stderr);
    std::cout << "ceilings     measured now: copy " << fixed(c.copy_TBps, 2) << " TB/s, bf16 " << fixed(c.bf16_tflops, 0)
              << " TFLOP/s, fp8 " << fixed(c.fp8_tflops, 0) << " TFLOP/s\n";
  }
  if (!any) {
    std::cerr << "gemmtune: no backend is available\n";
    return kNoDevice;
  }
  return kOk;
}

}  // namespace gemmtune::cli
