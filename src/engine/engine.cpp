// The engine: problem -> cache -> (candidates -> build artifacts -> prepare -> verify -> race ->
// store) -> kernel.
//
// One tune path for every op: Impl's member templates take the op tag (GemmOp, SoftmaxOp) and
// reach the op's specifics only through OpTraits<Op> (src/tune/ops.hpp: operands, GPU reference
// and check, memo suffix) and BackendFor<Op> (src/backends/backend.hpp). Each op has its own
// backends, its own environment text (so that adding a softmax backend does not invalidate
// GEMM cache entries) and its own memo; the tuning cache is shared (keys differ by the problem's
// canonical text, which starts with the op's name).
#include "gemmtune/engine.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "backends/backend.hpp"
#include "compile/artifact_cache.hpp"
#include "core/cuda.hpp"
#include "core/device.hpp"
#include "core/parallel.hpp"
#include "core/problem_json.hpp"
#include "engine/first_load_check.hpp"
#include "engine/isolate.hpp"
#include "engine/registry.hpp"
#include "engine/torch_standing.hpp"
#include "engine/tune_hooks.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/tuning_cache.hpp"
#include "store/remote_cache.hpp"
#include "tune/gpu_bench.hpp"
#include "tune/ops.hpp"
#include "tune/timing.hpp"

#ifndef GEMMTUNE_VERSION
#define GEMMTUNE_VERSION "0.0.0"
#endif

namespace gemmtune {

const char* version() { return GEMMTUNE_VERSION; }

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A candidate during one tune: the variant, its result row, and whether it may race.
template <class Op>
struct Entry {
  std::shared_ptr<detail::CandidateFor<Op>> cand;
  CandidateResult result;
  std::vector<compile::Built> built;  // one per job, once the artifact stage succeeded
  bool built_ok = false;
  bool prepared = false;
  bool racing = false;
};

// One op's backends, environment and loaded candidates.
template <class Op>
struct OpState {
  std::vector<std::unique_ptr<BackendFor<Op>>> backends;
  std::string env;
  // Candidates loaded in this process, by cache key + OpTraits<Op>::memo_suffix (candidates
  // bake in run-time arguments such as alpha, beta, scale).
  std::map<std::string, std::shared_ptr<detail::CandidateFor<Op>>> memo;

  BackendFor<Op>* backend(const std::string& name) {
    for (auto& b : backends)
      if (b->name() == name) return b.get();
    return nullptr;
  }
};

}  // namespace

struct Engine::Impl {
  EngineOptions opt;  // resolved (core/settings.hpp)
  DeviceInfo dev;
  Log log;
  std::unique_ptr<TuningCache> cache;
  std::unique_ptr<RemoteTuningCache> remote;  // in front of `cache`, when configured
  std::unique_ptr<compile::ArtifactCache> artifacts;  // outlives the backends below
  OpState<GemmOp> gemm;
  OpState<SoftmaxOp> softmax;
  OpState<GroupedOp> grouped;
  // Candidates that killed or hung the tuning helper in this engine: kept out of later tunes
  // even without a cache (with one, the cache holds them too).
  std::vector<Quarantined> session_quarantine;

  template <class Op>
  OpState<Op>& state() {
    if constexpr (std::is_same_v<Op, GemmOp>) return gemm;
    else if constexpr (std::is_same_v<Op, GroupedOp>) return grouped;
    else return softmax;
  }
  template <class Op>
  std::string key_of(const typename Op::Problem& p) {
    return stable_hash(state<Op>().env + "|" + p.canonical());
  }

  template <class Op>
  KernelFor<Op> select(const typename Op::Problem& p, TuneReport* report);
  template <class Op>
  KernelFor<Op> tune_now(const typename Op::Problem& p, TuneReport* report);
  template <class Op>
  KernelFor<Op> load(const typename Op::Problem& p, const std::string& backend, const std::string& id);
  template <class Op>
  std::optional<KernelFor<Op>> from_cache(const typename Op::Problem& p, const std::string& key, TuneReport* report);
  template <class Op>
  KernelFor<Op> tune(const typename Op::Problem& p, const std::string& key, TuneReport* report);
  template <class Op>
  KernelFor<Op> tune_isolated(const typename Op::Problem& p, const std::string& key, TuneReport* report);
  template <class Op>
  KernelFor<Op> tune_here(const typename Op::Problem& p, const std::string& key, TuneReport* report,
                          const detail::TuneHooks& hooks);
  template <class Op>
  std::vector<Entry<Op>> gather(const typename Op::Problem& p, TuneReport& r);
  template <class Op>
  void build_artifacts(std::vector<Entry<Op>>& entries);
  template <class Op>
  void prepare_all(std::vector<Entry<Op>>& entries, const detail::TuneHooks& hooks);
  template <class Op>
  std::shared_ptr<detail::CandidateFor<Op>> prepared(std::unique_ptr<detail::CandidateFor<Op>> cand);
  template <class Op>
  void verify(const typename Op::Problem& p, const std::string& key, std::vector<Entry<Op>>& entries, const Stream& s,
              const detail::TuneHooks& hooks);
};

namespace {

template <class Op>
void make_op_state(OpState<Op>& st, const EngineOptions& opt, const BackendContext& ctx, const std::string& base_env) {
  st.backends = make_backends<Op>(opt.backends, ctx);
  // Everything that can change which candidate is best or correct keys the cache.
  st.env = base_env;
  for (auto& b : st.backends) st.env += ";" + b->name() + "=" + (b->available() ? b->version() : "unavailable");
}

}  // namespace

Engine::Engine(EngineOptions options) : impl_(std::make_unique<Impl>()) {
  auto& I = *impl_;
  check_backend_names(options.backends);
  I.dev = query_device(options.device);  // before anything starts: no device, no workers
  GT_CUDA(cudaSetDevice(options.device));
  EngineSetup setup(options);
  I.opt = std::move(setup.opt);
  I.log = setup.log;
  I.artifacts = std::move(setup.artifacts);
  BackendContext ctx{I.dev, I.log, I.artifacts.get(), I.opt.max_configs, I.opt.compile_budget};
  const std::string base = "device=" + I.dev.name + ";sms=" + std::to_string(I.dev.sm_count) + ";cc=" +
                           std::to_string(I.dev.cc_major) + std::to_string(I.dev.cc_minor) +
                           ";driver=" + std::to_string(I.dev.driver_version) +
                           ";runtime=" + std::to_string(I.dev.runtime_version) + ";gemmtune=" + version() +
                           // The race's method: choices timed after a memset flush (before 2026-12-05)
                           // favoured evict-first kernels (tune/l2_flush.hpp), so they are not reused.
                           ";timing=clean-l2";
  make_op_state(I.gemm, I.opt, ctx, base);
  make_op_state(I.softmax, I.opt, ctx, base);
  make_op_state(I.grouped, I.opt, ctx, base);

  if (I.opt.use_cache) {
    try {
      I.cache = std::make_unique<TuningCache>(I.opt.cache_path, I.log.warnings());
    } catch (const Error& e) {  // a read-only directory, another program's file: tune, do not fail
      I.log.warn(e.message() + "; working without a tuning cache");
    }
  }
  if (!I.opt.remote_cache.empty()) {
    const RedisAddress address = parse_redis_url(I.opt.remote_cache, "remote_cache");
    if (I.cache)
      I.remote = std::make_unique<RemoteTuningCache>(
          make_redis_store(address, std::chrono::milliseconds(std::max(1L, std::lround(I.opt.remote_timeout_ms)))), I.log);
    else
      I.log.warn("remote tuning cache " + address.url() + " not used: it needs the local cache (use_cache is off)");
  }
}

Engine::~Engine() = default;

const DeviceInfo& Engine::device() const { return impl_->dev; }
const std::string& Engine::environment() const { return impl_->gemm.env; }
const std::string& Engine::environment(std::string_view op) const {
  if (op == GemmOp::name) return impl_->gemm.env;
  if (op == SoftmaxOp::name) return impl_->softmax.env;
  if (op == GroupedOp::name) return impl_->grouped.env;
  GT_THROW("environment: unknown op '" + std::string(op) + "' (gemm, softmax, grouped)");
}
TuningCache* Engine::cache() { return impl_->cache.get(); }

std::string Engine::cache_key(const GemmProblem& p) const { return impl_->key_of<GemmOp>(p); }
std::string Engine::cache_key(const SoftmaxProblem& p) const { return impl_->key_of<SoftmaxOp>(p); }
std::string Engine::cache_key(const GroupedGemmProblem& p) const { return impl_->key_of<GroupedOp>(p); }

std::vector<BackendStatus> Engine::backends() const {
  std::vector<BackendStatus> out;
  auto list = [&](auto& st, const char* op) {
    for (auto& b : st.backends) {
      Verdict v = b->available();
      out.push_back({op, b->name(), v.ok, v ? b->version() : "", v.reason});
    }
  };
  list(impl_->gemm, GemmOp::name);
  list(impl_->softmax, SoftmaxOp::name);
  list(impl_->grouped, GroupedOp::name);
  return out;
}

TorchStanding Engine::versus_torch(const Kernel& kernel) {
  auto& st = impl_->gemm;
  auto reproduces_torch = [&](const std::string& backend, const std::string& id) {
    const Backend* b = st.backend(backend);
    return b && b->reproduces_torch(id);
  };
  TorchStanding s;
  if (impl_->cache)
    s = detail::torch_standing(impl_->cache->results(cache_key(kernel.problem())), kernel.backend(), kernel.id(),
                               [&](const CandidateResult& r) { return reproduces_torch(r.backend, r.id); });
  s.is_torch = reproduces_torch(kernel.backend(), kernel.id());
  return s;
}

Kernel Engine::select(const GemmProblem& p, TuneReport* report) { return impl_->select<GemmOp>(p, report); }
Kernel Engine::tune(const GemmProblem& p, TuneReport* report) { return impl_->tune_now<GemmOp>(p, report); }
Kernel Engine::load(const GemmProblem& p, const std::string& backend, const std::string& id) {
  return impl_->load<GemmOp>(p, backend, id);
}
SoftmaxKernel Engine::select(const SoftmaxProblem& p, TuneReport* report) { return impl_->select<SoftmaxOp>(p, report); }
SoftmaxKernel Engine::tune(const SoftmaxProblem& p, TuneReport* report) { return impl_->tune_now<SoftmaxOp>(p, report); }
SoftmaxKernel Engine::load(const SoftmaxProblem& p, const std::string& backend, const std::string& id) {
  return impl_->load<SoftmaxOp>(p, backend, id);
}
GroupedKernel Engine::select(const GroupedGemmProblem& p, TuneReport* report) { return impl_->select<GroupedOp>(p, report); }
GroupedKernel Engine::tune(const GroupedGemmProblem& p, TuneReport* report) { return impl_->tune_now<GroupedOp>(p, report); }
GroupedKernel Engine::load(const GroupedGemmProblem& p, const std::string& backend, const std::string& id) {
  return impl_->load<GroupedOp>(p, backend, id);
}

// ---- the tune path, once for every op ----------------------------------------------------------

template <class Op>
KernelFor<Op> Engine::Impl::select(const typename Op::Problem& p, TuneReport* report) {
  auto t0 = Clock::now();
  p.validate();
  std::string key = key_of<Op>(p);
  auto finish = [&](KernelFor<Op> k) {
    if (report) report->seconds = seconds_since(t0);
    return k;
  };
  auto& st = state<Op>();
  auto it = st.memo.find(key + OpTraits<Op>::memo_suffix(p));
  if (auto* c = it == st.memo.end() ? nullptr : dynamic_cast<detail::FirstLoadChecked<Op>*>(it->second.get());
      c && c->failed()) {
    // The cached choice failed its first-load check: never again here, and tuned afresh.
    if (cache) {
      try {
        cache->quarantine({st.env, key, c->backend(), c->id(), c->name(), CandidateStatus::wrong, c->verdict().reason, 0});
      } catch (const Error& err) {
        log.warn("could not quarantine " + c->backend() + " " + c->name() + " in the tuning cache: " + err.message());
      }
    }
    st.memo.erase(it);
    return finish(tune<Op>(p, key, report));
  }
  if (it != st.memo.end()) {
    if (report) {
      *report = TuneReport{};
      OpTraits<Op>::set_problem(*report, p);
      report->key = key, report->from_cache = true;
    }
    return finish(KernelFor<Op>(p, it->second));
  }
  if (auto k = from_cache<Op>(p, key, report)) return finish(*k);
  return finish(tune<Op>(p, key, report));
}

template <class Op>
KernelFor<Op> Engine::Impl::tune_now(const typename Op::Problem& p, TuneReport* report) {
  auto t0 = Clock::now();
  p.validate();
  KernelFor<Op> k = tune<Op>(p, key_of<Op>(p), report);
  if (report) report->seconds = seconds_since(t0);
  return k;
}

template <class Op>
KernelFor<Op> Engine::Impl::load(const typename Op::Problem& p, const std::string& backend, const std::string& id) {
  p.validate();
  BackendFor<Op>* b = state<Op>().backend(backend);
  GT_CHECK(b, "backend: '" + backend + "' is not enabled in this engine for " + Op::name);
  return KernelFor<Op>(p, prepared<Op>(b->load(p, id)));
}

template <class Op>
std::optional<KernelFor<Op>> Engine::Impl::from_cache(const typename Op::Problem& p, const std::string& key,
                                                      TuneReport* report) {
  if (!cache) return std::nullopt;
  auto& st = state<Op>();
  auto hit = cache->lookup(key);
  const bool remote_hit = !hit && remote && (hit = remote->fetch(*cache, key, st.env, p.canonical()));
  if (!hit || hit->environment != st.env || hit->problem != p.canonical()) return std::nullopt;
  BackendFor<Op>* b = st.backend(hit->backend);
  if (!b) return std::nullopt;
  try {
    const auto t_load = Clock::now();
    std::shared_ptr<detail::CandidateFor<Op>> cand = prepared<Op>(b->load(p, hit->candidate_id));
    // Checked once per process, on its first load (one reference run, as in a tune), beside the
    // caller: the kernel's first run waits for the verdict (src/engine/first_load_check.hpp). A
    // cached choice that is wrong here (an imported cache, another build) is never run.
    cand = std::make_shared<detail::FirstLoadChecked<Op>>(std::move(cand), p, opt.tune.seed, dev.index, log);
    log.debug("cached choice " + hit->backend + " " + hit->candidate_name + " loaded in " +
              std::to_string(1e3 * seconds_since(t_load)) + " ms; its first-load check runs beside the caller");
    st.memo[key + OpTraits<Op>::memo_suffix(p)] = cand;
    KernelFor<Op> k(p, cand);
    if (report) {
      *report = TuneReport{};
      OpTraits<Op>::set_problem(*report, p);
      report->key = key, report->from_cache = true;
      report->results = cache->results(key);
      if (remote_hit) report->notes.push_back("from the remote tuning cache " + remote->describe());
    }
    return k;
  } catch (const Error& e) {
    log.warn("cached choice for " + p.str() + " (" + hit->backend + " " + hit->candidate_name +
        ") could not be loaded, re-tuning: " + e.message());
    return std::nullopt;
  }
}

// Candidates of every available backend that supports p; reasons for the others go to notes.
template <class Op>
std::vector<Entry<Op>> Engine::Impl::gather(const typename Op::Problem& p, TuneReport& r) {
  std::vector<Entry<Op>> out;
  for (auto& b : state<Op>().backends) {
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
        Entry<Op> e;
        e.cand = std::shared_ptr<detail::CandidateFor<Op>>(std::move(c));
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

// One candidate outside a tune (a cache hit, Engine::load): its artifacts (store hits, or built
// now), then prepare.
template <class Op>
std::shared_ptr<detail::CandidateFor<Op>> Engine::Impl::prepared(std::unique_ptr<detail::CandidateFor<Op>> cand) {
  std::vector<compile::Built> built;
  for (const compile::Job& j : cand->jobs()) built.push_back(artifacts->build(j));
  cand->prepare(built);
  return std::shared_ptr<detail::CandidateFor<Op>>(std::move(cand));
}

// The artifact stage: every candidate's compile jobs, built in the artifact cache's one pool
// (store hits need no compiler); a failed job fails its candidates with the compiler's message.
template <class Op>
void Engine::Impl::build_artifacts(std::vector<Entry<Op>>& entries) {
  std::vector<compile::Job> jobs;
  std::vector<std::pair<size_t, size_t>> span;  // per entry: first job, count
  for (auto& e : entries) {
    std::vector<compile::Job> js = e.cand->jobs();
    span.emplace_back(jobs.size(), js.size());
    for (auto& j : js) jobs.push_back(std::move(j));
  }
  if (!jobs.empty()) log("  artifacts: " + std::to_string(jobs.size()) + " for " + std::to_string(entries.size()) + " candidates");
  size_t done = 0, built = 0, failed = 0;
  double seconds = 0;
  const auto t0 = Clock::now();
  std::vector<compile::ArtifactCache::Outcome> out =
      artifacts->build_all(jobs, [&](size_t i, const compile::ArtifactCache::Outcome& o) {
        ++done;
        if (!o.built) ++failed;
        else if (!o.built->hit) ++built, seconds += o.built->seconds;
        log.debug("  [" + std::to_string(done) + "] " + jobs[i].toolchain + " " + jobs[i].what + ": " +
                  (!o.built ? "failed: " + o.error : o.built->hit ? "in the store" : "built"));
      });
  if (!jobs.empty()) {
    char line[200];
    std::snprintf(line, sizeof line, "  artifacts: %zu distinct, %zu built (%.1f s of compile, %.1f s wall), %zu from the store, %zu failed",
                  done, built, seconds, seconds_since(t0), done - built - failed, failed);
    log(line);
  }
  for (size_t k = 0; k < entries.size(); ++k) {
    Entry<Op>& e = entries[k];
    auto [first, count] = span[k];
    e.built_ok = true;
    double compile_s = 0;
    for (size_t j = first; j < first + count; ++j) {
      if (!out[j].built) {
        e.built_ok = false;
        e.result.status = CandidateStatus::failed;
        e.result.reason = out[j].error;
        break;
      }
      compile_s += out[j].built->seconds;
      e.built.push_back(*out[j].built);
    }
    e.result.compile_s = compile_s;
  }
}

// Prepares every built candidate (loads artifacts, allocates), several at once. A gemmtune Error
// puts the candidate out of the race; anything else is a bug and propagates.
template <class Op>
void Engine::Impl::prepare_all(std::vector<Entry<Op>>& entries, const detail::TuneHooks& hooks) {
  // In the tuning helper, one at a time: a prepare that crashes the process must name its
  // candidate (prepares load cubins and shared objects: milliseconds each).
  unsigned threads = hooks.running ? 1u : std::clamp(std::thread::hardware_concurrency(), 1u, 16u);
  std::mutex mu;
  std::exception_ptr unexpected;
  parallel_for(
      entries.size(), threads,
      [&](size_t i) {
        Entry<Op>& e = entries[i];
        if (!e.built_ok) return;
        auto t0 = Clock::now();
        try {
          if (hooks.running) hooks.running(e.result, "prepare");
          e.cand->prepare(e.built);
          e.prepared = true;
        } catch (const Error& err) {
          e.result.status = CandidateStatus::failed;
          e.result.reason = err.message();
          if (hooks.failed) hooks.failed(e.result, e.result.reason);
        } catch (...) {
          std::lock_guard<std::mutex> lock(mu);
          if (!unexpected) unexpected = std::current_exception();
        }
        e.built.clear();  // the candidate holds what it loaded
        e.result.compile_s += seconds_since(t0);
      },
      [&] { cudaSetDevice(opt.device); });  // threads start on device 0
  if (unexpected) std::rethrow_exception(unexpected);
  for (auto& e : entries)
    if (!e.prepared) log("  " + e.result.backend + " " + e.result.name + ": failed: " + e.result.reason);
}

// Checks every prepared entry against the GPU reference; only correct ones race.
template <class Op>
void Engine::Impl::verify(const typename Op::Problem& p, const std::string& key, std::vector<Entry<Op>>& entries,
                          const Stream& s, const detail::TuneHooks& hooks) {
  typename OpTraits<Op>::Operands ops = OpTraits<Op>::verify_operands(p, opt.tune.seed, s.get());
  typename OpTraits<Op>::Checker checker(p, ops, s.get());
  s.sync();
  for (auto& e : entries) {
    auto& r = e.result;
    if (!e.prepared) continue;
    try {
      if (hooks.running) hooks.running(r, "verify");
      detail::run_poisoned<Op>(*e.cand, ops, s.get());
    } catch (const Error& err) {
      r.status = CandidateStatus::failed;
      r.reason = err.message();
      log("  " + r.backend + " " + r.name + ": failed: " + r.reason);
      // A launch failure can leave a sticky error; clear what can be cleared.
      cudaGetLastError();
      if (hooks.failed) hooks.failed(r, r.reason);
      continue;
    }
    if (hooks.stage) hooks.stage("verify");
    CheckResult c = detail::check_outputs<Op>(checker, ops, s.get());
    r.rel_err = c.rel_err;
    if (!c.ok) {
      r.status = CandidateStatus::wrong;
      r.reason = c.reason;
      log.warn(r.backend + " " + r.name + ": WRONG: " + c.reason);
      // Never tried again for this problem in this environment (docs/isolation.md).
      if (cache) {
        try {
          cache->quarantine({state<Op>().env, key, r.backend, r.id, r.name, CandidateStatus::wrong, c.reason, 0});
        } catch (const Error& err) {
          log.warn("could not quarantine " + r.backend + " " + r.name + " in the tuning cache: " + err.message());
        }
      }
      continue;
    }
    r.status = CandidateStatus::ok;
    e.racing = true;
  }
}

namespace {

// Throws the "no correct candidate" Error of a tune whose results (best first) have no winner.
[[noreturn]] void throw_no_winner(const std::string& problem, const std::vector<CandidateResult>& results) {
  std::string first = results.empty() ? "none" : results.front().backend + " " + results.front().reason;
  GT_THROW("no correct candidate for " + problem + " (" + std::to_string(results.size()) + " tried; first: " + first + ")");
}

// The candidates of `entries` that `quarantine` names (by backend and id) leave `entries` and
// become result rows "quarantined: <reason>" in `held`.
template <class Op>
void hold_quarantined(std::vector<Entry<Op>>& entries, const std::vector<Quarantined>& quarantine,
                      std::vector<CandidateResult>& held) {
  if (quarantine.empty()) return;
  std::vector<Entry<Op>> keep;
  for (auto& e : entries) {
    auto q = std::find_if(quarantine.begin(), quarantine.end(), [&](const Quarantined& x) {
      return x.backend == e.result.backend && x.candidate_id == e.result.id;
    });
    if (q == quarantine.end()) {
      keep.push_back(std::move(e));
      continue;
    }
    CandidateResult r = e.result;
    r.status = q->status;
    r.reason = q->reason.rfind("quarantined", 0) == 0 ? q->reason : "quarantined: " + q->reason;
    held.push_back(std::move(r));
  }
  entries = std::move(keep);
}

}  // namespace

template <class Op>
KernelFor<Op> Engine::Impl::tune(const typename Op::Problem& p, const std::string& key, TuneReport* out) {
  if (opt.isolation.mode == Isolation::process) return tune_isolated<Op>(p, key, out);
  return tune_here<Op>(p, key, out, detail::TuneHooks{});
}

// The caller's side of isolation: the helper tunes (and stores every timing in the shared cache);
// this process loads and prepares only the winner.
template <class Op>
KernelFor<Op> Engine::Impl::tune_isolated(const typename Op::Problem& p, const std::string& key, TuneReport* out) {
  isolate::Request req;
  req.op = Op::name;
  if constexpr (std::is_same_v<Op, GemmOp>) req.problem_json = problem_to_json(p);
  else if constexpr (std::is_same_v<Op, GroupedOp>) req.problem_json = grouped_problem_to_json(p);
  else req.problem_json = softmax_problem_to_json(p);
  req.key = key;
  req.environment = state<Op>().env;
  EngineOptions helper_opt = opt;
  if (!log.enabled(LogLevel::warning)) helper_opt.log_level = LogLevel::quiet;  // nobody reads its lines
  req.options_json = engine_options_to_json(helper_opt);
  TuneReport r = isolate::tune_in_helper(opt, log, cache.get(), req, session_quarantine);
  OpTraits<Op>::set_problem(r, p);
  r.key = key;
  r.rank();
  const CandidateResult* w = r.winner();
  if (!w) {
    if (out) *out = r;
    throw_no_winner(p.str(), r.results);
  }
  BackendFor<Op>* b = state<Op>().backend(w->backend);
  GT_CHECK(b, "the tuning helper chose backend '" + w->backend + "', which this engine does not have for " + Op::name);
  std::shared_ptr<detail::CandidateFor<Op>> cand = prepared<Op>(b->load(p, w->id));
  state<Op>().memo[key + OpTraits<Op>::memo_suffix(p)] = cand;
  // The helper stored the tune in the shared local cache; the remote cache is this engine's.
  if (cache && remote) remote->publish(*cache, key, state<Op>().env);
  if (out) *out = std::move(r);
  return KernelFor<Op>(p, cand);
}

template <class Op>
KernelFor<Op> Engine::Impl::tune_here(const typename Op::Problem& p, const std::string& key, TuneReport* out,
                                      const detail::TuneHooks& hooks) {
  TuneReport r;
  OpTraits<Op>::set_problem(r, p);
  r.key = key;
  log("tuning " + std::string(Op::name) + " " + p.str());
  if (hooks.stage) hooks.stage("candidates");
  std::vector<Entry<Op>> entries = gather<Op>(p, r);
  std::vector<CandidateResult> held;  // quarantined: reported, never run
  {
    std::vector<Quarantined> q = hooks.exclude;
    if (cache) {
      std::vector<Quarantined> more = cache->quarantined(state<Op>().env, key);
      q.insert(q.end(), more.begin(), more.end());
    }
    hold_quarantined(entries, q, held);
    if (!held.empty()) log("  " + std::to_string(held.size()) + " candidates quarantined (not tried)");
  }
  {
    std::map<std::string, int> per;
    for (auto& e : entries) ++per[e.result.backend];
    std::string text;
    for (auto& [b, n] : per) text += (text.empty() ? "" : ", ") + b + " " + std::to_string(n);
    log("  " + std::to_string(entries.size()) + " candidates (" + text + ")");
  }
  GT_CHECK(!entries.empty() || !held.empty(), "no backend has a candidate for " + p.str() + [&] {
    std::string s;
    for (auto& n : r.notes) s += "; " + n;
    return s;
  }());

  if (hooks.stage) hooks.stage("artifacts");
  build_artifacts(entries);
  prepare_all(entries, hooks);
  if (hooks.stage) hooks.stage("verify");
  Stream stream;
  verify(p, key, entries, stream, hooks);
  std::vector<size_t> racing;
  for (size_t i = 0; i < entries.size(); ++i)
    if (entries[i].racing) racing.push_back(i);
  {
    size_t prepared = 0;
    for (auto& e : entries) prepared += e.prepared;
    log("  verified " + std::to_string(prepared) + " of " + std::to_string(entries.size()) + " candidates: " +
        std::to_string(racing.size()) + " correct; racing them");
  }

  if (!racing.empty()) {
    if (hooks.stage) hooks.stage("race");
    std::vector<detail::CandidateFor<Op>*> cands;
    for (size_t i : racing) cands.push_back(entries[i].cand.get());
    // The candidate whose code runs now, for the hooks (the helper names it to the caller).
    const CandidateResult* current = nullptr;
    auto announce = [&](size_t i) {
      current = &entries[racing[i]].result;
      if (hooks.running) hooks.running(*current, "race");
    };
    std::optional<GpuBench<Op>> bench;
    try {
      bench.emplace(p, cands, opt.tune, dev, stream, hooks.running ? std::function<void(size_t)>(announce) : nullptr);
    } catch (const Error& err) {
      if (hooks.failed && current) hooks.failed(*current, err.message());
      throw;
    }
    RaceResult race_result = race(
        cands.size(),
        [&](size_t i) {
          announce(i);
          try {
            return bench->sample(i);
          } catch (const Error& err) {
            if (hooks.failed) hooks.failed(*current, err.message());
            throw;
          }
        },
        opt.tune);
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
    for (const Duel& d : race_result.duels) {
      auto name = [&](long j) { return entries[racing[size_t(j)]].result.backend + " " + entries[racing[size_t(j)]].result.id; };
      char ratio[32];
      std::snprintf(ratio, sizeof ratio, "%.4f", d.ratio);
      r.notes.push_back("duel: " + name(d.champion) + " (champion) vs " + name(d.challenger) + ": paired time ratio " +
                        ratio + " -> " + (d.challenger_won ? "challenger" : "champion"));
    }
  }

  if (hooks.stage) hooks.stage("store");
  auto win = std::find_if(entries.begin(), entries.end(), [](const Entry<Op>& e) { return e.result.winner; });
  for (auto& e : entries) r.results.push_back(e.result);
  for (auto& h : held) r.results.push_back(std::move(h));
  r.rank();
  if (win == entries.end()) {
    if (out) *out = r;
    throw_no_winner(p.str(), r.results);
  }
  log("  winner: " + win->result.backend + " " + win->result.name + " " + std::to_string(win->result.median_us) + " us");
  if (cache) cache->store(key, state<Op>().env, r);
  if (cache && remote) remote->publish(*cache, key, state<Op>().env);
  KernelFor<Op> k(p, win->cand);
  if (hooks.keep_winner) state<Op>().memo[key + OpTraits<Op>::memo_suffix(p)] = win->cand;
  if (out) *out = std::move(r);
  return k;
}

namespace detail {
// A tune without a correct candidate returns its report (no winner) rather than the Error:
// the caller names it with every candidate's reason.
template <class Op>
TuneReport EngineAccess::tune_op(Engine& e, const typename Op::Problem& p, const TuneHooks& hooks) {
  Engine::Impl& I = *e.impl_;
  p.validate();
  TuneReport r;
  try {
    I.template tune_here<Op>(p, I.template key_of<Op>(p), &r, hooks);
  } catch (const Error&) {
    if (r.results.empty() || r.winner()) throw;
  }
  return r;
}
TuneReport EngineAccess::tune_here(Engine& e, const GemmProblem& p, const TuneHooks& hooks) {
  return tune_op<GemmOp>(e, p, hooks);
}
TuneReport EngineAccess::tune_here(Engine& e, const SoftmaxProblem& p, const TuneHooks& hooks) {
  return tune_op<SoftmaxOp>(e, p, hooks);
}
TuneReport EngineAccess::tune_here(Engine& e, const GroupedGemmProblem& p, const TuneHooks& hooks) {
  return tune_op<GroupedOp>(e, p, hooks);
}
}  // namespace detail

}  // namespace gemmtune
