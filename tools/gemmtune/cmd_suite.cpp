// `gemmtune suite FILE`: tune a list of problems, one CSV row / JSON line per (problem, candidate).
// The file's header names the op: rows,cols is a softmax suite, anything else a GEMM suite. One
// implementation for every op (suite_op); what differs per op is in OpCli<Op> (op_cli.hpp).
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>

#include <cuda_runtime_api.h>

#include "commands.hpp"
#include "gemmtune/error.hpp"
#include "op_cli.hpp"
#include "softmax_cli.hpp"
#include "suite_gpus.hpp"

namespace gemmtune::cli {

namespace {

// Progress on stderr: a redrawn bar on a terminal, else one line per finished problem (logs
// and CI output stay readable). Engine log lines go through log() so they never tear the bar.
class Progress {
 public:
  explicit Progress(size_t total) : total_(total), tty_(isatty(STDERR_FILENO) == 1) {}

  void begin(const std::string& label) {
    label_ = label;
    if (tty_) draw();
  }
  void end(const std::string& summary) {
    if (tty_) {
      ++done_;
      draw();
    } else {
      ++done_;
      std::cerr << "[" << done_ << "/" << total_ << "] " << label_ << ": " << summary << "\n";
    }
  }
  // A problem that failed: its message always gets a line of its own.
  void fail(const std::string& message) {
    if (tty_) log(label_ + ": " + message);
    end("error: " + message);
  }
  void log(const std::string& line) {
    if (tty_) std::cerr << "\r\033[K";
    std::cerr << "gemmtune: " << line << "\n";
    if (tty_) draw();
  }
  void finish() {
    if (tty_) std::cerr << "\r\033[K" << std::flush;
  }

 private:
  void draw() const {
    winsize ws{};
    const size_t cols = ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20 ? ws.ws_col : 80;
    constexpr size_t kBar = 24;
    const size_t filled = total_ ? kBar * done_ / total_ : kBar;
    std::string line = "[" + std::string(filled, '#') + std::string(kBar - filled, '.') + "] " +
                       std::to_string(done_) + "/" + std::to_string(total_) + " " + label_;
    if (line.size() > cols - 1) line.resize(cols - 1);
    std::cerr << "\r\033[K" << line << std::flush;
  }

  size_t total_, done_ = 0;
  bool tty_;
  std::string label_;
};

// An output stream that is stdout for "-", else a file.
class Sink {
 public:
  explicit Sink(const std::string& path) {
    if (path.empty()) return;
    if (path == "-") {
      os_ = &std::cout;
      return;
    }
    file_ = std::make_unique<std::ofstream>(path, std::ios::trunc);
    if (!*file_) GT_THROW(path + ": cannot create (" + std::strerror(errno) + ")");
    os_ = file_.get();
  }
  explicit operator bool() const { return os_ != nullptr; }
  std::ostream& operator*() { return *os_; }

 private:
  std::unique_ptr<std::ofstream> file_;
  std::ostream* os_ = nullptr;
};

std::string num(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// The record of candidate `res` of row `e` (problem `p`), selected in `select_ms` with `report`.
template <class Op>
Record result_record(const typename OpCli<Op>::Entry& e, const ProblemFlags& flags, const typename Op::Problem& p,
                     const CandidateResult& res, const TuneReport& report, double select_ms) {
  using C = OpCli<Op>;
  Record r(C::kCsvFullPrecision);
  C::head(r, e, flags, &p);
  const bool timed = res.median_us > 0;
  const bool correct = res.status == CandidateStatus::ok || res.status == CandidateStatus::pruned;
  auto measured = [&](const char* key, bool known, double v, const std::string& text) {
    if (known) r.number(key, v, text);
    else r.add(key, "", nullptr);
  };
  const double rate = C::rate(p, res.median_us);
  r.add("backend", res.backend);
  r.add("candidate", res.name);
  measured("median_us", timed, res.median_us, num(res.median_us, 3));
  measured("p20_us", timed, res.p20_us, num(res.p20_us, 3));
  measured("p80_us", timed, res.p80_us, num(res.p80_us, 3));
  measured(C::kRateKey, timed, rate, num(rate, 2));
  measured("rel_err", res.rel_err >= 0, res.rel_err, sci(res.rel_err));
  r.number("compile_s", res.compile_s, num(res.compile_s, 3));
  r.add("correct", correct ? "true" : "false", correct);
  r.add("winner", res.winner ? "true" : "false", res.winner);
  if (C::kHasDefault) r.add("default", res.is_default ? "true" : "false", res.is_default);
  r.add("from_cache", report.from_cache ? "true" : "false", report.from_cache);
  r.number("select_ms", select_ms, num(select_ms, 4));
  C::tail(r, e, flags, &p);
  r.add("status", to_string(res.status));
  r.add("reason", res.reason);
  r.add("candidate_id", res.id);
  return r;
}

// The record of row `e` when it failed with `message` (p: its problem, nullptr when building it
// failed): the candidate's columns empty (null).
template <class Op>
Record error_record(const typename OpCli<Op>::Entry& e, const ProblemFlags& flags, const typename Op::Problem* p,
                    const std::string& message) {
  using C = OpCli<Op>;
  Record r(C::kCsvFullPrecision);
  C::head(r, e, flags, p);
  for (const char* key : {"backend", "candidate", "median_us", "p20_us", "p80_us", C::kRateKey, "rel_err",
                          "compile_s", "correct", "winner", "default", "from_cache", "select_ms"})
    if (C::kHasDefault || std::string(key) != "default") r.add(key, "", nullptr);
  C::tail(r, e, flags, p);
  r.add("status", "error");
  r.add("reason", message);
  r.add("candidate_id", "");
  return r;
}

// Tunes row `e` with `engine`: emits its rows, returns the progress summary; `from_cache` says
// whether the answer came from the cache. Throws Error.
template <class Op>
std::string tune_row(Engine& engine, const typename OpCli<Op>::Entry& e, const SuiteArgs& args,
                     const std::function<void(const Record&)>& emit, bool& from_cache) {
  using C = OpCli<Op>;
  const typename Op::Problem p = C::suite_problem(e, args.problem);
  TuneReport report;
  double select_ms = 0;
  const KernelFor<Op> kernel = timed_select(engine, p, args.force, report, select_ms);
  from_cache = report.from_cache;
  std::string summary = "no results";
  for (const auto& res : report_results(engine, report, kernel)) {
    emit(result_record<Op>(e, args.problem, p, res, report, select_ms));
    if (res.winner)
      summary = res.backend + " " + res.name + " " + num(res.median_us, 2) + " us, " +
                num(C::rate(p, res.median_us), C::kRateDecimals) + " " + C::kRateUnit;
  }
  summary += report.from_cache ? " (from cache, " : " (tuned, ";
  summary += "select " + num(select_ms, select_ms < 10 ? 3 : 0) + " ms)";
  return summary;
}

// The error row of row `e` (its problem is valid: suite_op checked every row first).
template <class Op>
Record row_error(const typename OpCli<Op>::Entry& e, const SuiteArgs& args, const std::string& message) {
  const typename Op::Problem p = OpCli<Op>::suite_problem(e, args.problem);
  return error_record<Op>(e, args.problem, &p, message);
}

// --suite-worker: one GPU's share of a --gpus suite (suite_gpus.hpp has the protocol).
template <class Op, class Entries>
int suite_worker(const SuiteArgs& args, const Entries& entries) {
  SuiteWorkerChannel channel;
  if (!require_gpu()) return kNoDevice;
  auto engine = make_engine(args.engine, [&channel](const std::string& line) { channel.send({{"log", line}}); });
  if (!engine) return kNoDevice;
  size_t i = 0;
  while (channel.next(entries.size(), i)) {
    auto send = [&](const Record& r) { channel.send({{"i", i}, {"record", r.json()}, {"cells", r.cells()}}); };
    try {
      bool from_cache = false;
      const std::string summary = tune_row<Op>(*engine, entries[i], args, send, from_cache);
      channel.send({{"i", i}, {"done", summary}, {"from_cache", from_cache}});
    } catch (const Error& err) {
      send(row_error<Op>(entries[i], args, err.message()));
      channel.send({{"i", i}, {"error", err.message()}});
    }
  }
  return kOk;
}

// The command line of a --gpus suite's workers: this program (or $GEMMTUNE_SUITE_WORKER), the
// same arguments without --gpus, --csv and --json (the parent writes the rows), and --suite-worker.
std::vector<std::string> worker_argv(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  std::error_code ec;
  const char* over = std::getenv("GEMMTUNE_SUITE_WORKER");
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  out.push_back(over && *over ? std::string(over) : !ec ? self.string() : argv.at(0));
  for (size_t a = 1; a < argv.size(); ++a) {
    const std::string& t = argv[a];
    bool dropped = false;
    for (const char* opt : {"--gpus", "--csv", "--json"}) {
      const std::string o = opt;
      if (t == o) {
        ++a, dropped = true;  // and its value
        break;
      }
      if (t.rfind(o + "=", 0) == 0) {
        dropped = true;
        break;
      }
    }
    if (!dropped) out.push_back(t);
  }
  out.push_back("--suite-worker");
  return out;
}

// Devices visible to this process; -1 when that cannot be asked (no driver).
int visible_device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : -1;
}

template <class Op>
int suite_op(const SuiteArgs& args, const std::string& shapes) {
  using C = OpCli<Op>;
  if (const std::string why = C::suite_usage(args, shapes); !why.empty()) return usage_error("suite", why);
  const auto entries = C::suite_entries(args, shapes);

  // Every entry must make a valid problem with the flags, checked before anything runs: a usage
  // error naming the first that does not (not an error row after hours of tuning the others).
  for (size_t i = 0; i < entries.size(); ++i) {
    try {
      C::suite_problem(entries[i], args.problem);
    } catch (const Error& e) {
      return usage_error("suite", (i ? C::label(entries[i]) + ": " : std::string()) + e.message());
    }
  }
  if (args.worker) return suite_worker<Op>(args, entries);
  std::vector<std::string> gpus;
  if (!args.gpus.empty()) {
    // The workers need the GPUs, this process does not; without any it fails as a plain suite
    // would (unless $GEMMTUNE_SUITE_WORKER names another worker program: the tests' fake one).
    const char* worker = std::getenv("GEMMTUNE_SUITE_WORKER");
    if ((!worker || !*worker) && visible_device_count() <= 0 && !require_gpu()) return kNoDevice;
    try {
      gpus = parse_gpus(args.gpus, visible_device_count());
    } catch (const Error& e) {
      return usage_error("suite", e.message());
    }
  }
  std::unique_ptr<Engine> engine;
  Progress progress(entries.size());
  if (gpus.empty()) {  // the workers of --gpus check their own GPU
    if (!require_gpu()) return kNoDevice;
    engine = make_engine(args.engine, [&progress](const std::string& line) { progress.log(line); });
    if (!engine) return kNoDevice;
  }

  // Without --csv or --json the rows go to stdout as CSV.
  Sink csv(args.csv.empty() && args.json.empty() ? "-" : args.csv), jsonl(args.json);
  if (csv) {
    const auto columns = suite_columns<Op>();
    for (size_t i = 0; i < columns.size(); ++i) *csv << (i ? "," : "") << columns[i];
    *csv << "\n" << std::flush;
  }
  auto emit = [&](const Record& r) {
    if (csv) {
      for (size_t i = 0; i < r.cells().size(); ++i) *csv << (i ? "," : "") << r.cells()[i];
      *csv << "\n";
    }
    if (jsonl) *jsonl << r.json().dump() << "\n";
  };

  size_t failed = 0, cached = 0;
  const auto suite_start = std::chrono::steady_clock::now();
  if (gpus.empty()) {
    for (const auto& e : entries) {
      progress.begin(C::label(e));
      try {
        bool from_cache = false;
        progress.end(tune_row<Op>(*engine, e, args, emit, from_cache));
        cached += from_cache;
      } catch (const Error& err) {
        ++failed;
        emit(row_error<Op>(e, args, err.message()));
        progress.fail(err.message());
      }
      if (csv) *csv << std::flush;
      if (jsonl) *jsonl << std::flush;
    }
  } else {
    // Rows arrive a problem at a time, in the order the problems finish.
    GpuSuiteSink sink;
    sink.log = [&](const std::string& gpu, const std::string& line) {
      progress.log(gpu.empty() ? line : "[gpu " + gpu + "] " + line);
    };
    sink.finished = [&](size_t i, const std::string& gpu, const std::vector<nlohmann::json>& rows,
                        const std::string& summary, bool error) {
      progress.begin(C::label(entries[i]) + " [gpu " + gpu + "]");
      for (const auto& row : rows) {
        if (csv) {
          const auto& cells = row["cells"];
          for (size_t c = 0; c < cells.size(); ++c) *csv << (c ? "," : "") << cells[c].get<std::string>();
          *csv << "\n" << std::flush;
        }
        if (jsonl) *jsonl << row["record"].dump() << "\n" << std::flush;
      }
      for (const auto& row : rows) cached += row["record"].value("from_cache", false) && row["record"].value("winner", false);
      if (error) {
        ++failed;
        progress.fail(summary);
      } else {
        progress.end(summary);
      }
    };
    sink.lost = [&](size_t i, const std::string& why) {
      ++failed;
      progress.begin(C::label(entries[i]));
      emit(row_error<Op>(entries[i], args, "lost: " + why));
      if (csv) *csv << std::flush;
      if (jsonl) *jsonl << std::flush;
      progress.fail("lost: " + why);
    };
    run_suite_on_gpus(worker_argv(args.argv), gpus, entries.size(), sink);
  }
  progress.finish();
  const double total_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - suite_start).count();
  // "N problems" for GEMMs (the default op, as in `info`), "N softmax problems" for another op.
  const std::string noun = std::string(Op::name) == GemmOp::name ? "problems" : std::string(Op::name) + " problems";
  std::cerr << "gemmtune: suite: " << entries.size() << " " << noun
            << (gpus.empty() ? std::string() : " on " + std::to_string(gpus.size()) + " GPUs") << ", " << cached
            << " from cache, " << failed
            << " failed, " << num(total_s, 1) << " s\n";
  return failed ? kError : kOk;
}

}  // namespace

void Record::add(const std::string& key, const std::string& text, nlohmann::json value) {
  keys_.push_back(key);
  cells_.push_back(csv_escape(text));
  json_[key] = std::move(value);
}

void Record::number(const std::string& key, double value, const std::string& text) {
  add(key, full_precision_ ? nlohmann::json(value).dump() : text, value);
}

template <class Op>
std::vector<std::string> suite_columns() {
  return error_record<Op>(typename OpCli<Op>::Entry{}, ProblemFlags{}, nullptr, "").keys();
}
template std::vector<std::string> suite_columns<GemmOp>();
template std::vector<std::string> suite_columns<SoftmaxOp>();

int cmd_suite(const SuiteArgs& args) {
  if (args.csv == "-" && args.json == "-") {
    return usage_error("suite", "--csv and --json cannot both be stdout");
  }
  const std::string shapes = read_text_file(args.file);
  return is_softmax_suite(shapes, args.file) ? suite_op<SoftmaxOp>(args, shapes) : suite_op<GemmOp>(args, shapes);
}

}  // namespace gemmtune::cli
