// `gemmtune precompile SUITE`: build every artifact the suite's problems would try (a suite CSV,
// or a .jsonl file of problems as the C API takes them, one per line), for every
// backend that builds (CUTLASS: nvcc; Triton and CuTe DSL: Python compile workers), on a machine
// without a GPU (candidates are enumerated for an H200: sm_90a, --sms SMs), into the artifact
// store. Copying that store to the GPU machine makes a kernel pack (docs/kernel-packs.md).
#include <algorithm>
#include <array>
#include <chrono>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "commands.hpp"
#include "core/problem_json.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/precompile.hpp"
#include "softmax_cli.hpp"

namespace gemmtune::cli {

int cmd_precompile(const PrecompileArgs& args) {
  const std::string shapes = read_text_file(args.file);
  PrecompileRequest req;
  req.candidates = args.configs;
  req.compile_budget = args.compile_budget;
  if (args.file.size() > 6 && args.file.compare(args.file.size() - 6, 6, ".jsonl") == 0) {
    // One problem per line, as the C API takes them (add_problem_json).
    std::istringstream in(shapes);
    int line_no = 0;
    for (std::string line; std::getline(in, line);) {
      ++line_no;
      if (line.find_first_not_of(" \t\r") == std::string::npos || line[0] == '#') continue;
      try {
        add_problem_json(req, line);
      } catch (const Error& e) {
        GT_THROW(args.file + ":" + std::to_string(line_no) + ": " + e.message());
      }
    }
  } else if (is_softmax_suite(shapes, args.file)) {
    for (auto [rows, cols] : softmax_suite_entries(shapes, args.file)) {
      try {  // the flags cannot make a valid problem: a usage error, as in `suite` (exit 2)
        req.softmax.push_back(build_softmax_problem(rows, cols, args.problem));
      } catch (const Error& e) {
        return usage_error("precompile", e.message());
      }
    }
  } else {
    if (args.m_values.empty() && suite_needs_m_values(shapes, args.file))
      return usage_error("precompile", args.file + ": has no m column, so --m-values FILE (header phase,m) is required");
    std::string m_values;
    if (!args.m_values.empty()) m_values = read_text_file(args.m_values);
    const SuiteEntries entries =
        suite_entries(shapes, args.file, args.m_values.empty() ? nullptr : &m_values, args.m_values);
    // Distinct problems only (labels do not change an artifact): distinct (n, k) rows crossed with
    // distinct m values, in first-seen order; never the whole cross product of the suite.
    std::vector<std::array<int64_t, 3>> distinct;
    std::set<std::array<int64_t, 3>> seen;
    if (entries.m_values().empty()) {
      for (const SuiteEntry& e : entries.rows())
        if (seen.insert({e.m, e.n, e.k}).second) distinct.push_back({e.m, e.n, e.k});
    } else {
      std::vector<int64_t> ms;
      std::set<int64_t> seen_m;
      for (const auto& v : entries.m_values())
        if (seen_m.insert(v.m).second) ms.push_back(v.m);
      std::vector<std::pair<int64_t, int64_t>> nks;
      std::set<std::pair<int64_t, int64_t>> seen_nk;
      for (const SuiteEntry& e : entries.rows())
        if (seen_nk.insert({e.n, e.k}).second) nks.push_back({e.n, e.k});
      // At most kMaxSuiteEntries (suite_entries checked rows x m values, and these are fewer).
      for (auto [n, k] : nks)
        for (int64_t m : ms) distinct.push_back({m, n, k});
    }
    for (const auto& [m, n, k] : distinct) {
      try {  // the flags cannot make a valid problem: a usage error, as in `suite` (exit 2)
        req.gemm.push_back(build_problem(m, n, k, args.problem));
      } catch (const Error& e) {
        return usage_error("precompile", e.message());
      }
    }
  }
  const EngineOptions options = engine_options(args.engine, log_stderr);
  std::cerr << "gemmtune: precompiling " << req.gemm.size() + req.softmax.size() + req.grouped.size() << " problems for sm_90a ("
            << args.sms << " SMs)\n";

  size_t done = 0, built = 0, hits = 0, failed = 0, skipped = 0;
  std::vector<double> times;
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> per_backend;  // wall, CPU seconds
  std::string json_lines;
  auto progress = [&](const PrecompileItem& it) {
    ++done;
    std::string state;
    if (it.skipped) ++skipped, state = "skipped: " + it.error;
    else if (!it.error.empty()) ++failed, state = "FAILED: " + it.error;
    else if (it.store_hit) ++hits, state = "in store";
    else {
      ++built, times.push_back(it.seconds), per_backend[it.backend].first.push_back(it.seconds);
      state = "built in " + fixed(it.seconds, 2) + " s";
      if (it.cpu_seconds >= 0)
        per_backend[it.backend].second.push_back(it.cpu_seconds), state += " (" + fixed(it.cpu_seconds, 2) + " s CPU)";
    }
    const std::string what = it.what.empty() ? it.problem + (it.candidate.empty() ? "" : " " + it.candidate)
                                             : it.what + " for " + it.problem;
    std::cerr << "[" << done << "] " << it.backend << ": " << what << ": " << state << "\n";
    json_lines += nlohmann::json{{"op", it.op},           {"backend", it.backend},   {"problem", it.problem},
                                 {"candidate", it.candidate}, {"what", it.what},     {"key", it.key},
                                 {"store_hit", it.store_hit}, {"compile_s", it.seconds},
                                 {"cpu_s", it.cpu_seconds < 0 ? nlohmann::json() : nlohmann::json(it.cpu_seconds)},
                                 {"skipped", it.skipped},     {"error", it.error}}
                      .dump() +
                  "\n";
  };
  const auto t0 = std::chrono::steady_clock::now();
  precompile(req, options, hopper_target(args.sms), progress);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  double total = 0;
  for (double t : times) total += t;
  std::cerr << "gemmtune: " << done - skipped << " artifacts: " << built << " built (" << fixed(total, 1)
            << " s of compile, median " << fixed(median(times), 2) << " s), " << hits << " already in the store, "
            << failed << " failed; " << skipped << " skipped; " << fixed(wall, 1) << " s wall\n";
  // Per backend: the compile seconds of each built artifact (wall in its compiler, and CPU: user +
  // system of the worker or nvcc and their child processes), for comparing toolchains.
  for (const auto& [backend, t] : per_backend) {
    double cpu_total = 0;
    for (double c : t.second) cpu_total += c;
    std::cerr << "gemmtune:   " << backend << ": " << t.first.size() << " built, median " << fixed(median(t.first), 2)
              << " s wall";
    if (!t.second.empty())
      std::cerr << ", " << fixed(median(t.second), 2) << " s CPU (" << fixed(cpu_total, 1) << " s CPU in all)";
    std::cerr << " per artifact\n";
  }
  if (!args.json.empty()) write_output(args.json, json_lines);
  return failed ? kError : kOk;
}

}  // namespace gemmtune::cli
