// Command dispatch, exit codes, and helpers the commands share (see commands.hpp).
#include "commands.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>

#include "core/cuda.hpp"
#include "core/settings.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/softmax.hpp"
#include "gemmtune/tuning_cache.hpp"

namespace gemmtune::cli {

int run_cli(int argc, char** argv) {
  Cli cli;
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli.exit_code(e);
  }
  cli.suite.argv.assign(argv, argv + argc);
  try {
    switch (cli.command()) {
      case Command::tune: return cmd_tune(cli.tune);
      case Command::suite: return cmd_suite(cli.suite);
      case Command::run: return cmd_run(cli.run);
      case Command::cache: return cmd_cache(cli.cache);
      case Command::store: return cmd_store(cli.store);
      case Command::info: return cmd_info(cli.info);
      case Command::precompile: return cmd_precompile(cli.precompile);
      case Command::report: return cmd_report(cli.report);
      case Command::none: break;
    }
    std::cerr << cli.app.help();
    return kUsage;
  } catch (const Error& e) {
    // The message only: users need what went wrong, not where in our sources. Set
    // GEMMTUNE_DEBUG=1 to see the source location too.
    // Exit codes by the error's code: no device is 3, as require_gpu says it; the rest 1
    // (invalid input found inside a command, e.g. a bad suite file, is an error, not a usage
    // error: the command line itself parsed).
    std::cerr << "gemmtune: " << (debug_locations() ? e.what() : e.message()) << "\n";
    return e.code() == ErrorCode::no_device ? kNoDevice : kError;
  } catch (const std::exception& e) {
    std::cerr << "gemmtune: " << e.what() << "\n";
    return kError;
  }
}

bool require_gpu() {
  std::string why;
  if (cuda_device_present(&why)) return true;
  std::cerr << "gemmtune: no CUDA device (" << (why.empty() ? "unknown reason" : why)
            << "); tuning needs an NVIDIA GPU\n";
  return false;
}

void log_stderr(const std::string& line) { std::cerr << "gemmtune: " << line << "\n"; }

int usage_error(const std::string& command, const std::string& message) {
  std::cerr << "gemmtune " << command << ": " << message << "\nRun with --help for more information.\n";
  return kUsage;
}

std::unique_ptr<Engine> make_engine(const EngineFlags& flags, std::function<void(const std::string&)> log) {
  auto engine = std::make_unique<Engine>(engine_options(flags, std::move(log)));
  // Exit code 3 also covers "the GPU is there but nothing can run on it": none of the engine's
  // backends (those asked for with --backends, else all) is available.
  std::string unavailable;
  bool any = false;
  for (const BackendStatus& b : engine->backends()) {
    if (b.available) any = true;
    else unavailable += "\n  " + (b.op == "gemm" ? "" : b.op + "/") + b.name + ": not available: " + b.reason;
  }
  if (!any) {
    std::cerr << "gemmtune: no " << (flags.backends.empty() ? "" : "requested ") << "backend is available"
              << unavailable << "\n";
    return nullptr;
  }
  return engine;
}


template <class Op>
std::vector<CandidateResult> report_results(Engine& engine, const TuneReport& report, const KernelFor<Op>& kernel) {
  std::vector<CandidateResult> results = report.results;
  if (results.empty() && report.from_cache && engine.cache()) results = engine.cache()->results(report.key);
  if (results.empty() && kernel) {
    // Answered from the engine's in-process memory with no cache to read timings from.
    CandidateResult r;
    r.backend = kernel.backend();
    r.id = kernel.id();
    r.name = kernel.name();
    r.status = CandidateStatus::ok;
    r.winner = true;
    r.reason = "chosen earlier in this process; no timings kept";
    results.push_back(std::move(r));
  }
  std::stable_sort(results.begin(), results.end(), best_first);
  return results;
}
template std::vector<CandidateResult> report_results(Engine&, const TuneReport&, const Kernel&);
template std::vector<CandidateResult> report_results(Engine&, const TuneReport&, const SoftmaxKernel&);
template std::vector<CandidateResult> report_results(Engine&, const TuneReport&, const GroupedKernel&);

std::string cached_at(Engine& engine, const TuneReport& report) {
  if (report.from_cache && engine.cache())
    if (auto choice = engine.cache()->lookup(report.key); choice && choice->tuned_at > 0)
      return format_time(choice->tuned_at);
  return {};
}

void print_report_head(std::ostream& os, const std::string& problem_text, const std::string& device,
                       const TuneReport& report, const std::string& cached_at, double select_ms) {
  os << "problem  " << problem_text << "\n";
  os << "key      " << report.key << "\n";
  os << "device   " << device << "\n";
  if (report.from_cache)
    os << "answer   from cache (tuned " << (cached_at.empty() ? "at an unknown time" : cached_at) << "), in "
       << fixed(select_ms, 3) << " ms; timings below are the cached ones\n";
  else
    os << "answer   tuned now in " << fixed(report.seconds, 2) << " s\n";
  os << "\n";
}

void print_notes(std::ostream& os, const TuneReport& report) {
  if (report.notes.empty()) return;
  os << "notes\n";
  for (const auto& n : report.notes) os << "  - " << n << "\n";
}

std::string status_text(const CandidateResult& r) {
  std::string s = to_string(r.status);
  if (!r.reason.empty()) s += ": " + r.reason;
  return s;
}

std::string fixed(double v, int decimals) {
  if (v < 0) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string sci(double v) {
  if (v < 0) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1e", v);
  return buf;
}

std::string format_table(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right) {
  std::vector<size_t> width;
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) {
      if (width.size() <= c) width.resize(c + 1, 0);
      width[c] = std::max(width[c], row[c].size());
    }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const size_t pad = width[c] - row[c].size();
      const bool r = c < right.size() && right[c];
      if (c) line += "  ";
      if (r) line.append(pad, ' ');
      line += row[c];
      if (!r && c + 1 < row.size()) line.append(pad, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

void write_output(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text << std::flush;
    return;
  }
  // Atomic: a temporary in the same directory, renamed over `path` once complete (a failed
  // write leaves whatever was there). A new file gets the usual 0666 & ~umask.
  std::string tmp = path + ".tmp-XXXXXX";
  const int fd = mkstemp(tmp.data());
  if (fd < 0) GT_THROW(path + ": cannot create (" + std::strerror(errno) + ")");
  const mode_t mask = umask(0);
  umask(mask);
  struct stat st;
  fchmod(fd, ::stat(path.c_str(), &st) == 0 ? st.st_mode & 07777 : 0666 & ~mask);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += size_t(n);
  }
  const bool ok = done == text.size() && ::fsync(fd) == 0;
  const std::string why = std::strerror(errno);
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = ok ? std::strerror(errno) : why;
    ::unlink(tmp.c_str());
    GT_THROW(path + ": write failed (" + err + ")");
  }
}

}  // namespace gemmtune::cli
