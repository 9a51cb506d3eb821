// The engine: problem -> cache -> (candidates -> prepare -> verify -> race -> store) -> Kernel.
#include "gemmtune/engine.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <thread>

#include "backends/backend.hpp"
#include "core/cuda.hpp"
#include "core/device.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/tuning_cache.hpp"
#include "tune/gpu_bench.hpp"
#include "tune/operands.hpp"
#include "tune/timing.hpp"
#include "tune/verify.hpp"

#ifndef GEMMTUNE_VERSION
#define GEMMTUNE_VERSION "0.0.0"
#endif

namespace gemmtune {

const char* version() { return GEMMTUNE_VERSION; }

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Registered {
  const char* name;
  std::unique_ptr<Backend> (*make)(const BackendContext&);
};
// Every backend the engine knows, in the order ties are broken.
constexpr Registered kBackends[] = {
    {"cublaslt", &make_cublaslt_backend},
    {"triton", &make_triton_backend},
    {"cutlass", &make_cutlass_backend},
};

// A candidate during one tune: the variant, its result row, and whether it may race.
struct Entry {
  std::shared_ptr<detail::Candidate> cand;
  CandidateResult result;
  bool prepared = false;
  bool racing = false;
};

}  // namespace

struct Engine::Impl {
  EngineOptions opt;
  DeviceInfo dev;
  std::string env;
  std::function<void(const std::string&)> log;
  std::vector<std::unique_ptr<Backend>> backends;
  std::unique_ptr<TuningCache> cache;
  // Candidates loaded in this process, by memo_key(): candidates bake in alpha and beta.
  std::map<std::string, std::shared_ptr<detail::Candidate>> memo;
  static std::string memo_key(const std::string& key, const GemmProblem& p) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "/%a/%a", double(p.alpha), double(p.beta));
    return key + buf;
  }

  Backend* backend(const std::string& name) {
    for (auto& b : backends)
      if (b->name() == name) return b.get();
    return nullptr;
  }
  std::optional<Kernel> from_cache(const GemmProblem& p, const std::string& key, TuneReport* report);
  Kernel tune(const GemmProblem& p, const std::string& key, TuneReport* report);
  std::vector<Entry> gather(const GemmProblem& p, TuneReport& r);
  void prepare_all(std::vector<Entry>& entries);
  void verify(const GemmProblem& p, std::vector<Entry>& entries, const Stream& s);
};

Engine::Engine(EngineOptions options) : impl_(std::make_unique<Impl>()) {
  auto& I = *impl_;
  I.opt = std::move(options);
  I.log = I.opt.log ? I.opt.log : [](const std::string&) {};
  I.dev = query_device(I.opt.device);
  GT_CUDA(cudaSetDevice(I.opt.device));

  BackendContext ctx{I.dev, I.log};
  std::string known;
  for (auto& r : kBackends) known += known.empty() ? r.name : std::string(", ") + r.name;
  for (auto& want : I.opt.backends)
    GT_CHECK(std::any_of(std::begin(kBackends), std::end(kBackends), [&](auto& r) { return want == r.name; }),
             "backends: unknown backend '" + want + "' (known: " + known + ")");
  for (auto& r : kBackends) {
    bool wanted = I.opt.backends.empty() ||
                  std::find(I.opt.backends.begin(), I.opt.backends.end(), r.name) != I.opt.backends.end();
    if (wanted) I.backends.push_back(r.make(ctx));
  }

  // Everything that can change which candidate is best or correct keys the cache.
  I.env = "device=" + I.dev.name + ";sms=" + std::to_string(I.dev.sm_count) + ";cc=" +
          std::to_string(I.dev.cc_major) + std::to_string(I.dev.cc_minor) +
          ";driver=" + std::to_string(I.dev.driver_version) + ";runtime=" + std::to_string(I.dev.runtime_version) +
          ";gemmtune=" + version();
  for (auto& b : I.backends) I.env += ";" + b->name() + "=" + (b->available() ? b->version() : "unavailable");

  if (I.opt.use_cache)
    I.cache = std::make_unique<TuningCache>(I.opt.cache_path.empty() ? default_cache_path() : I.opt.cache_path, I.log);
}

Engine::~Engine() = default;

const DeviceInfo& Engine::device() const { return impl_->dev; }
const std::string& Engine::environment() const { return impl_->env; }
TuningCache* Engine::cache() { return impl_->cache.get(); }

std::string Engine::cache_key(const GemmProblem& p) const { return stable_hash(impl_->env + "|" + p.canonical()); }

std::vector<std::pair<std::string, std::string>> Engine::backends() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& b : impl_->backends) {
    Verdict v = b->available();
    out.emplace_back(b->name(), v ? "available (" + b->version() + ")" : "not available: " + v.reason);
  }
  return out;
}

Kernel Engine::select(const GemmProblem& p, TuneReport* report) {
  auto t0 = Clock::now();
  p.validate();
  std::string key = cache_key(p);
  auto& I = *impl_;
  auto finish = [&](Kernel k) {
    if (report) report->seconds = seconds_since(t0);
    return k;
  };
  if (auto it = I.memo.find(Impl::memo_key(key, p)); it != I.memo.end()) {
    if (report) {
      *report = TuneReport{};
      report->problem = p, report->key = key, report->from_cache = true;
    }
    return finish(Kernel(p, it->second));
  }
  if (auto k = I.from_cache(p, key, report)) return finish(*k);
  return finish(I.tune(p, key, report));
}

Kernel Engine::tune(const GemmProblem& p, TuneReport* report) {
  auto t0 = Clock::now();
  p.validate();
  Kernel k = impl_->tune(p, cache_key(p), report);
  if (report) report->seconds = seconds_since(t0);
  return k;
}

Kernel Engine::load(const GemmProblem& p, const std::string& backend, const std::string& id) {
  p.validate();
  Backend* b = impl_->backend(backend);
  GT_CHECK(b, "backend: '" + backend + "' is not enabled in this engine");
  std::shared_ptr<detail::Candidate> cand = b->load(p, id);
  cand->prepare();
  return Kernel(p, cand);
}

std::optional<Kernel> Engine::Impl::from_cache(const GemmProblem& p, const std::string& key, TuneReport* report) {
  if (!cache) return std::nullopt;
  auto hit = cache->lookup(key);
  if (!hit || hit->environment != env || hit->problem != p.canonical()) return std::nullopt;
  Backend* b = backend(hit->backend);
  if (!b) return std::nullopt;
  try {
    std::shared_ptr<detail::Candidate> cand = b->load(p, hit->candidate_id);
    cand->prepare();
    memo[memo_key(key, p)] = cand;
    Kernel k(p, cand);
    if (report) {
      *report = TuneReport{};
      report->problem = p, report->key = key, report->from_cache = true;
      report->results = cache->results(key);
    }
    return k;
  } catch (const Error& e) {
    log("warning: cached choice for " + p.str() + " (" + hit->backend + " " + hit->candidate_name +
        ") could not be loaded, re-tuning: " + e.message());
    return std::nullopt;
  }
}

// Candidates of every available backend that supports p; reasons for the others go to notes.
std::vector<Entry> Engine::Impl::gather(const GemmProblem& p, TuneReport& r) {
  std::vector<Entry> out;
  for (auto& b : backends) {
    if (Verdict v = b->available(); !v) {
      r.notes.push_back(b->name() + ": not available: " + v.reason);
      continue;
    }
    if (Verdict v = b->supports(p); !v) {
      r.notes.push_back(b->name() + ": does not support: " + v.reason);
      continue;
    }
    try {
      for (auto& c : b->candidates(p)) {
        Entry e;
        e.cand = std::shared_ptr<detail::Candidate>(std::move(c));
        e.result.backend = b->name();
        e.result.id = e.cand->id();
        e.result.name = e.cand->name();
        e.result.is_default = e.cand->is_default();
        out.push_back(std::move(e));
      }
    } catch (const Error& e) {
      r.notes.push_back(b->name() + ": no candidates: " + e.message());
    }
  }
  return out;
}

// Compiles / prepares every candidate, several at once (compilers run as separate processes;
// other preparation is cheap host work). A failure is recorded on the entry, never thrown.
void Engine::Impl::prepare_all(std::vector<Entry>& entries) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    cudaSetDevice(opt.device);  // threads start on device 0
    for (size_t i; (i = next++) < entries.size();) {
      Entry& e = entries[i];
      auto t0 = Clock::now();
      try {
        e.cand->prepare();
        e.prepared = true;
      } catch (const std::exception& err) {
        e.result.status = CandidateStatus::failed;
        auto* ge = dynamic_cast<const Error*>(&err);
        e.result.reason = ge ? ge->message() : std::string("unexpected error: ") + err.what();
      }
      e.result.compile_s = std::max(e.cand->compile_seconds(), seconds_since(t0));
    }
  };
  unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 16u);
  threads = unsigned(std::min<size_t>(threads, entries.size()));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (auto& e : entries)
    if (!e.prepared) log("  " + e.result.backend + " " + e.result.name + ": failed: " + e.result.reason);
}

// Checks every prepared entry against the GPU reference; only correct ones race.
void Engine::Impl::verify(const GemmProblem& p, std::vector<Entry>& entries, const Stream& s) {
  OperandSet ops(p, opt.tune.seed, s.get());
  DeviceBuffer ref(size_t(p.m) * p.n * sizeof(float));
  reference_gemm(p, ops.args(), ref.as<float>(), s.get());
  s.sync();
  for (auto& e : entries) {
    auto& r = e.result;
    if (!e.prepared) continue;
    try {
      ops.poison_d(s.get());
      e.cand->run(ops.args(), s.get());
      GT_CUDA(cudaGetLastError());
      s.sync();
    } catch (const Error& err) {
      r.status = CandidateStatus::failed;
      r.reason = err.message();
      log("  " + r.backend + " " + r.name + ": failed: " + r.reason);
      // A launch failure can leave a sticky error; clear what can be cleared.
      cudaGetLastError();
      continue;
    }
    CheckResult c = compare(p, ops.args().d, ref.as<float>(), s.get());
    r.rel_err = c.rel_err;
    if (!c.ok) {
      r.status = CandidateStatus::wrong;
      r.reason = c.reason;
      log("  " + r.backend + " " + r.name + ": WRONG: " + c.reason);
      continue;
    }
    r.status = CandidateStatus::ok;
    e.racing = true;
  }
}

Kernel Engine::Impl::tune(const GemmProblem& p, const std::string& key, TuneReport* out) {
  TuneReport r;
  r.problem = p;
  r.key = key;
  log("tuning " + p.str());
  std::vector<Entry> entries = gather(p, r);
  GT_CHECK(!entries.empty(), "no backend has a candidate for " + p.str() + [&] {
    std::string s;
    for (auto& n : r.notes) s += "; " + n;
    return s;
  }());

  prepare_all(entries);
  Stream stream;
  verify(p, entries, stream);
  std::vector<size_t> racing;
  for (size_t i = 0; i < entries.size(); ++i)
    if (entries[i].racing) racing.push_back(i);

  if (!racing.empty()) {
    std::vector<detail::Candidate*> cands;
    for (size_t i : racing) cands.push_back(entries[i].cand.get());
    GpuBench bench(p, cands, opt.tune, dev, stream);
    RaceResult race_result = race(cands.size(), [&](size_t i) { return bench.sample(i); }, opt.tune);
    for (size_t j = 0; j < racing.size(); ++j) {
      auto& res = entries[racing[j]].result;
      const Stats& st = race_result.stats[j];
      res.median_us = st.median, res.p20_us = st.p20, res.p80_us = st.p80, res.samples = st.samples;
      if (!race_result.failure[j].empty()) {
        res.status = CandidateStatus::failed;
        res.reason = race_result.failure[j];
      } else if (race_result.pruned[j]) {
        res.status = CandidateStatus::pruned;
        res.reason = "over " + std::to_string(opt.tune.prune_ratio).substr(0, 4) + "x the best median";
      }
    }
    if (race_result.winner >= 0) {
      entries[racing[size_t(race_result.winner)]].result.winner = true;
      r.spread = race_result.spread;
    }
  }

  auto win = std::find_if(entries.begin(), entries.end(), [](const Entry& e) { return e.result.winner; });
  for (auto& e : entries) r.results.push_back(e.result);
  std::stable_sort(r.results.begin(), r.results.end(), [](const CandidateResult& a, const CandidateResult& b) {
    auto rank = [](const CandidateResult& x) { return x.winner ? 0 : x.status == CandidateStatus::ok ? 1 : x.status == CandidateStatus::pruned ? 2 : 3; };
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    return a.median_us < b.median_us;
  });
  if (win == entries.end()) {
    if (out) *out = r;
    GT_THROW("no correct candidate for " + p.str() + " (" + std::to_string(entries.size()) +
             " tried; first: " + entries.front().result.backend + " " + entries.front().result.reason + ")");
  }
  log("  winner: " + win->result.backend + " " + win->result.name + " " + std::to_string(win->result.median_us) + " us");
  if (cache) cache->store(key, env, r);
  Kernel k(p, win->cand);
  memo[memo_key(key, p)] = win->cand;
  if (out) *out = std::move(r);
  return k;
}

}  // namespace gemmtune
