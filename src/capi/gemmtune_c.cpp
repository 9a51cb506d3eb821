// The C API: opaque handles over Engine and Kernel; every C++ exception stops here and becomes
// a status code plus a thread-local message (gt_last_error).
#include "gemmtune/gemmtune_c.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <nlohmann/json.hpp>
#include <string>

#include "core/cuda.hpp"
#include "core/problem_json.hpp"
#include "gemmtune/engine.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/kernel.hpp"
#include "gemmtune/grouped.hpp"
#include "gemmtune/softmax.hpp"
#include "gemmtune/tuning_cache.hpp"

using gemmtune::GemmProblem;

namespace {

// The engine and the lock that serializes calls on it; shared by the engine handle and every
// kernel it produced, so kernels may outlive gt_engine_destroy.
struct EngineState {
  explicit EngineState(gemmtune::EngineOptions o) : engine(std::move(o)) {}
  gemmtune::Engine engine;
  std::mutex mutex;
};

thread_local std::string g_last_error;

int fail(int code, std::string message) {
  try {
    g_last_error = std::move(message);
  } catch (...) {
    // Out of memory while recording the error: keep whatever text was there.
  }
  return code;
}

// The GT_ERR_* status of an Error's code.
int status_of(gemmtune::ErrorCode code) {
  switch (code) {
    case gemmtune::ErrorCode::invalid: return GT_ERR_INVALID;
    case gemmtune::ErrorCode::no_device: return GT_ERR_NO_DEVICE;
    case gemmtune::ErrorCode::runtime: return GT_ERR_RUNTIME;
    case gemmtune::ErrorCode::internal: return GT_ERR_INTERNAL;
  }
  return GT_ERR_INTERNAL;
}

// Runs f; a gemmtune::Error becomes the status of its code (status_of), anything else
// GT_ERR_INTERNAL. Messages about bad input are the bare message (it names the field); others
// keep the source location.
template <class F>
int call(F&& f) noexcept {
  try {
    f();
    return GT_OK;
  } catch (const gemmtune::Error& e) {
    return fail(status_of(e.code()), e.code() == gemmtune::ErrorCode::invalid ? e.message() : std::string(e.what()));
  } catch (const std::bad_alloc&) {
    return fail(GT_ERR_INTERNAL, "out of host memory");
  } catch (const std::exception& e) {
    return fail(GT_ERR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(GT_ERR_INTERNAL, "internal error: unknown exception");
  }
}

// A malloc'd copy (for gt_free); throws bad_alloc.
char* dup(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (!p) throw std::bad_alloc();
  std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

// A cache hit's report gets the candidates' results of the tune that made it (the caller holds
// the engine's lock): the CLI's and the report's tables, gemmtune.torch's _cheaper_launch.
template <class Problem>
void fill_cached_results(gemmtune::Engine& e, const Problem& p, gemmtune::TuneReport& report) {
  if (report.key.empty()) report.key = e.cache_key(p);
  if (report.from_cache && report.results.empty() && e.cache()) report.results = e.cache()->results(report.key);
}

}  // namespace

struct gt_engine {
  std::shared_ptr<EngineState> state;
};

struct gt_kernel {
  std::shared_ptr<EngineState> state;
  gemmtune::Kernel kernel;
};

struct gt_softmax_kernel {
  std::shared_ptr<EngineState> state;
  gemmtune::SoftmaxKernel kernel;
};

struct gt_grouped_kernel {
  std::shared_ptr<EngineState> state;
  gemmtune::GroupedKernel kernel;
};

extern "C" {

GT_API const char* gt_last_error(void) { return g_last_error.c_str(); }

GT_API const char* gt_version(void) { return gemmtune::version(); }

GT_API void gt_free(void* p) { std::free(p); }

GT_API int gt_engine_create(const char* options_json, gt_engine** out) {
  if (!out) return fail(GT_ERR_ARGUMENT, "gt_engine_create: out is NULL");
  *out = nullptr;
  gemmtune::EngineOptions options;
  if (int st = call([&] { options = gemmtune::engine_options_from_json(options_json ? options_json : ""); }))
    return st;
  std::string why;
  bool present = false;
  if (int st = call([&] { present = gemmtune::cuda_device_present(&why); })) return st;
  if (!present) return fail(GT_ERR_NO_DEVICE, "no CUDA device (" + why + ")");
  return call([&] {
    auto handle = std::make_unique<gt_engine>();
    handle->state = std::make_shared<EngineState>(std::move(options));
    *out = handle.release();
  });
}

GT_API int gt_engine_destroy(gt_engine* engine) {
  return call([&] { delete engine; });
}

GT_API int gt_engine_info(gt_engine* engine, char** out) {
  if (!out) return fail(GT_ERR_ARGUMENT, "gt_engine_info: json is NULL");
  *out = nullptr;
  if (!engine) return fail(GT_ERR_ARGUMENT, "gt_engine_info: engine is NULL");
  return call([&] {
    using nlohmann::json;
    EngineState& s = *engine->state;
    std::lock_guard lock(s.mutex);
    const gemmtune::DeviceInfo& d = s.engine.device();
    json backends = json::array();
    for (const gemmtune::BackendStatus& b : s.engine.backends())
      backends.push_back(json{{"name", (b.op == "gemm" ? "" : b.op + "/") + b.name},
                              {"status", b.available ? "available (" + b.version + ")" : "not available: " + b.reason},
                              {"op", b.op},
                              {"available", b.available},
                              {"version", b.version},
                              {"reason", b.reason}});
    gemmtune::TuningCache* cache = s.engine.cache();
    json j{{"version", gemmtune::version()},
           {"device",
            {{"index", d.index},
             {"name", d.name},
             {"sm_count", d.sm_count},
             {"cc", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
             {"driver_version", d.driver_version},
             {"runtime_version", d.runtime_version},
             {"l2_bytes", d.l2_bytes},
             {"global_mem_bytes", d.global_mem_bytes},
             {"str", d.str()}}},
           {"environment", s.engine.environment()},
           {"backends", std::move(backends)},
           {"cache_path", cache ? json(cache->path().string()) : json(nullptr)}};
    *out = dup(j.dump(-1, ' ', false, json::error_handler_t::replace));
  });
}

GT_API int gt_select(gt_engine* engine, const char* problem_json, int force_tune, gt_kernel** out,
                     char** report_json) {
  if (report_json) *report_json = nullptr;
  if (!out) return fail(GT_ERR_ARGUMENT, "gt_select: out is NULL");
  *out = nullptr;
  if (!engine) return fail(GT_ERR_ARGUMENT, "gt_select: engine is NULL");
  if (!problem_json) return fail(GT_ERR_ARGUMENT, "gt_select: problem_json is NULL");
  GemmProblem p;
  if (int st = call([&] { p = gemmtune::problem_from_json(problem_json); })) return st;
  return call([&] {
    auto handle = std::make_unique<gt_kernel>();
    handle->state = engine->state;
    gemmtune::TuneReport report;
    {
      std::lock_guard lock(engine->state->mutex);
      gemmtune::Engine& e = engine->state->engine;
      handle->kernel = force_tune ? e.tune(p, report_json ? &report : nullptr) : e.select(p, report_json ? &report : nullptr);
      if (report_json) fill_cached_results(e, p, report);
    }
    char* text = report_json ? dup(gemmtune::report_to_json(report)) : nullptr;
    *out = handle.release();
    if (report_json) *report_json = text;
  });
}

GT_API int gt_load(gt_engine* engine, const char* problem_json, const char* backend, const char* id, gt_kernel** out) {
  if (!out) return fail(GT_ERR_ARGUMENT, "gt_load: out is NULL");
  *out = nullptr;
  if (!engine) return fail(GT_ERR_ARGUMENT, "gt_load: engine is NULL");
  if (!problem_json) return fail(GT_ERR_ARGUMENT, "gt_load: problem_json is NULL");
  if (!backend) return fail(GT_ERR_ARGUMENT, "gt_load: backend is NULL");
  if (!id) return fail(GT_ERR_ARGUMENT, "gt_load: id is NULL");
  GemmProblem p;
  if (int st = call([&] { p = gemmtune::problem_from_json(problem_json); })) return st;
  return call([&] {
    auto handle = std::make_unique<gt_kernel>();
    handle->state = engine->state;
    {
      std::lock_guard lock(engine->state->mutex);
      handle->kernel = engine->state->engine.load(p, backend, id);
    }
    *out = handle.release();
  });
}

GT_API int gt_kernel_run_ex(gt_kernel* kernel, const void* a, const void* b, const void* c, void* d, const void* bias,
                            const float* scale_a, const float* scale_b, void* stream, int flags) {
  if (!kernel) return fail(GT_ERR_ARGUMENT, "gt_kernel_run: kernel is NULL");
  if (flags & ~GT_RUN_OVERLAP_PREVIOUS)
    return fail(GT_ERR_ARGUMENT, "gt_kernel_run_ex: flags = " + std::to_string(flags) + " has unknown bits");
  return call([&] {
    gemmtune::GemmArgs args;
    args.a = a, args.b = b, args.c = c, args.d = d, args.bias = bias, args.scale_a = scale_a, args.scale_b = scale_b;
    gemmtune::RunOptions opt;
    opt.overlap_previous = (flags & GT_RUN_OVERLAP_PREVIOUS) != 0;
    kernel->kernel.run(args, static_cast<cudaStream_t>(stream), opt);
  });
}

GT_API int gt_kernel_run(gt_kernel* kernel, const void* a, const void* b, const void* c, void* d, const void* bias,
                         const float* scale_a, const float* scale_b, void* stream) {
  return gt_kernel_run_ex(kernel, a, b, c, d, bias, scale_a, scale_b, stream, 0);
}

GT_API int gt_kernel_run_abd(gt_kernel* kernel, const void* a, const void* b, void* d, const void* bias, void* stream) {
  return gt_kernel_run_ex(kernel, a, b, nullptr, d, bias, nullptr, nullptr, stream, 0);
}

GT_API int gt_kernel_destroy(gt_kernel* kernel) {
  return call([&] { delete kernel; });
}

GT_API int gt_kernel_describe(gt_kernel* kernel, char** out) {
  if (!out) return fail(GT_ERR_ARGUMENT, "gt_kernel_describe: json is NULL");
  *out = nullptr;
  if (!kernel) return fail(GT_ERR_ARGUMENT, "gt_kernel_describe: kernel is NULL");
  return call([&] {
    auto j = nlohmann::json::parse(gemmtune::kernel_to_json(kernel->kernel));
    gemmtune::TorchStanding s;
    {
      std::lock_guard lock(kernel->state->mutex);
      j["cache_key"] = kernel->state->engine.cache_key(kernel->kernel.problem());
      s = kernel->state->engine.versus_torch(kernel->kernel);
    }
    // gemmtune.torch calls torch's op instead of a kernel that is torch's own call, or (its
    // margin) one that beat it by little in the tune (docs/python.md).
    auto us = [](double v) { return v > 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
    j["torch_baseline"] = s.is_torch;
    j["median_us"] = us(s.median_us);
    j["torch_baseline_us"] = us(s.torch_us);
    *out = dup(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  });
}

GT_API int gt_softmax_select(gt_engine* engine, const char* problem_json, int force_tune, gt_softmax_kernel** out,
                             char** report_json) {
  if (report_json) *report_json = nullptr;
  if (!out) return fail(GT_ERR_ARGUMENT, "gt_softmax_select: out is NULL");
  *out = nullptr;
  if (!engine) return fail(GT_ERR_ARGUMENT, "gt_softmax_select: engine is NULL");
  if (!problem_json) return fail(GT_ERR_ARGUMENT, "gt_softmax_select: problem_json is NULL");
  gemmtune::SoftmaxProblem p;
  if (int st = call([&] { p = gemmtune::softmax_problem_from_json(problem_json); })) return st;
  return call([&] {
    auto handle = std::make_unique<gt_softmax_kernel>();
    handle->state = engine->state;
    gemmtune::TuneReport report;
    {
      std::lock_guard lock(engine->state->mutex);
      gemmtune::Engine& e = engine->state->engine;
      handle->kernel = force_tune ? e.tune(p, &report) : e.select(p, &report);
      fill_cached_results(e, p, report);
    }
    char* text = report_json ? dup(gemmtune::report_to_json(report)) : nullptr;
    *out = handle.release();
    if (report_json) *report_json = text;
  });
}

GT_API int gt_softmax_run(gt_softmax_kernel* kernel, const void* x, void* y, void* stream) {
  if (!kernel) return fail(GT_ERR_ARGUMENT, "gt_softmax_run: kernel is NULL");
  return call([&] { kernel->kernel.run({x, y}, static_cast<cudaStream_t>(stream)); });
}

GT_API int gt_softmax_destroy(gt_softmax_kernel* kernel) {
  return call([&] { delete kernel; });
}

GT_API int gt_softmax_describe(gt_softmax_kernel* kernel, char** out) {
  if (!out) return fail(GT_ERR_ARGUMENT, "gt_softmax_describe: json is NULL");
  *out = nullptr;
  if (!kernel) return fail(GT_ERR_ARGUMENT, "gt_softmax_describe: kernel is NULL");
  return call([&] {
    const auto& k = kernel->kernel;
    nlohmann::json j{{"backend", k.backend()}, {"id", k.id()}, {"name", k.name()}, {"problem", k.problem().str()},
                     {"cache_key", kernel->state->engine.cache_key(k.problem())}};
    *out = dup(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  });
}

GT_API int gt_grouped_select(gt_engine* engine, const char* problem_json, int force_tune, gt_grouped_kernel** out,
                             char** report_json) {
  if (report_json) *report_json = nullptr;
  if (!out) return fail(GT_ERR_ARGUMENT, "gt_grouped_select: out is NULL");
  *out = nullptr;
  if (!engine) return fail(GT_ERR_ARGUMENT, "gt_grouped_select: engine is NULL");
  if (!problem_json) return fail(GT_ERR_ARGUMENT, "gt_grouped_select: problem_json is NULL");
  gemmtune::GroupedGemmProblem p;
  if (int st = call([&] { p = gemmtune::grouped_problem_from_json(problem_json); })) return st;
  return call([&] {
    auto handle = std::make_unique<gt_grouped_kernel>();
    handle->state = engine->state;
    gemmtune::TuneReport report;
    {
      std::lock_guard lock(engine->state->mutex);
      gemmtune::Engine& e = engine->state->engine;
      handle->kernel = force_tune ? e.tune(p, &report) : e.select(p, &report);
      fill_cached_results(e, p, report);
    }
    char* text = report_json ? dup(gemmtune::report_to_json(report)) : nullptr;
    *out = handle.release();
    if (report_json) *report_json = text;
  });
}

GT_API int gt_grouped_run(gt_grouped_kernel* kernel, const void* a, const void* b, void* d, const int32_t* rows,
                          int64_t capacity, const void* bias, const float* scale_a, const float* scale_b, void* stream) {
  if (!kernel) return fail(GT_ERR_ARGUMENT, "gt_grouped_run: kernel is NULL");
  return call([&] {
    gemmtune::GroupedGemmArgs args;
    args.a = a, args.b = b, args.d = d, args.rows = rows, args.capacity = capacity, args.bias = bias;
    args.scale_a = scale_a, args.scale_b = scale_b;
    kernel->kernel.run(args, static_cast<cudaStream_t>(stream));
  });
}

GT_API int gt_grouped_destroy(gt_grouped_kernel* kernel) {
  return call([&] { delete kernel; });
}

GT_API int gt_grouped_describe(gt_grouped_kernel* kernel, char** out) {
  if (!out) return fail(GT_ERR_ARGUMENT, "gt_grouped_describe: json is NULL");
  *out = nullptr;
  if (!kernel) return fail(GT_ERR_ARGUMENT, "gt_grouped_describe: kernel is NULL");
  return call([&] {
    const auto& k = kernel->kernel;
    nlohmann::json j{{"backend", k.backend()}, {"id", k.id()}, {"name", k.name()}, {"problem", k.problem().str()},
                     {"cache_key", kernel->state->engine.cache_key(k.problem())}};
    *out = dup(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  });
}

}  // extern "C"
