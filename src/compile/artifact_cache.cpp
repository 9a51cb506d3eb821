// The artifact cache (artifact_cache.hpp).
#include "compile/artifact_cache.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <set>

#include "compile/compile_util.hpp"
#include "core/parallel.hpp"
#include "gemmtune/error.hpp"
#include "store/secure_fs.hpp"

namespace gemmtune::compile {
namespace fs = std::filesystem;
using nlohmann::json;

ArtifactCache::ArtifactCache(CompileOptions options, std::vector<std::unique_ptr<Toolchain>> toolchains, Log log)
    : opt_(std::move(options)), log_(std::move(log)), store_(opt_.artifacts, log_.warnings(), size_t(256) << 20, opt_.store_key) {
  for (auto& t : toolchains) {
    const std::string name = t->name();
    slots_[name].toolchain = std::move(t);
  }
}

ArtifactCache::~ArtifactCache() {
  for (auto& [name, s] : slots_)
    if (s.state.valid()) s.state.wait();
}

ArtifactCache::Slot& ArtifactCache::slot(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slots_.find(name);
  GT_CHECK(it != slots_.end(), "compile: no toolchain '" + name + "'");
  Slot& s = it->second;
  if (!s.state.valid()) {  // first use: probe on this thread
    Toolchain* t = s.toolchain.get();
    s.state = std::async(std::launch::deferred, [this, t] { return probe(*t); }).share();
  }
  return s;
}

void ArtifactCache::start_probes() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [name, s] : slots_) {
    if (s.state.valid()) continue;
    Toolchain* t = s.toolchain.get();
    auto run = [this, t] { return probe(*t); };
    try {
      s.state = std::async(std::launch::async, run).share();
    } catch (const std::system_error&) {  // no thread to spare: probe on first use
      s.state = std::async(std::launch::deferred, run).share();
    }
  }
}

const ArtifactCache::State& ArtifactCache::state(const std::string& name) { return slot(name).state.get(); }

ArtifactCache::State ArtifactCache::probe(Toolchain& t) {
  const fs::path record = store_.root() / t.name() / "toolchain.json";
  std::string why;
  if (std::find(opt_.load_only.begin(), opt_.load_only.end(), t.name()) != opt_.load_only.end()) {
    why = "load-only by request (compile.load_only)";
  } else {
    try {
      Verdict v = t.probe();
      if (v) {
        try {  // the record next to the artifacts it keys, for load-only machines
          const std::string text = t.record().dump(2) + "\n";
          if (slurp(record).value_or("") != text) write_atomically(record, text, t.name());
        } catch (const std::exception& e) {
          log_.warn(t.name() + ": cannot record the toolchain: " + e.what());
        }
        return {Verdict::yes(), false};
      }
      why = v.reason;
    } catch (const Error& e) {
      why = e.message();
    }
  }
  auto text = slurp(record);
  if (!text) return {Verdict::no(why + "; and no precompiled artifacts (" + record.string() + " is absent)"), false};
  try {
    t.restore(json::parse(*text));
  } catch (const std::exception& e) {
    return {Verdict::no(why + "; and " + record.string() + " is unreadable: " + e.what()), false};
  }
  log_.debug(t.name() + ": load-only (" + why + "): artifacts come from " + store_.root().string());
  return {Verdict::yes(), true};
}

Verdict ArtifactCache::available(const std::string& toolchain) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!slots_.count(toolchain)) return Verdict::no("no toolchain '" + toolchain + "' in this build");
  }
  return state(toolchain).verdict;
}

bool ArtifactCache::load_only(const std::string& toolchain) {
  return available(toolchain) && state(toolchain).load_only;
}

std::string ArtifactCache::version(const std::string& toolchain) {
  return available(toolchain) ? slot(toolchain).toolchain->version() : std::string();
}

std::string ArtifactCache::sources_digest(const std::string& toolchain) {
  return available(toolchain) ? slot(toolchain).toolchain->sources_digest() : std::string();
}

std::string ArtifactCache::key(const Job& job) {
  const State& st = state(job.toolchain);
  GT_CHECK(st.verdict, job.toolchain + ": not available: " + st.verdict.reason);
  return ArtifactStore::make_key(slot(job.toolchain).toolchain->key_material(job));
}

bool ArtifactCache::has(const Job& job) {
  if (!available(job.toolchain)) return false;
  const std::string k = key(job);
  std::error_code ec;
  if (!fs::exists(store_.bin_path(k), ec) || !fs::exists(store_.json_path(k), ec)) return false;
  // The deps are named in the metadata: read only that (the bytes are verified on load).
  Artifact meta_only;
  meta_only.key = k;
  try {
    meta_only.meta = json::parse(slurp(store_.json_path(k)).value_or("{}"));
    for (const std::string& d : slot(job.toolchain).toolchain->deps(meta_only))
      if (!fs::exists(store_.bin_path(d), ec) || !fs::exists(store_.json_path(d), ec)) return false;
  } catch (const std::exception&) {  // unreadable metadata or deps: not usable as it is
    return false;
  }
  return true;
}

std::optional<Built> ArtifactCache::find_key(Toolchain& t, const std::string& key, std::string* missing_dep) {
  auto a = store_.get(key);
  if (!a) return std::nullopt;
  Built b;
  for (const std::string& d : t.deps(*a)) {
    auto dep = store_.get(d);
    const std::string why = t.name() + ": the artifact store " + store_.root().string() + " lacks " + d.substr(0, 16) +
                            ", which artifact " + key.substr(0, 16) + " needs";
    if (!dep && missing_dep) {  // a miss: compiling the artifact again publishes its deps again
      *missing_dep = why;
      return std::nullopt;
    }
    GT_CHECK(dep, why);
    b.deps.push_back(std::move(*dep));
  }
  b.artifact = std::move(*a);
  b.hit = true;
  return b;
}

std::optional<Built> ArtifactCache::find(const Job& job) {
  const std::string k = key(job);
  return find_key(*slot(job.toolchain).toolchain, k);
}

Built ArtifactCache::build(const Job& job) {
  const std::string k = key(job);
  Toolchain& t = *slot(job.toolchain).toolchain;
  std::string missing_dep;
  if (auto b = find_key(t, k, &missing_dep)) return std::move(*b);
  if (state(job.toolchain).load_only && !missing_dep.empty()) GT_THROW(missing_dep + " (load-only)");
  if (state(job.toolchain).load_only && store_.untrusted(k))
    GT_THROW(t.name() + ": " + job.what + " is in the artifact store " + store_.root().string() +
             " but not authenticated by this machine's key, so it is not loaded (a kernel pack built elsewhere: "
             "`gemmtune store trust " + store_.root().string() + "` trusts it; docs/kernel-packs.md)");
  if (state(job.toolchain).load_only)
    GT_THROW(t.name() + ": " + job.what + " is not in the artifact store " + store_.root().string() +
             " and this machine cannot compile it (load-only)");
  return flights_.run(k, [&] { return compile_miss(t, job, k); });
}

Built ArtifactCache::compile_miss(Toolchain& t, const Job& job, const std::string& key) {
  // Another thread's flight for this key may have published it after this one missed the store.
  std::string missing_dep;
  if (auto b = find_key(t, key, &missing_dep)) return std::move(*b);
  const fs::path parent = store_.root() / t.name() / "tmp";
  try {
    securefs::make_private_dirs(parent);
  } catch (const Error&) {  // TempDir throws Error saying so
  }
  TempDir tmp(parent, key.substr(0, 16) + "-", t.name(), opt_.keep_build);
  const auto t0 = std::chrono::steady_clock::now();
  Output out = t.compile(job, tmp.path(), opt_.timeout_s);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (Output::Extra& e : out.extras)
    if (!store_.get(e.key)) store_.put(e.key, std::move(e.bytes), std::move(e.meta));
  GT_CHECK(!out.bytes.empty(), t.name() + ": " + job.what + ": the compiler produced no artifact");
  store_.put(key, std::move(out.bytes), std::move(out.meta));
  auto b = find_key(t, key);
  GT_CHECK(b, t.name() + ": " + job.what + ": the artifact just published cannot be read back");
  b->hit = false;
  b->seconds = out.seconds > 0 ? out.seconds : wall;
  b->cpu_seconds = out.cpu_seconds;
  log_.debug(t.name() + ": built " + job.what + " in " + std::to_string(b->seconds).substr(0, 5) + " s");
  return std::move(*b);
}

std::vector<ArtifactCache::Outcome> ArtifactCache::build_all(const std::vector<Job>& jobs,
                                                              const std::function<void(size_t, const Outcome&)>& progress) {
  std::vector<Outcome> out(jobs.size());
  // Distinct keys: the index of each job's first occurrence.
  std::vector<size_t> first(jobs.size());
  std::vector<size_t> todo;
  std::map<std::string, size_t> seen;
  std::map<std::string, size_t> misses;  // per toolchain
  for (size_t i = 0; i < jobs.size(); ++i) {
    first[i] = i;
    std::string k;
    try {
      k = key(jobs[i]);
    } catch (const Error& e) {
      out[i].error = e.message();
      if (progress) progress(i, out[i]);
      continue;
    }
    if (auto it = seen.find(k); it != seen.end()) {
      first[i] = it->second;
      continue;
    }
    seen[k] = i;
    todo.push_back(i);
    std::error_code ec;
    if (!fs::exists(store_.json_path(k), ec) && !state(jobs[i].toolchain).load_only) ++misses[jobs[i].toolchain];
  }
  for (auto& [name, n] : misses) slot(name).toolchain->warm(n);

  std::mutex progress_mu;
  std::exception_ptr unexpected;
  parallel_for(todo.size(), std::min<size_t>(todo.size(), 64), [&](size_t j) {
    const size_t i = todo[j];
    try {
      out[i].built = build(jobs[i]);
    } catch (const Error& e) {
      out[i].error = e.message();
    } catch (...) {  // not a compile failure: the caller's to see
      std::lock_guard<std::mutex> lock(progress_mu);
      if (!unexpected) unexpected = std::current_exception();
      return;
    }
    if (progress) {
      std::lock_guard<std::mutex> lock(progress_mu);
      try {  // a pool thread must not throw: the caller's exception is rethrown below
        progress(i, out[i]);
      } catch (...) {
        if (!unexpected) unexpected = std::current_exception();
      }
    }
  });
  if (unexpected) std::rethrow_exception(unexpected);
  for (size_t i = 0; i < jobs.size(); ++i)
    if (first[i] != i) out[i] = out[first[i]];
  return out;
}

}  // namespace gemmtune::compile
