// precompile (include/gemmtune/precompile.hpp): the tune path's first two steps (candidates,
// then the artifact stage) without a device, for every backend and op.
#include "gemmtune/precompile.hpp"

#include <map>
#include <mutex>

#include "compile/artifact_cache.hpp"
#include "core/problem_json.hpp"
#include "engine/registry.hpp"

namespace gemmtune {
namespace {

struct Pending {
  compile::Job job;
  PrecompileItem item;
};

// Items and jobs of every candidate of Op's problems: a skipped item per unavailable backend and
// per problem a backend does not support; the rest are jobs (their items filled in later).
template <class Op>
void gather(const std::vector<typename Op::Problem>& problems, const std::vector<std::string>& ids,
            std::vector<std::unique_ptr<BackendFor<Op>>>& backends, std::vector<PrecompileItem>& done,
            std::vector<Pending>& todo) {
  for (auto& b : backends) {
    PrecompileItem base;
    base.op = Op::name, base.backend = b->name();
    if (Verdict v = b->available(); !v) {
      PrecompileItem it = base;
      it.error = "not available: " + v.reason, it.skipped = true;
      done.push_back(std::move(it));
      continue;
    }
    for (const auto& p : problems) {
      PrecompileItem at = base;
      at.problem = p.str();
      std::vector<std::unique_ptr<detail::CandidateFor<Op>>> cands;
      try {
        p.validate();
        if (Verdict v = b->supports(p); !v) {
          at.error = "does not support: " + v.reason, at.skipped = true;
          done.push_back(std::move(at));
          continue;
        }
        if (ids.empty()) {
          cands = b->candidates(p);
        } else {
          for (const std::string& id : ids) {
            try {
              cands.push_back(b->load(p, id));
            } catch (const Error& e) {
              PrecompileItem it = at;
              it.candidate = id, it.error = e.message();
              done.push_back(std::move(it));
            }
          }
        }
      } catch (const Error& e) {
        at.error = "no candidates: " + e.message();
        done.push_back(std::move(at));
        continue;
      }
      for (auto& c : cands)
        for (compile::Job& j : c->jobs()) {
          PrecompileItem it = at;
          it.candidate = c->id(), it.what = j.toolchain + " " + j.what;
          todo.push_back({std::move(j), std::move(it)});
        }
    }
  }
}

}  // namespace

void add_problem_json(PrecompileRequest& request, const std::string& line) {
  if (line.find("\"groups\"") != std::string::npos) request.grouped.push_back(grouped_problem_from_json(line));
  else if (line.find("\"rows\"") != std::string::npos) request.softmax.push_back(softmax_problem_from_json(line));
  else request.gemm.push_back(problem_from_json(line));
}

std::vector<PrecompileItem> precompile(const PrecompileRequest& request, const EngineOptions& options,
                                       const DeviceInfo& target,
                                       const std::function<void(const PrecompileItem&)>& progress) {
  const EngineSetup setup(options);
  compile::ArtifactCache& artifacts = *setup.artifacts;
  BackendContext ctx = setup.context(target);
  ctx.compile_budget = request.compile_budget;
  auto gemm = make_backends<GemmOp>(setup.opt.backends, ctx, true);
  auto softmax = make_backends<SoftmaxOp>(setup.opt.backends, ctx, true);
  auto grouped = make_backends<GroupedOp>(setup.opt.backends, ctx, true);

  std::vector<PrecompileItem> done;
  std::vector<Pending> todo;
  if (!request.gemm.empty()) gather<GemmOp>(request.gemm, request.candidates, gemm, done, todo);
  if (!request.softmax.empty()) gather<SoftmaxOp>(request.softmax, request.candidates, softmax, done, todo);
  if (!request.grouped.empty()) gather<GroupedOp>(request.grouped, request.candidates, grouped, done, todo);
  if (progress)
    for (const PrecompileItem& it : done) progress(it);

  // Distinct artifacts once: one item per key, for the first problem that needed it.
  std::vector<compile::Job> jobs;
  std::vector<size_t> owner;  // todo index of each job
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < todo.size(); ++i) {
    std::string key;
    try {
      key = artifacts.key(todo[i].job);
    } catch (const Error& e) {
      todo[i].item.error = e.message();
      if (progress) progress(todo[i].item);
      done.push_back(todo[i].item);
      continue;
    }
    if (!seen.emplace(key, i).second) continue;
    todo[i].item.key = key;
    jobs.push_back(todo[i].job);
    owner.push_back(i);
  }
  artifacts.build_all(jobs, [&](size_t j, const compile::ArtifactCache::Outcome& r) {
    PrecompileItem& it = todo[owner[j]].item;
    if (r.built) it.store_hit = r.built->hit, it.seconds = r.built->seconds, it.cpu_seconds = r.built->cpu_seconds;
    else it.error = r.error;
    if (progress) progress(it);
  });
  for (size_t j = 0; j < jobs.size(); ++j) done.push_back(todo[owner[j]].item);
  return done;
}

}  // namespace gemmtune
