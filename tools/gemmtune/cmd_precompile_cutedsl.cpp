// `gemmtune precompile SUITE --backend cutedsl`: compile every CuTe DSL artifact the suite's
// problems would try (candidates enumerated for an H200: sm_90a, --sms SMs) through the Python
// compile workers, into the artifact store, without a GPU. The GPU machine (no CuTe DSL) then
// runs them load-only with GEMMTUNE_ARTIFACTS pointing at that store (docs/cutedsl.md).
#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "backends/cutedsl/cutedsl_backend.hpp"
#include "commands.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune::cli {

int cmd_precompile_cutedsl(const PrecompileArgs& args, const std::vector<GemmProblem>& problems) {
  if (!args.artifacts.empty()) setenv("GEMMTUNE_ARTIFACTS", args.artifacts.c_str(), 1);
  const int jobs = args.jobs > 0 ? args.jobs : 0;
  if (jobs > 0) setenv("GEMMTUNE_COMPILE_WORKERS", std::to_string(jobs).c_str(), 1);
  cutedsl::CompilerOptions opt = cutedsl::CompilerOptions::defaults(log_stderr);
  opt.load_only = false;
  cutedsl::Compiler compiler(opt);
  if (Verdict v = compiler.available(); !v) {
    std::cerr << "gemmtune: cutedsl: not available: " << v.reason << "\n";
    return kNoDevice;
  }
  if (compiler.load_only()) {
    std::cerr << "gemmtune: cutedsl: no CuTe DSL in the compile worker's Python (load-only); nothing can be compiled\n";
    return kNoDevice;
  }
  const int max_configs = args.max_configs > 0 ? args.max_configs : cutedsl::default_max_configs();
  const int threads = opt.pool.max_workers;
  std::cerr << "gemmtune: precompiling CuTe DSL kernels for sm_90a (" << args.sms << " SMs), " << problems.size()
            << " problems, " << compiler.version() << ", " << threads << " worker(s), store "
            << compiler.store().root().string() << "\n";

  std::string json_lines;
  PrecompileCounts n;
  auto progress = [&](const cutedsl::PrecompileItem& it) {
    std::string what = it.skipped ? it.problem : it.config.id() + " for " + it.problem;
    const std::string state = n.add(it, "compiled", 2);
    std::cerr << "[" << n.done << "] " << what << ": " << state << "\n";
    nlohmann::json j{{"problem", it.problem}, {"config", it.skipped ? "" : it.config.id()},
                     {"params", it.params},   {"key", it.key},
                     {"store_hit", it.store_hit}, {"compile_s", it.seconds},
                     {"error", it.error}};
    json_lines += j.dump() + "\n";
  };
  std::vector<cutedsl::Config> only;
  for (const std::string& id : args.configs) only.push_back(cutedsl::Config::parse(id));
  auto items = cutedsl::precompile(compiler, problems, args.sms, max_configs, threads, progress, only);
  std::vector<double> times = n.built_s;
  std::sort(times.begin(), times.end());
  double total = 0;
  for (double t : times) total += t;
  std::cerr << "gemmtune: " << items.size() - n.skipped << " artifacts: " << n.built << " compiled (" << fixed(total, 1)
            << " s of compile, median " << fixed(times.empty() ? 0.0 : times[times.size() / 2], 2)
            << " s per artifact), " << n.hits << " already in the store, " << n.failed << " failed; " << n.skipped
            << " problems skipped\n";
  if (!args.json.empty()) write_output(args.json, json_lines);
  return n.failed ? kError : kOk;
}

}  // namespace gemmtune::cli
