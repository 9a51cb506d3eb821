// JSON forms of problems, engine options and reports (see problem_json.hpp).
#include "core/problem_json.hpp"
#include "core/report_json.hpp"

#include <nlohmann/json.hpp>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <limits>

#include "core/json_input.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune {
namespace {

using json = nlohmann::json;

const char* kind_of(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number";
    default: return "an unsupported value";
  }
}

std::string shown(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

// A JSON object read field by field: every accessor names "<prefix>.<key>" in its errors, and
// finish() rejects fields nobody asked for (typos must not pass silently).
class Fields {
 public:
  Fields(const json& obj, std::string prefix) : obj_(obj), prefix_(std::move(prefix)) {}

  const json* get(const char* key) {
    if (!is_known(key)) known_ += known_.empty() ? key : std::string(", ") + key;
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  std::string name(const char* key) const { return prefix_ + "." + key; }

  // Present and not null (and known from now on).
  bool has(const char* key) { return get(key) != nullptr; }

  int64_t integer(const char* key, int64_t fallback, bool required = false) {
    const json* v = get(key);
    if (!v) {
      if (required) GT_INVALID(name(key) + ": required (an integer)");
      return fallback;
    }
    if (v->is_number_unsigned()) {
      auto u = v->get<uint64_t>();
      if (u > uint64_t(std::numeric_limits<int64_t>::max())) GT_INVALID(name(key) + ": " + shown(*v) + " is too large");
      return int64_t(u);
    }
    if (v->is_number_integer()) return v->get<int64_t>();
    if (v->is_number_float()) {
      double d = v->get<double>();
      // 16.0 is accepted as 16 (some JSON writers emit every number as a float). The range check
      // comes first: casting a double outside int64's range is undefined.
      if (d >= -9.0e18 && d <= 9.0e18 && d == double(int64_t(d))) return int64_t(d);
    }
    GT_INVALID(name(key) + ": must be an integer, got " + kind_of(*v) + " " + shown(*v));
  }

  // An integer in [lo, hi], checked before it is narrowed to int.
  int int_in(const char* key, int fallback, int64_t lo, int64_t hi) {
    const int64_t v = integer(key, fallback);
    if (v < lo || v > hi)
      GT_INVALID(name(key) + ": must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                 std::to_string(v));
    return int(v);
  }

  uint64_t unsigned_integer(const char* key, uint64_t fallback) {
    const json* v = get(key);
    if (!v) return fallback;
    if (v->is_number_unsigned()) return v->get<uint64_t>();
    if (v->is_number_integer()) GT_INVALID(name(key) + ": must be >= 0, got " + shown(*v));
    GT_INVALID(name(key) + ": must be an unsigned integer, got " + kind_of(*v) + " " + shown(*v));
  }

  double number(const char* key, double fallback) {
    const json* v = get(key);
    if (!v) return fallback;
    if (!v->is_number()) GT_INVALID(name(key) + ": must be a number, got " + kind_of(*v) + " " + shown(*v));
    return v->get<double>();
  }

  bool boolean(const char* key, bool fallback) {
    const json* v = get(key);
    if (!v) return fallback;
    if (!v->is_boolean()) GT_INVALID(name(key) + ": must be true or false, got " + kind_of(*v) + " " + shown(*v));
    return v->get<bool>();
  }

  std::string string(const char* key, const std::string& fallback) {
    const json* v = get(key);
    if (!v) return fallback;
    if (!v->is_string()) GT_INVALID(name(key) + ": must be a string, got " + kind_of(*v) + " " + shown(*v));
    return v->get<std::string>();
  }

  void finish() const {
    for (auto it = obj_.begin(); it != obj_.end(); ++it)
      if (!is_known(it.key())) GT_INVALID(prefix_ + "." + it.key() + ": unknown field (known: " + known_ + ")");
  }

 private:
  const json& obj_;
  std::string prefix_;
  std::string known_;  // ", "-joined names asked for so far

  bool is_known(const std::string& key) const {
    size_t pos = 0;
    while (pos <= known_.size()) {
      size_t end = known_.find(", ", pos);
      if (end == std::string::npos) end = known_.size();
      if (end - pos == key.size() && known_.compare(pos, end - pos, key) == 0) return true;
      pos = end + 2;
    }
    return false;
  }
};

json parse_object(const std::string& text, const std::string& what) {
  json j = parse_json_input(text, what);
  if (!j.is_object()) GT_INVALID(what + ": expected a JSON object, got " + kind_of(j));
  return j;
}

// "rc" -> A row, B col.
void parse_layout_letters(const std::string& text, const std::string& field, Layout& a, Layout& b) {
  auto letter = [&](char c, Layout& out) {
    c = char(std::tolower(static_cast<unsigned char>(c)));
    if (c == 'r') return out = Layout::row, true;
    if (c == 'c') return out = Layout::col, true;
    return false;
  };
  if (text.size() != 2 || !letter(text[0], a) || !letter(text[1], b))
    GT_INVALID(field + ": '" + text + "' is not two layout letters, A's then B's, each r (row-major) or c (col-major): rr, rc, cr or cc");
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json problem_object(const GemmProblem& p) {
  auto letter = [](Layout l) { return l == Layout::row ? "r" : "c"; };
  return json{{"m", p.m},
              {"n", p.n},
              {"k", p.k},
              {"dtype", to_string(p.a.dtype)},
              {"b_dtype", to_string(p.b.dtype)},
              {"out_dtype", to_string(p.d.dtype)},
              {"layout", std::string(letter(p.a.layout)) + letter(p.b.layout)},
              {"d_layout", letter(p.d.layout)},
              {"c_layout", letter(p.c.layout)},
              {"lda", p.a.ld},
              {"ldb", p.b.ld},
              {"ldc", p.c.ld},
              {"ldd", p.d.ld},
              {"alpha", p.alpha},
              {"beta", p.beta},
              {"bias", p.bias},
              {"act", to_string(p.act)},
              {"scale", to_string(p.scale)},
              {"tf32", p.tf32}};
}

}  // namespace

GemmProblem problem_from_json(const std::string& text) {
  json j = parse_object(text, "problem");
  Fields f(j, "problem");
  GemmProblem p;
  p.m = f.integer("m", 0, true);
  p.n = f.integer("n", 0, true);
  p.k = f.integer("k", 0, true);

  DType in = parse_dtype(f.string("dtype", "bf16"), f.name("dtype"));
  DType b_in = f.has("b_dtype") ? parse_dtype(f.string("b_dtype", ""), f.name("b_dtype")) : in;
  DType out_default = is_fp8(in) ? DType::bf16 : in;
  DType out = f.has("out_dtype") ? parse_dtype(f.string("out_dtype", ""), f.name("out_dtype"))
                                 : out_default;

  Layout la = Layout::row, lb = Layout::col;
  parse_layout_letters(f.string("layout", "rc"), f.name("layout"), la, lb);
  Layout ld_layout = parse_layout(f.string("d_layout", "r"), f.name("d_layout"));

  p.a = {in, la, f.integer("lda", 0)};
  p.b = {b_in, lb, f.integer("ldb", 0)};
  // C takes D's layout unless said otherwise (C's may differ: the kernels read it by its own).
  const Layout lc = f.has("c_layout") ? parse_layout(f.string("c_layout", ""), f.name("c_layout")) : ld_layout;
  p.c = {out, lc, f.integer("ldc", 0)};
  p.d = {out, ld_layout, f.integer("ldd", 0)};
  for (auto [name, ld] : {std::pair{"lda", p.a.ld}, {"ldb", p.b.ld}, {"ldc", p.c.ld}, {"ldd", p.d.ld}})
    if (ld < 0) GT_INVALID(f.name(name) + ": must be >= 0 (0 = packed), got " + std::to_string(ld));

  double alpha = f.number("alpha", 1.0), beta = f.number("beta", 0.0);
  p.alpha = float(alpha);
  p.beta = float(beta);
  p.bias = f.boolean("bias", false);
  p.act = parse_activation(f.string("act", "none"), f.name("act"));
  bool fp8_in = is_fp8(in) || is_fp8(b_in);
  p.scale = f.has("scale") ? parse_scale_mode(f.string("scale", ""), f.name("scale"))
                           : fp8_in ? ScaleMode::tensorwise : ScaleMode::none;
  p.tf32 = f.boolean("tf32", false);
  f.finish();
  p.validate();
  return p;
}

std::string problem_to_json(const GemmProblem& p) { return dump(problem_object(p)); }

// {"rows", "cols", "ld", "dtype", "out_dtype", "scale"}; Error names the field.
SoftmaxProblem softmax_problem_from_json(const std::string& text) {
  json j = parse_json_input(text, "softmax");
  GT_CHECK_INVALID(j.is_object(), "softmax problem: expected a JSON object");
  for (auto& [k, v] : j.items())
    GT_CHECK_INVALID(k == "rows" || k == "cols" || k == "ld" || k == "dtype" || k == "out_dtype" || k == "scale",
             "softmax problem: unknown field '" + k + "' (rows, cols, ld, dtype, out_dtype, scale)");
  auto integer = [&](const char* k, bool required) -> int64_t {
    if (!j.contains(k)) {
      GT_CHECK_INVALID(!required, std::string("softmax.") + k + ": missing");
      return 0;
    }
    GT_CHECK_INVALID(j[k].is_number_integer(), std::string("softmax.") + k + ": expected an integer");
    // An unsigned value above int64's range is too large, not a negative number (2^64-1 read
    // as int64 is -1).
    GT_CHECK_INVALID(!j[k].is_number_unsigned() || j[k].get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max()),
                     std::string("softmax.") + k + ": " + j[k].dump() + " is too large");
    return j[k].get<int64_t>();
  };
  SoftmaxProblem p;
  p.rows = integer("rows", true), p.cols = integer("cols", true), p.ld = integer("ld", false);
  if (j.contains("dtype")) {
    GT_CHECK_INVALID(j["dtype"].is_string(), "softmax.dtype: expected a string");
    p.in = p.out = parse_dtype(j["dtype"].get<std::string>(), "softmax.dtype");
  }
  if (j.contains("out_dtype")) {
    GT_CHECK_INVALID(j["out_dtype"].is_string(), "softmax.out_dtype: expected a string");
    p.out = parse_dtype(j["out_dtype"].get<std::string>(), "softmax.out_dtype");
  }
  if (j.contains("scale")) {
    GT_CHECK_INVALID(j["scale"].is_number(), "softmax.scale: expected a number");
    p.scale = j["scale"].get<float>();
  }
  p.validate();
  return p;
}

std::string softmax_problem_to_json(const SoftmaxProblem& p) {
  return dump(json{{"rows", p.rows}, {"cols", p.cols}, {"ld", p.ld}, {"dtype", to_string(p.in)},
                   {"out_dtype", to_string(p.out)}, {"scale", p.scale}});
}

EngineOptions engine_options_from_json(const std::string& text) {
  EngineOptions o;
  bool only_space = true;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) only_space = false;
  if (only_space) return o;

  json j = parse_object(text, "options");
  Fields f(j, "options");
  o.cache_path = f.string("cache_path", "");
  o.use_cache = f.boolean("use_cache", true);
  int64_t device = f.integer("device", 0);
  if (device < 0 || device > 1024) GT_INVALID(f.name("device") + ": must be a device index >= 0, got " + std::to_string(device));
  o.device = int(device);

  if (const json* b = f.get("backends")) {
    // A list of names, or one comma-separated string.
    auto add = [&](std::string name) {
      size_t s = name.find_first_not_of(" \t"), e = name.find_last_not_of(" \t");
      if (s == std::string::npos) return;
      o.backends.push_back(name.substr(s, e - s + 1));
    };
    if (b->is_string()) {
      std::string all = b->get<std::string>();
      size_t pos = 0;
      while (pos <= all.size()) {
        size_t comma = all.find(',', pos);
        if (comma == std::string::npos) comma = all.size();
        add(all.substr(pos, comma - pos));
        pos = comma + 1;
      }
    } else if (b->is_array()) {
      for (size_t i = 0; i < b->size(); ++i) {
        if (!(*b)[i].is_string())
          GT_INVALID(f.name("backends") + "[" + std::to_string(i) + "]: must be a backend name (a string), got " +
                   kind_of((*b)[i]) + " " + shown((*b)[i]));
        add((*b)[i].get<std::string>());
      }
    } else {
      GT_INVALID(f.name("backends") + ": must be a list of backend names, got " + kind_of(*b) + " " + shown(*b));
    }
  }

  if (f.boolean("log_to_stderr", false))
    o.log = [](const std::string& line) { std::fprintf(stderr, "gemmtune: %s\n", line.c_str()); };

  if (const json* t = f.get("tune")) {
    if (!t->is_object()) GT_INVALID(f.name("tune") + ": must be an object, got " + kind_of(*t) + " " + shown(*t));
    Fields g(*t, "options.tune");
    TuneOptions& to = o.tune;
    // Counts are read as int64 and range-checked before they are narrowed to int; the time knobs
    // have a ceiling so that a typo cannot make a tune run for days.
    constexpr int64_t kMaxRounds = 100000;
    constexpr double kMaxMs = 60000;
    to.warmup_ms = g.number("warmup_ms", to.warmup_ms);
    to.min_rounds = g.int_in("min_rounds", to.min_rounds, 1, kMaxRounds);
    to.max_rounds = g.int_in("max_rounds", to.max_rounds, 1, kMaxRounds);
    to.round_budget_ms = g.number("round_budget_ms", to.round_budget_ms);
    to.prune_ratio = g.number("prune_ratio", to.prune_ratio);
    to.tie_tolerance = g.number("tie_tolerance", to.tie_tolerance);
    to.tie_rounds = g.int_in("tie_rounds", to.tie_rounds, 0, kMaxRounds);
    to.prefer_margin = g.number("prefer_margin", to.prefer_margin);
    to.duel_rounds = g.int_in("duel_rounds", to.duel_rounds, 0, kMaxRounds);
    to.duel_window = g.number("duel_window", to.duel_window);
    to.duels = g.int_in("duels", to.duels, 0, kMaxRounds);
    to.seed = g.unsigned_integer("seed", to.seed);
    to.spin_us = g.number("spin_us", to.spin_us);
    to.input_sets = g.int_in("input_sets", to.input_sets, 0, 64);
    g.finish();
    if (!(to.spin_us >= 0 && to.spin_us <= kMaxMs * 1000)) GT_INVALID("options.tune.spin_us: must be in [0, 6e7] us");
    if (!(to.warmup_ms >= 0 && to.warmup_ms <= kMaxMs)) GT_INVALID("options.tune.warmup_ms: must be in [0, 60000] ms");
    if (to.max_rounds < to.min_rounds) GT_INVALID("options.tune.max_rounds: must be >= min_rounds");
    if (!(to.round_budget_ms > 0 && to.round_budget_ms <= kMaxMs))
      GT_INVALID("options.tune.round_budget_ms: must be in (0, 60000] ms");
    if (!(to.prune_ratio >= 1)) GT_INVALID("options.tune.prune_ratio: must be >= 1");
    if (!(to.tie_tolerance >= 0)) GT_INVALID("options.tune.tie_tolerance: must be >= 0");
    if (!(to.prefer_margin >= 0)) GT_INVALID("options.tune.prefer_margin: must be >= 0");
    if (!(to.duel_window >= 0)) GT_INVALID("options.tune.duel_window: must be >= 0");
  }
  const int64_t max_configs = f.integer("max_configs", 0);
  if (max_configs < 0 || max_configs > 4096) GT_INVALID(f.name("max_configs") + ": must be in [0, 4096]");
  o.max_configs = int(max_configs);
  const int64_t compile_budget = f.integer("compile_budget", 0);
  if (compile_budget < -1 || compile_budget > 4096)
    GT_INVALID(f.name("compile_budget") + ": must be in [-1, 4096] (-1: no budget, 0: the default)");
  o.compile_budget = int(compile_budget);
  o.remote_cache = f.string("remote_cache", "");  // the URL is checked when the engine starts
  o.remote_timeout_ms = f.number("remote_timeout_ms", 0);
  if (!(o.remote_timeout_ms >= 0 && o.remote_timeout_ms <= 60000))
    GT_INVALID(f.name("remote_timeout_ms") + ": must be in [0, 60000] ms");
  if (const std::string level = f.string("log_level", ""); !level.empty()) {
    if (level == "quiet") o.log_level = LogLevel::quiet;
    else if (level == "warning") o.log_level = LogLevel::warning;
    else if (level == "info") o.log_level = LogLevel::info;
    else if (level == "debug") o.log_level = LogLevel::debug;
    else GT_INVALID(f.name("log_level") + ": '" + level + "' is not one of quiet, warning, info, debug");
  }
  if (const json* c = f.get("compile")) {
    if (!c->is_object()) GT_INVALID(f.name("compile") + ": must be an object, got " + kind_of(*c) + " " + shown(*c));
    Fields g(*c, "options.compile");
    CompileOptions& co = o.compile;
    co.artifacts = g.string("artifacts", "");
    co.python = g.string("python", "");
    co.python_dir = g.string("python_dir", "");
    co.nvcc = g.string("nvcc", "");
    co.cutlass_dir = g.string("cutlass_dir", "");
    co.cutlass_kernel_dir = g.string("cutlass_kernel_dir", "");
    co.keep_build = g.boolean("keep_build", false);
    co.fork_server = g.boolean("fork_server", true);
    const int64_t workers = g.integer("workers", 0), jobs = g.integer("nvcc_jobs", 0);
    if (workers < 0 || workers > 256) GT_INVALID("options.compile.workers: must be in [0, 256]");
    if (jobs < 0 || jobs > 256) GT_INVALID("options.compile.nvcc_jobs: must be in [0, 256]");
    co.workers = int(workers), co.nvcc_jobs = int(jobs);
    co.timeout_s = g.number("timeout_s", 0);
    if (!(co.timeout_s >= 0 && co.timeout_s < 1e9)) GT_INVALID("options.compile.timeout_s: must be in [0, 1e9) seconds");
    if (const json* l = g.get("load_only")) {
      if (!l->is_array()) GT_INVALID(std::string("options.compile.load_only: must be a list of toolchain names, got ") + kind_of(*l));
      for (size_t i = 0; i < l->size(); ++i) {
        const json& t = (*l)[i];
        if (!t.is_string() || (t != "cutlass" && t != "triton" && t != "cutedsl"))
          GT_INVALID("options.compile.load_only[" + std::to_string(i) + "]: must be one of cutlass, triton, cutedsl, got " +
                   shown(t));
        co.load_only.push_back(t.get<std::string>());
      }
    }
    g.finish();
  }
  if (const json* i = f.get("isolation")) {
    if (!i->is_object()) GT_INVALID(f.name("isolation") + ": must be an object, got " + kind_of(*i) + " " + shown(*i));
    Fields g(*i, "options.isolation");
    IsolationOptions& io = o.isolation;
    if (const std::string mode = g.string("mode", "process"); mode == "in_process" || mode == "in-process")
      io.mode = Isolation::in_process;
    else if (mode != "process")
      GT_INVALID("options.isolation.mode: '" + mode + "' is not one of process, in_process");
    io.helper = g.string("helper", "");
    io.candidate_timeout_s = g.number("candidate_timeout_s", 0);
    if (!(io.candidate_timeout_s >= 0 && io.candidate_timeout_s <= 86400))
      GT_INVALID("options.isolation.candidate_timeout_s: must be in [0, 86400] seconds");
    g.finish();
  }
  f.finish();
  return o;
}

static json engine_options_object(const EngineOptions& o) {
  const char* levels[] = {"quiet", "warning", "info", "debug"};
  const TuneOptions& t = o.tune;
  const CompileOptions& c = o.compile;
  return json{
      {"cache_path", o.cache_path.string()},
      {"use_cache", o.use_cache},
      {"backends", o.backends},
      {"device", o.device},
      {"max_configs", o.max_configs},
      {"compile_budget", o.compile_budget},
      {"log_level", levels[int(o.log_level)]},
      {"tune",
       {{"warmup_ms", t.warmup_ms}, {"min_rounds", t.min_rounds}, {"max_rounds", t.max_rounds},
        {"round_budget_ms", t.round_budget_ms}, {"spin_us", t.spin_us}, {"input_sets", t.input_sets},
        {"prune_ratio", t.prune_ratio}, {"tie_tolerance", t.tie_tolerance}, {"tie_rounds", t.tie_rounds},
        {"prefer_margin", t.prefer_margin}, {"duel_rounds", t.duel_rounds}, {"duel_window", t.duel_window},
        {"duels", t.duels}, {"seed", t.seed}}},
      {"compile",
       {{"artifacts", c.artifacts.string()}, {"workers", c.workers}, {"nvcc_jobs", c.nvcc_jobs},
        {"timeout_s", c.timeout_s}, {"load_only", c.load_only}, {"python", c.python},
        {"python_dir", c.python_dir.string()}, {"nvcc", c.nvcc.string()}, {"cutlass_dir", c.cutlass_dir.string()},
        {"cutlass_kernel_dir", c.cutlass_kernel_dir.string()}, {"keep_build", c.keep_build},
        {"fork_server", c.fork_server}}},
      {"isolation",
       {{"mode", o.isolation.mode == Isolation::process ? "process" : "in_process"},
        {"helper", o.isolation.helper.string()},
        {"candidate_timeout_s", o.isolation.candidate_timeout_s}}},
  };
}

std::string engine_options_to_json(const EngineOptions& o) { return dump(engine_options_object(o)); }

std::string report_to_json(const TuneReport& r) {
  const bool softmax = r.op == SoftmaxOp::name;
  const double bytes = r.min_bytes();
  json results = json::array();
  for (const CandidateResult& c : r.results) {
    json jc = to_json(c);
    if (softmax) jc["tbps"] = c.median_us > 0 ? bytes / (c.median_us * 1e-6) / 1e12 : 0.0;
    results.push_back(std::move(jc));
  }
  json j{{"op", r.op},
         {"problem", r.problem_str()},
         {"canonical", r.problem_canonical()},
         {"key", r.key},
         {"from_cache", r.from_cache},
         {"seconds", r.seconds},
         {"spread", r.spread},
         {"notes", r.notes},
         {"results", std::move(results)}};
  if (softmax) {
    j["bytes"] = bytes;
    j["problem_json"] = json::parse(softmax_problem_to_json(r.softmax));
  } else if (r.op == GroupedOp::name) {
    j["problem_json"] = json::parse(grouped_problem_to_json(r.grouped));
  } else {
    j["problem_json"] = problem_object(r.problem);
  }
  return dump(j);
}

std::string kernel_to_json(const Kernel& k) {
  json j{{"backend", k.backend()}, {"id", k.id()}, {"name", k.name()}, {"can_overlap", k.can_overlap()}};
  j["problem"] = k.problem().str();
  j["problem_json"] = problem_object(k.problem());
  return dump(j);
}

}  // namespace gemmtune
