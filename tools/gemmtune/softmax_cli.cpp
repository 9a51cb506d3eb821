// `gemmtune tune softmax ROWSxCOLS` and softmax suites (softmax_cli.hpp).
#include "softmax_cli.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "commands.hpp"
#include "core/report_json.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/tuning_cache.hpp"
#include "tune/ceilings.hpp"

namespace gemmtune::cli {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

float parse_scale(const std::string& text) {
  if (text.empty()) return 1.0f;
  const char* b = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(b, &end);
  if (end == b || *end != '\0' || errno == ERANGE || !std::isfinite(v))
    GT_THROW("scale: '" + text + "' is not a finite number (softmax: the factor applied before the softmax)");
  return float(v);
}

std::string num(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Results of a softmax select: the report's, the cache's, or one untimed row for `k`.
std::vector<CandidateResult> softmax_results(Engine& engine, const TuneReport& report, const SoftmaxKernel& k) {
  std::vector<CandidateResult> results = report_results(engine, report, Kernel{});
  if (results.empty() && k) {
    CandidateResult r;
    r.backend = k.backend(), r.id = k.id(), r.name = k.name();
    r.status = CandidateStatus::ok, r.winner = true;
    r.reason = "chosen earlier in this process; no timings kept";
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace

SoftmaxProblem build_softmax_problem(int64_t rows, int64_t cols, const ProblemFlags& f) {
  auto refuse = [](const std::string& flag) { GT_THROW("softmax: " + flag + " does not apply (a GEMM flag)"); };
  if (!f.b_dtype.empty()) refuse("--b-dtype");
  if (f.layout != "rc") refuse("--layout");
  if (f.d_layout != "r") refuse("--d-layout");
  if (f.lda || f.ldb || f.ldd) refuse("--lda/--ldb/--ldd (use --stride)");
  if (f.alpha != 1) refuse("--alpha");
  if (f.beta != 0) refuse("--beta");
  if (f.bias) refuse("--bias");
  if (lower(f.act) != "none") refuse("--act");
  if (f.tf32) refuse("--tf32");
  if (f.stride < 0) GT_THROW("stride: must be >= 0 (got " + std::to_string(f.stride) + ")");
  SoftmaxProblem p = SoftmaxProblem::make(rows, cols, parse_dtype(lower(f.dtype), "dtype"));
  p.out = f.out_dtype.empty() ? p.in : parse_dtype(lower(f.out_dtype), "out-dtype");
  p.ld = f.stride;
  p.scale = parse_scale(f.scale);
  p.validate();
  return p;
}

SoftmaxProblem build_softmax_problem(const std::string& rows_cols, const ProblemFlags& f) {
  int64_t rows = 0, cols = 0;
  parse_rows_cols(rows_cols, rows, cols, "shape");
  return build_softmax_problem(rows, cols, f);
}

bool is_softmax_suite(const std::string& csv, const std::string& name) {
  const auto rows = parse_csv(csv, name);
  if (rows.empty()) return false;
  const auto& h = rows[0];
  auto has = [&](const char* c) { return std::any_of(h.begin(), h.end(), [&](const std::string& x) { return lower(x) == c; }); };
  return has("rows") && has("cols");
}

std::vector<std::pair<int64_t, int64_t>> softmax_suite_entries(const std::string& csv, const std::string& name) {
  std::vector<size_t> lines;
  const auto rows = parse_csv(csv, name, &lines);
  GT_CHECK(!rows.empty(), name + ": empty (expected a header rows,cols)");
  int ri = -1, ci = -1;
  for (size_t i = 0; i < rows[0].size(); ++i) {
    if (lower(rows[0][i]) == "rows") ri = int(i);
    if (lower(rows[0][i]) == "cols") ci = int(i);
  }
  GT_CHECK(ri >= 0 && ci >= 0, name + ": header must name columns rows,cols");
  std::vector<std::pair<int64_t, int64_t>> out;
  for (size_t r = 1; r < rows.size(); ++r) {
    const std::string where = name + ":" + std::to_string(lines[r]);
    auto field = [&](int i, const char* what) {
      GT_CHECK(size_t(i) < rows[r].size(), where + ": missing " + what);
      const std::string& t = rows[r][size_t(i)];
      int64_t v = 0;
      auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      GT_CHECK(ec == std::errc() && ptr == t.data() + t.size() && v >= 1,
               where + ": " + what + " '" + t + "' is not a positive integer");
      return v;
    };
    out.emplace_back(field(ri, "rows"), field(ci, "cols"));
  }
  GT_CHECK(!out.empty(), name + ": no problems after the header");
  return out;
}

double softmax_tbps(const SoftmaxProblem& p, double median_us) {
  return median_us > 0 ? p.min_bytes() / (median_us * 1e-6) / 1e12 : 0;
}

int cmd_tune_softmax(const TuneArgs& args) {
  SoftmaxProblem p;
  try {
    if (args.shape2.empty()) GT_INVALID("shape: softmax needs ROWSxCOLS after it (e.g. tune softmax 4096x32768)");
    p = build_softmax_problem(args.shape2, args.problem);
  } catch (const Error& e) {
    return usage_error("tune", e.message());
  }
  if (!require_gpu()) return kNoDevice;
  auto engine = make_engine(args.engine, log_stderr);
  if (!engine) return kNoDevice;

  TuneReport report;
  double select_ms = 0;
  SoftmaxKernel kernel = timed_select(*engine, p, args.force, report, select_ms);
  const auto results = softmax_results(*engine, report, kernel);
  const std::string tuned_at = cached_at(*engine, report);

  double copy = kNominalCopyTBps;
  std::string copy_source = "nominal H200 copy bandwidth";
  if (args.measure_roof) {
    copy = measure_ceilings(engine->device(), log_stderr).copy_TBps;
    copy_source = "copy bandwidth measured now";
  }

  std::ostream& os = args.json == "-" ? std::cerr : std::cout;
  print_report_head(os, "softmax " + p.str(), engine->device().str(), report, tuned_at, select_ms);
  std::vector<std::vector<std::string>> rows{
      {"", "rank", "backend", "candidate", "median us", "p20-p80 us", "TB/s", "% copy", "rel err", "compile s", "status"}};
  int rank = 0;
  for (const auto& r : results) {
    const bool timed = r.median_us > 0;
    const double tb = softmax_tbps(p, r.median_us);
    rows.push_back({r.winner ? "*" : "", std::to_string(++rank), r.backend, r.name, timed ? fixed(r.median_us, 2) : "-",
                    timed ? fixed(r.p20_us, 2) + "-" + fixed(r.p80_us, 2) : "-", timed ? fixed(tb, 3) : "-",
                    timed ? fixed(100.0 * tb / copy, 1) : "-", sci(r.rel_err), fixed(r.compile_s, 2), status_text(r)});
  }
  os << format_table(rows, {false, true, false, false, true, true, true, true, true, true, false});
  os << "(* winner; TB/s = (bytes of x read + bytes of y written) / median)\n";
  os << "copy     " << fixed(copy, 2) << " TB/s (" << copy_source << ")\n";
  print_notes(os, report);

  if (!args.json.empty()) {
    nlohmann::json j{{"op", "softmax"},
                     {"problem", {{"rows", p.rows}, {"cols", p.cols}, {"ld", p.row_stride()}, {"in", to_string(p.in)},
                                  {"out", to_string(p.out)}, {"scale", p.scale}, {"str", p.str()},
                                  {"canonical", p.canonical()}, {"bytes", p.min_bytes()}}},
                     {"key", report.key},
                     {"from_cache", report.from_cache},
                     {"tuned_at", tuned_at},
                     {"seconds", report.seconds},
                     {"select_ms", select_ms},
                     {"spread", report.spread},
                     {"device", engine->device().str()},
                     {"environment", engine->environment("softmax")},
                     {"kernel", {{"backend", kernel.backend()}, {"id", kernel.id()}, {"name", kernel.name()}}},
                     {"copy_TBps", copy},
                     {"copy_source", copy_source},
                     {"notes", report.notes},
                     {"results", nlohmann::json::array()}};
    for (const auto& r : results) {
      const double tb = softmax_tbps(p, r.median_us);
      nlohmann::json jr = to_json(r);
      jr["tbps"] = tb;
      jr["pct_copy"] = copy > 0 ? 100.0 * tb / copy : 0.0;
      j["results"].push_back(std::move(jr));
    }
    write_output(args.json, j.dump(2) + "\n");
  }
  return kOk;
}

int cmd_suite_softmax(const SuiteArgs& args, const std::string& csv_text) {
  if (args.csv == "-" && args.json == "-") {
    return usage_error("suite", "--csv and --json cannot both be stdout");
  }
  if (!args.m_values.empty()) {
    return usage_error("suite", "--m-values does not apply to a softmax suite (header rows,cols)");
  }
  const auto entries = softmax_suite_entries(csv_text, args.file);
  try {
    build_softmax_problem(entries[0].first, entries[0].second, args.problem);
  } catch (const Error& e) {
    return usage_error("suite", e.message());
  }
  if (!require_gpu()) return kNoDevice;
  auto engine = make_engine(args.engine, log_stderr);
  if (!engine) return kNoDevice;

  auto open = [](const std::string& path, std::unique_ptr<std::ofstream>& file) -> std::ostream* {
    if (path.empty()) return nullptr;
    if (path == "-") return &std::cout;
    file = std::make_unique<std::ofstream>(path, std::ios::trunc);
    if (!*file) GT_THROW(path + ": cannot create (" + std::strerror(errno) + ")");
    return file.get();
  };
  std::unique_ptr<std::ofstream> csv_file, json_file;
  std::ostream* csv = open(args.csv.empty() && args.json.empty() ? "-" : args.csv, csv_file);
  std::ostream* jsonl = open(args.json, json_file);
  const std::vector<std::string> columns = {"op",        "rows",    "cols",      "ld",        "dtype",   "out_dtype",
                                            "scale",     "backend", "candidate", "median_us", "p20_us",  "p80_us",
                                            "tbps",      "rel_err", "compile_s", "correct",   "winner",  "from_cache",
                                            "select_ms", "status",  "reason",    "candidate_id"};
  if (csv) {
    for (size_t i = 0; i < columns.size(); ++i) *csv << (i ? "," : "") << columns[i];
    *csv << "\n" << std::flush;
  }
  size_t failed = 0, cached = 0;
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto [nrows, ncols] = entries[i];
    const std::string label = std::to_string(nrows) + "x" + std::to_string(ncols);
    std::vector<std::pair<std::string, nlohmann::json>> base = {
        {"op", "softmax"}, {"rows", nrows}, {"cols", ncols}, {"ld", args.problem.stride ? args.problem.stride : ncols},
        {"dtype", args.problem.dtype}, {"out_dtype", args.problem.out_dtype.empty() ? args.problem.dtype : args.problem.out_dtype},
        {"scale", args.problem.scale.empty() ? "1" : args.problem.scale}};
    auto emit = [&](const std::vector<std::pair<std::string, nlohmann::json>>& rest) {
      nlohmann::json j = nlohmann::json::object();
      std::vector<std::string> cells;
      using Fields = std::vector<std::pair<std::string, nlohmann::json>>;
      for (const Fields* part : {static_cast<const Fields*>(&base), &rest})
        for (const auto& [k, v] : *part) {
          j[k] = v;
          cells.push_back(csv_escape(v.is_string() ? v.template get<std::string>() : v.is_null() ? std::string() : v.dump()));
        }
      if (csv) {
        for (size_t c = 0; c < cells.size(); ++c) *csv << (c ? "," : "") << cells[c];
        *csv << "\n" << std::flush;
      }
      if (jsonl) *jsonl << j.dump() << "\n" << std::flush;
    };
    try {
      const SoftmaxProblem p = build_softmax_problem(nrows, ncols, args.problem);
      TuneReport report;
      double select_ms = 0;
      const SoftmaxKernel k = timed_select(*engine, p, args.force, report, select_ms);
      cached += report.from_cache;
      std::string summary = "no results";
      for (const auto& r : softmax_results(*engine, report, k)) {
        const bool timed = r.median_us > 0;
        const double tb = softmax_tbps(p, r.median_us);
        const bool correct = r.status == CandidateStatus::ok || r.status == CandidateStatus::pruned;
        auto opt = [&](double v) { return timed ? nlohmann::json(v) : nlohmann::json(nullptr); };
        emit({{"backend", r.backend},
              {"candidate", r.name},
              {"median_us", opt(r.median_us)},
              {"p20_us", opt(r.p20_us)},
              {"p80_us", opt(r.p80_us)},
              {"tbps", opt(tb)},
              {"rel_err", r.rel_err >= 0 ? nlohmann::json(r.rel_err) : nlohmann::json(nullptr)},
              {"compile_s", r.compile_s},
              {"correct", correct},
              {"winner", r.winner},
              {"from_cache", report.from_cache},
              {"select_ms", select_ms},
              {"status", to_string(r.status)},
              {"reason", r.reason},
              {"candidate_id", r.id}});
        if (r.winner) summary = r.backend + " " + r.name + " " + num(r.median_us, 2) + " us, " + num(tb, 3) + " TB/s";
      }
      std::cerr << "[" << i + 1 << "/" << entries.size() << "] softmax " << label << ": " << summary
                << (report.from_cache ? " (from cache)" : " (tuned)") << "\n";
    } catch (const Error& err) {
      ++failed;
      emit({{"backend", nullptr}, {"candidate", nullptr}, {"median_us", nullptr}, {"p20_us", nullptr},
            {"p80_us", nullptr}, {"tbps", nullptr}, {"rel_err", nullptr}, {"compile_s", nullptr},
            {"correct", nullptr}, {"winner", nullptr}, {"from_cache", nullptr}, {"select_ms", nullptr},
            {"status", "error"}, {"reason", err.message()}, {"candidate_id", ""}});
      std::cerr << "[" << i + 1 << "/" << entries.size() << "] softmax " << label << ": error: " << err.message() << "\n";
    }
  }
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << "gemmtune: suite: " << entries.size() << " softmax problems, " << cached << " from cache, " << failed
            << " failed, " << num(total_s, 1) << " s\n";
  return failed ? kError : kOk;
}

}  // namespace gemmtune::cli
