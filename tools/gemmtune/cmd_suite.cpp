// `gemmtune suite FILE`: tune a list of problems, one CSV row / JSON line per (problem, candidate).
// A file with header rows,cols is a softmax suite (softmax_cli.cpp).
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "gemmtune/error.hpp"
#include "softmax_cli.hpp"

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

const std::vector<std::string> kColumns = {
    "op",        "model",     "layer",    "m",        "n",          "k",       "dtype",       "layout",
    "epilogue",  "backend",   "candidate", "median_us", "p20_us",   "p80_us",  "tflops",      "rel_err",
    "compile_s", "correct",   "winner",   "default",  "from_cache", "select_ms", "phase",     "out_dtype",
    "d_layout",  "scale",     "status",   "reason",   "candidate_id"};

std::string num(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// One output record: the same fields for CSV (text) and JSON (typed).
struct Record {
  nlohmann::json j = nlohmann::json::object();
  std::vector<std::string> csv;
  void add(const std::string& key, const std::string& text, nlohmann::json value) {
    j[key] = std::move(value);
    csv.push_back(csv_escape(text));
  }
  void add(const std::string& key, const std::string& text) { add(key, text, text); }
};

// How the problem is described in every record, filled from the flags, then from the problem
// once it is built (so a problem that fails to build still gets a readable row).
struct Desc {
  std::string dtype, layout, epilogue = "?", out_dtype, d_layout, scale;
  void from(const GemmProblem& p) {
    dtype = to_string(p.a.dtype);
    layout = layout_letters(p);
    epilogue = epilogue_str(p);
    out_dtype = to_string(p.d.dtype);
    d_layout = p.d.layout == Layout::row ? "r" : "c";
    scale = to_string(p.scale);
  }
};

Record base_record(const SuiteEntry& e, const Desc& d) {
  Record r;
  r.add("op", "gemm");
  r.add("model", e.model);
  r.add("layer", e.layer);
  r.add("m", std::to_string(e.m), e.m);
  r.add("n", std::to_string(e.n), e.n);
  r.add("k", std::to_string(e.k), e.k);
  r.add("dtype", d.dtype);
  r.add("layout", d.layout);
  r.add("epilogue", d.epilogue);
  return r;
}

void add_tail(Record& r, const SuiteEntry& e, const Desc& d) {
  r.add("phase", e.phase);
  r.add("out_dtype", d.out_dtype);
  r.add("d_layout", d.d_layout);
  r.add("scale", d.scale);
}

}  // namespace

int cmd_suite(const SuiteArgs& args) {
  if (args.csv == "-" && args.json == "-") {
    return usage_error("suite", "--csv and --json cannot both be stdout");
  }
  const std::string shapes = read_text_file(args.file);
  if (is_softmax_suite(shapes, args.file)) return cmd_suite_softmax(args, shapes);  // header rows,cols
  if (args.m_values.empty() && suite_needs_m_values(shapes, args.file))
    return usage_error("suite", args.file + ": has no m column, so --m-values FILE (header phase,m) is required");
  std::string m_values;
  if (!args.m_values.empty()) m_values = read_text_file(args.m_values);
  const auto entries =
      suite_entries(shapes, args.file, args.m_values.empty() ? nullptr : &m_values, args.m_values);

  // Flags that cannot describe a valid problem fail the same way for every entry: a usage error.
  try {
    if (args.problem.stride) GT_THROW("stride: applies to softmax suites only (GEMMs: --lda, --ldb, --ldd)");
    build_problem(entries[0].m, entries[0].n, entries[0].k, args.problem);
  } catch (const Error& e) {
    return usage_error("suite", e.message());
  }
  if (!require_gpu()) return kNoDevice;

  Progress progress(entries.size());
  auto engine = make_engine(args.engine, [&progress](const std::string& line) { progress.log(line); });
  if (!engine) return kNoDevice;

  // Without --csv or --json the rows go to stdout as CSV.
  Sink csv(args.csv.empty() && args.json.empty() ? "-" : args.csv), jsonl(args.json);
  if (csv) {
    for (size_t i = 0; i < kColumns.size(); ++i) *csv << (i ? "," : "") << kColumns[i];
    *csv << "\n" << std::flush;
  }
  auto emit = [&](const Record& r) {
    if (csv) {
      for (size_t i = 0; i < r.csv.size(); ++i) *csv << (i ? "," : "") << r.csv[i];
      *csv << "\n";
    }
    if (jsonl) *jsonl << r.j.dump() << "\n";
  };

  size_t failed = 0, cached = 0;
  const auto suite_start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < entries.size(); ++i) {
    const SuiteEntry& e = entries[i];
    std::string label = e.model.empty() && e.layer.empty() ? std::string() : e.model + "/" + e.layer + " ";
    if (!e.phase.empty()) label += e.phase + " ";
    label += std::to_string(e.m) + "x" + std::to_string(e.n) + "x" + std::to_string(e.k);
    progress.begin(label);

    // The problem's own description, even when building it fails.
    Desc desc{args.problem.dtype, args.problem.layout, "?", args.problem.out_dtype, args.problem.d_layout,
              args.problem.scale};
    try {
      const GemmProblem p = build_problem(e.m, e.n, e.k, args.problem);
      desc.from(p);
      TuneReport report;
      double select_ms = 0;
      const Kernel kernel = timed_select(*engine, p, args.force, report, select_ms);
      cached += report.from_cache;
      const auto results = report_results(*engine, report, kernel);

      std::string summary = "no results";
      for (const auto& res : results) {
        Record r = base_record(e, desc);
        const bool timed = res.median_us > 0;
        const double tf = tflops(p, res.median_us);
        const bool correct = res.status == CandidateStatus::ok || res.status == CandidateStatus::pruned;
        r.add("backend", res.backend);
        r.add("candidate", res.name);
        r.add("median_us", timed ? num(res.median_us, 3) : "", timed ? nlohmann::json(res.median_us) : nullptr);
        r.add("p20_us", timed ? num(res.p20_us, 3) : "", timed ? nlohmann::json(res.p20_us) : nullptr);
        r.add("p80_us", timed ? num(res.p80_us, 3) : "", timed ? nlohmann::json(res.p80_us) : nullptr);
        r.add("tflops", timed ? num(tf, 2) : "", timed ? nlohmann::json(tf) : nullptr);
        r.add("rel_err", res.rel_err >= 0 ? sci(res.rel_err) : "",
              res.rel_err >= 0 ? nlohmann::json(res.rel_err) : nullptr);
        r.add("compile_s", num(res.compile_s, 3), res.compile_s);
        r.add("correct", correct ? "true" : "false", correct);
        r.add("winner", res.winner ? "true" : "false", res.winner);
        r.add("default", res.is_default ? "true" : "false", res.is_default);
        r.add("from_cache", report.from_cache ? "true" : "false", report.from_cache);
        r.add("select_ms", num(select_ms, 4), select_ms);
        add_tail(r, e, desc);
        r.add("status", to_string(res.status));
        r.add("reason", res.reason);
        r.add("candidate_id", res.id);
        emit(r);
        if (res.winner)
          summary = res.backend + " " + res.name + " " + num(res.median_us, 2) + " us, " + num(tf, 1) + " TFLOP/s";
      }
      summary += report.from_cache ? " (from cache, " : " (tuned, ";
      summary += "select " + num(select_ms, select_ms < 10 ? 3 : 0) + " ms)";
      progress.end(summary);
    } catch (const Error& err) {
      ++failed;
      Record r = base_record(e, desc);
      for (const char* key : {"backend", "candidate", "median_us", "p20_us", "p80_us", "tflops", "rel_err",
                              "compile_s", "correct", "winner", "default", "from_cache", "select_ms"})
        r.add(key, "", nullptr);
      add_tail(r, e, desc);
      r.add("status", "error");
      r.add("reason", err.message());
      r.add("candidate_id", "");
      emit(r);
      progress.fail(err.message());
    }
    if (csv) *csv << std::flush;
    if (jsonl) *jsonl << std::flush;
  }
  progress.finish();
  const double total_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - suite_start).count();
  std::cerr << "gemmtune: suite: " << entries.size() << " problems, " << cached << " from cache, " << failed
            << " failed, " << num(total_s, 1) << " s\n";
  return failed ? kError : kOk;
}

}  // namespace gemmtune::cli
