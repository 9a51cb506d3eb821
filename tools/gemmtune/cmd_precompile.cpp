// `gemmtune precompile SUITE`: build every CUTLASS instance the suite's problems would try, on a
// machine without a GPU (candidates are enumerated for an H200: sm_90a, --sms SMs), into the
// artifact store. Copying that store to the GPU machine makes a kernel pack (docs/cutlass.md).
#include <cstdio>
#include <iostream>
#include <mutex>

#include "backends/cutlass/cutlass_backend.hpp"
#include "commands.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune::cli {

// tools/gemmtune/cmd_precompile_cutedsl.cpp: the same for the CuTe DSL backend.
int cmd_precompile_cutedsl(const PrecompileArgs& args, const std::vector<GemmProblem>& problems);

int cmd_precompile(const PrecompileArgs& args) {
  const std::string shapes = read_text_file(args.file);
  std::string m_values;
  if (!args.m_values.empty()) m_values = read_text_file(args.m_values);
  const std::vector<SuiteEntry> entries =
      suite_entries(shapes, args.file, args.m_values.empty() ? nullptr : &m_values, args.m_values);
  std::vector<GemmProblem> problems;
  for (const SuiteEntry& e : entries) problems.push_back(build_problem(e.m, e.n, e.k, args.problem));
  if (args.backend == "cutedsl") return cmd_precompile_cutedsl(args, problems);

  auto opt = cutlass_backend::BuilderOptions::defaults(log_stderr);
  if (!args.artifacts.empty()) opt.artifacts = args.artifacts;
  if (args.jobs > 0) opt.jobs = args.jobs;
  cutlass_backend::Builder builder(opt);
  if (Verdict v = builder.available(); !v) {
    std::cerr << "gemmtune: cutlass: not available: " << v.reason << "\n";
    return kNoDevice;
  }
  if (builder.load_only()) {
    std::cerr << "gemmtune: cutlass: this machine has no nvcc or CUTLASS headers (load-only); nothing can be built\n";
    return kNoDevice;
  }
  const int max_configs = args.max_configs > 0 ? args.max_configs : cutlass_backend::default_max_configs();
  std::cerr << "gemmtune: precompiling for sm_90a (" << args.sms << " SMs), " << problems.size() << " problems, "
            << builder.version() << ", " << opt.jobs << " nvcc job(s), store " << builder.store().root().string()
            << "\n";

  std::string json_lines;
  PrecompileCounts n;
  auto progress = [&](const cutlass_backend::PrecompileItem& it) {
    std::string what = it.skipped ? it.problem
                       : it.key.empty() ? it.config.id() + " for " + it.problem
                                        : it.config.id() + " [" + it.instance + "]";
    const std::string state = n.add(it, "built", 1);
    std::cerr << "[" << n.done << "] " << what << ": " << state << "\n";
    nlohmann::json j{{"problem", it.problem}, {"config", it.skipped ? "" : it.config.id()},
                     {"instance", it.instance}, {"key", it.key}, {"store_hit", it.store_hit},
                     {"nvcc_s", it.seconds}, {"error", it.error}};
    json_lines += j.dump() + "\n";
  };
  std::vector<cutlass_backend::Config> only;
  for (const std::string& id : args.configs) only.push_back(cutlass_backend::Config::parse(id));
  auto items = cutlass_backend::precompile(builder, problems, args.sms, max_configs, opt.jobs, progress, only);
  double nvcc_s = 0;
  for (double s : n.built_s) nvcc_s += s;
  std::cerr << "gemmtune: " << items.size() - n.skipped << " instances: " << n.built << " built (" << fixed(nvcc_s, 1)
            << " s of nvcc), " << n.hits << " already in the store, " << n.failed << " failed; " << n.skipped
            << " problems skipped\n";
  if (!args.json.empty()) write_output(args.json, json_lines);
  return n.failed ? kError : kOk;
}

}  // namespace gemmtune::cli
