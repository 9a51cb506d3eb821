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

fs::path ArtifactCache::build_parent(Toolchain& t) {
  const fs::path parent = store_.root() / t.name() / "tmp";
  try {
    securefs::make_private_dirs(parent);
  } catch (const Error&) {  // TempDir throws Error saying so
  }
  return parent;
}

Built ArtifactCache::publish(Toolchain& t, const Job& job, const std::string& key, Output out, double wall) {
  for (Output::Extra& e : out.extras)
    if (!store_.get(e.key)) store_.put(e.key, std::move(e.bytes), std::move(e.meta));
  GT_CHECK(!out.bytes.empty(), t.name() + ": " + job.what + ": the compiler produced no artifact");
  const double seconds = out.seconds > 0 ? out.seconds : wall;
  const double cpu = out.cpu_seconds;
  store_.put(key, std::move(out.bytes), std::move(out.meta));
  auto b = find_key(t, key);
  GT_CHECK(b, t.name() + ": " + job.what + ": the artifact just published cannot be read back");
  b->hit = false;
  b->seconds = seconds;
  b->cpu_seconds = cpu;
  log_.debug(t.name() + ": built " + job.what + " in " + std::to_string(b->seconds).substr(0, 5) + " s");
  return std::move(*b);
}

Built ArtifactCache::compile_miss(Toolchain& t, const Job& job, const std::string& key) {
  // Another thread's flight for this key may have published it after this one missed the store.
  std::string missing_dep;
  if (auto b = find_key(t, key, &missing_dep)) return std::move(*b);
  TempDir tmp(build_parent(t), key.substr(0, 16) + "-", t.name(), opt_.keep_build);
  const auto t0 = std::chrono::steady_clock::now();
  Output out = t.compile(job, tmp.path(), opt_.timeout_s);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return publish(t, job, key, std::move(out), wall);
}

std::vector<ArtifactCache::Outcome> ArtifactCache::build_group(Toolchain& t, const std::vector<Job>& jobs) {
  std::vector<std::string> keys;
  for (const Job& j : jobs) keys.push_back(key(j));
  using Result = SingleFlight<Built>::Result;
  auto results = flights_.run_group(keys, [&](const std::vector<size_t>& owned, std::vector<Result>& res) {
    std::vector<size_t> miss;
    for (size_t i : owned) {  // another process may have published it since build_all looked
      std::string missing_dep;
      if (auto b = find_key(t, keys[i], &missing_dep))
        res[i].value = std::move(*b);
      else
        miss.push_back(i);
    }
    auto alone = [&](size_t i) {
      try {
        res[i].value = compile_miss(t, jobs[i], keys[i]);
      } catch (const Error& e) {
        res[i].error = e.message();
      }
    };
    if (miss.size() < 2) {
      for (size_t i : miss) alone(i);
      return;
    }
    std::vector<Job> group;
    for (size_t i : miss) group.push_back(jobs[i]);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<Output> outs;
    try {
      TempDir tmp(build_parent(t), keys[miss[0]].substr(0, 16) + "-group-", t.name(), opt_.keep_build);
      outs = t.compile_group(group, tmp.path(), opt_.timeout_s);
      GT_CHECK(outs.size() == group.size(), t.name() + ": a group of " + std::to_string(group.size()) + " gave " +
                                                std::to_string(outs.size()) + " artifacts");
    } catch (const Error& e) {
      log_.warn(t.name() + ": a group of " + std::to_string(group.size()) + " failed; compiling each alone (" +
                e.message() + ")");
      for (size_t i : miss) alone(i);
      return;
    }
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (size_t j = 0; j < miss.size(); ++j) {
      try {
        res[miss[j]].value = publish(t, group[j], keys[miss[j]], std::move(outs[j]), wall / double(miss.size()));
      } catch (const Error& e) {
        res[miss[j]].error = e.message();
      }
    }
  });
  std::vector<Outcome> out(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (results[i].value)
      out[i].built = std::move(*results[i].value);
    else
      out[i].error = results[i].error;
  }
  return out;
}

std::vector<ArtifactCache::Outcome> ArtifactCache::build_all(const std::vector<Job>& jobs,
                                                              const std::function<void(size_t, const Outcome&)>& progress) {
  std::vector<Outcome> out(jobs.size());
  // Distinct keys: the index of each job's first occurrence.
  std::vector<size_t> first(jobs.size());
  std::vector<size_t> todo, missed;  // store hits (and load-only jobs), misses
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
    std::error_code ec;
    if (!fs::exists(store_.json_path(k), ec) && !state(jobs[i].toolchain).load_only) {
      ++misses[jobs[i].toolchain];
      missed.push_back(i);
    } else {
      todo.push_back(i);
    }
  }
  // Per toolchain with misses: the size of the groups they compile in (1: each alone), decided
  // once: a toolchain that builds groups and has more misses than compile slots gets groups of at
  // most its limit, at least one a slot.
  std::map<std::string, size_t> group_size;
  for (auto& [name, n] : misses) {
    Toolchain& t = *slot(name).toolchain;
    t.warm(n);
    const size_t slots = std::max<size_t>(1, t.slots());
    group_size[name] = n > slots ? std::min(t.group_limit(), (n + slots - 1) / slots) : 1;
  }

  // Units of work: the groups (first: they take longest), then single jobs.
  std::vector<std::vector<size_t>> units;
  std::map<std::string, std::vector<size_t>> groupable;  // toolchain -> its misses
  for (size_t i : missed) {
    if (group_size[jobs[i].toolchain] > 1)
      groupable[jobs[i].toolchain].push_back(i);
    else
      todo.push_back(i);
  }
  for (auto& [name, idx] : groupable) {
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return jobs[a].family < jobs[b].family; });
    const size_t size = group_size[name];
    for (size_t at = 0; at < idx.size(); at += size)
      units.emplace_back(idx.begin() + at, idx.begin() + std::min(idx.size(), at + size));
  }
  for (size_t i : todo) units.push_back({i});

  std::mutex progress_mu;
  std::exception_ptr unexpected;
  parallel_for(units.size(), std::min<size_t>(units.size(), 64), [&](size_t u) {
    const std::vector<size_t>& unit = units[u];
    try {
      if (unit.size() == 1) {
        try {
          out[unit[0]].built = build(jobs[unit[0]]);
        } catch (const Error& e) {
          out[unit[0]].error = e.message();
        }
      } else {
        std::vector<Job> group;
        for (size_t i : unit) group.push_back(jobs[i]);
        std::vector<Outcome> built = build_group(*slot(group[0].toolchain).toolchain, group);
        for (size_t j = 0; j < unit.size(); ++j) out[unit[j]] = std::move(built[j]);
      }
    } catch (...) {  // not a compile failure: the caller's to see
      std::lock_guard<std::mutex> lock(progress_mu);
      if (!unexpected) unexpected = std::current_exception();
      return;
    }
    if (progress) {
      std::lock_guard<std::mutex> lock(progress_mu);
      for (size_t i : unit) {
        try {  // a pool thread must not throw: the caller's exception is rethrown below
          progress(i, out[i]);
        } catch (...) {
          if (!unexpected) unexpected = std::current_exception();
        }
      }
    }
  });
  if (unexpected) std::rethrow_exception(unexpected);
  for (size_t i = 0; i < jobs.size(); ++i)
    if (first[i] != i) out[i] = out[first[i]];
  return out;
}

}  // namespace gemmtune::compile
