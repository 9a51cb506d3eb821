// Compile-only test of the CUTLASS kernel template (no GPU needed): generates, builds with nvcc
// (as one group: one translation unit, one shared object each) and loads a bf16, an fp8
// tensorwise, an fp8 block-scaled and a grouped instance end to end through the artifact cache,
// then checks that each .so exports the C entry points, reports the config it was asked for, and
// answers can_implement / workspace for a shape (host-side code only). Prints nvcc's wall time per
// instance.
//
// Exit codes: 0 passed, 1 failed, 77 skipped (no CUTLASS headers or no nvcc): registered with
// SKIP_RETURN_CODE 77. The store is a fresh temp directory (every run really compiles) unless
// $GEMMTUNE_CUTLASS_TEST_ARTIFACTS names one to reuse.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "backends/cutlass/cutlass_backend.hpp"
#include "backends/cutlass/grouped.hpp"
#include "compile/artifact_cache.hpp"
#include "compile/compile_util.hpp"
#include "compile/nvcc.hpp"
#include "compile/python_worker.hpp"
#include "core/settings.hpp"
#include "gemmtune/error.hpp"

using namespace gemmtune;
using namespace gemmtune::cutlass_backend;
namespace fs = std::filesystem;

namespace {

int failures = 0;
void expect(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

void check_instance(const compile::Built& b, const GemmProblem& p, const Config& c) {
  InstanceSpec spec = InstanceSpec::of(c, p);
  std::printf("---- %s\n", spec.text().c_str());
  std::printf("nvcc: %.1f s%s, %zu bytes\n", b.seconds, b.hit ? " (store hit)" : "", b.artifact.bytes->size());
  auto lib = Library::open(b.artifact, spec.text());  // dlsym of every entry point, ABI, config text
  expect(lib->config() == spec.text(), "gt_cutlass_config is the instance's text");

  GtCutlassArgs a{};
  a.abi_version = GT_CUTLASS_ABI_VERSION;
  a.swizzle = 1;
  a.sm_count = 132;
  a.m = p.m, a.n = p.n, a.k = p.k;
  a.lda = p.lda(), a.ldb = p.ldb(), a.ldc = p.ldd(), a.ldd = p.ldd();
  a.alpha = 1, a.beta = 0;
  expect(lib->can_implement(&a) == GT_CUTLASS_OK, std::string("can_implement(") + p.str() + "): " + lib->status_text(lib->can_implement(&a)));
  expect(lib->workspace(&a) < (size_t(1) << 30), "workspace size is sane: " + std::to_string(lib->workspace(&a)));
  GtCutlassArgs bad = a;
  bad.lda = p.lda() + 1;  // breaks TMA's 16-byte rule
  expect(lib->can_implement(&bad) == GT_CUTLASS_MISALIGNED, "a misaligned lda is refused");
  bad = a;
  bad.abi_version = 999;
  expect(lib->can_implement(&bad) == GT_CUTLASS_BAD_ABI, "a foreign ABI version is refused");
  bad = a;
  bad.raster = 1, bad.swizzle = 3;
  expect(lib->can_implement(&bad) == GT_CUTLASS_BAD_ARGS, "a swizzle other than 1, 2, 4, 8 is refused");
  bad = a;
  bad.raster = 2, bad.swizzle = 8;
  expect(lib->can_implement(&bad) == GT_CUTLASS_OK, "tiles in bands of 8 along N: the same instance");
  bad = a;
  bad.flags = GT_CUTLASS_OVERLAP_PREVIOUS;
  expect(lib->can_implement(&bad) == GT_CUTLASS_OK, "a programmatic dependent launch: the same instance");
  bad.flags = 2;
  expect(lib->can_implement(&bad) == GT_CUTLASS_BAD_ARGS, "an unknown flag is refused");
  if (p.scale == ScaleMode::block) {
    // A's block scales come by TMA from b * m: m must be a multiple of 4, scale_a 16-byte aligned.
    bad = a;
    bad.m = p.m + 2;
    expect(lib->can_implement(&bad) == GT_CUTLASS_MISALIGNED, "block scales: m % 4 != 0 is refused");
    bad = a;
    bad.scale_a = reinterpret_cast<const float*>(uintptr_t(0x1004));
    expect(lib->can_implement(&bad) == GT_CUTLASS_MISALIGNED, "block scales: a misaligned scale_a is refused");
  }
  GtCutlassArgs norun = a;  // null pointers: run() refuses before touching CUDA
  expect(lib->run(&norun, nullptr, nullptr) == GT_CUTLASS_BAD_ARGS, "run() with null pointers is refused");
}

// A grouped instance (sm90_grouped.cuh): the grouped fields of the ABI, host side only.
void check_grouped(const compile::Built& b, const GroupedGemmProblem& p, const Config& c) {
  const GroupedInstanceSpec spec = GroupedInstanceSpec::of(c, p);
  std::printf("---- %s\n", spec.text().c_str());
  auto lib = Library::open(b.artifact, spec.text());
  expect(lib->config() == spec.text(), "gt_cutlass_config is the grouped instance's text");
  GtCutlassArgs a{};
  a.abi_version = GT_CUTLASS_ABI_VERSION;
  a.swizzle = 1;
  a.sm_count = 132;
  a.groups = int32_t(p.groups);
  a.m = p.rows_per_group * p.groups, a.n = p.n, a.k = p.k;  // m: the capacity
  a.lda = p.k, a.ldb = p.k, a.ldc = p.n, a.ldd = p.n;
  a.alpha = 1;
  expect(lib->can_implement(&a) == GT_CUTLASS_OK, std::string("can_implement(") + p.str() + "): " + lib->status_text(lib->can_implement(&a)));
  const size_t ws = lib->workspace(&a);
  expect(ws > 0 && ws < (size_t(1) << 30), "workspace holds the per-group arrays: " + std::to_string(ws));
  GtCutlassArgs bad = a;
  bad.groups = 0;
  expect(lib->can_implement(&bad) == GT_CUTLASS_BAD_ARGS, "no groups is refused");
  bad = a;
  bad.lda = p.k + 8;  // not packed
  expect(lib->can_implement(&bad) == GT_CUTLASS_BAD_ARGS, "a padded A is refused");
  bad = a;
  bad.n = p.n + 4, bad.ldd = bad.n;  // D's rows off 16 bytes
  expect(lib->can_implement(&bad) == GT_CUTLASS_MISALIGNED, "n % 8 != 0 is refused");
  bad = a;
  bad.raster = 2, bad.swizzle = 8;
  expect(lib->can_implement(&bad) == GT_CUTLASS_OK, "tiles in bands of 8 along N: the same instance");
  bad.raster = 0, bad.swizzle = 2;
  expect(lib->can_implement(&bad) == GT_CUTLASS_BAD_ARGS, "bands with the default order are refused");
  bad = a;
  bad.flags = GT_CUTLASS_OVERLAP_PREVIOUS;
  expect(lib->can_implement(&bad) == GT_CUTLASS_BAD_ARGS, "grouped instances take no overlapped launch");
  expect(lib->run(&a, nullptr, nullptr) == GT_CUTLASS_BAD_ARGS, "run() without a workspace is refused");
}

// The toolchain record the cache wrote next to the artifacts.
std::string slurp_record(const fs::path& root) {
  auto text = slurp(root / "cutlass" / "toolchain.json");
  GT_CHECK(text, "no toolchain record in " + root.string());
  return *text;
}

}  // namespace

int main() {
  fs::path root;
  bool temp = false;
  if (const char* d = std::getenv("GEMMTUNE_CUTLASS_TEST_ARTIFACTS"); d && *d) {
    root = d;
  } else {
    root = fs::temp_directory_path() / ("gemmtune-cutlass-compile-" + std::to_string(getpid()));
    temp = true;
  }
  const Log log([](const std::string& l) { std::printf("%s\n", l.c_str()); }, LogLevel::debug);
  CompileOptions opt;
  opt.artifacts = root;
  opt.nvcc_jobs = 1;  // one nvcc at a time: an SM90 instance takes ~3 GB
  opt = resolve(opt);
  int rc = 0;
  try {
    compile::ArtifactCache cache(opt, compile::make_toolchains(opt, log), log);
    if (Verdict v = cache.available("cutlass"); !v || cache.load_only("cutlass")) {
      std::printf("SKIP: CUTLASS backend cannot build here: %s\n", v ? "load-only" : v.reason.c_str());
      rc = 77;
    } else {
      std::printf("toolchain: %s\n", cache.version("cutlass").c_str());
      // bf16 nn.Linear with bias and GELU, cooperative 128x128x64.
      GemmProblem bf16 = GemmProblem::linear(4096, 4096, 4096);
      bf16.bias = true, bf16.act = Activation::gelu_tanh;
      // fp8 e4m3 -> bf16, tensorwise scales, ping-pong, cluster 2x1, swap-AB (decode-like shape).
      GemmProblem fp8 = GemmProblem::linear(16, 4096, 4096, DType::e4m3);
      fp8.scale = ScaleMode::tensorwise;
      const InstanceSpec spec = InstanceSpec::of(Config{64, 128, 128, 2, 1, Schedule::pingpong, true}, fp8);
      // The key is what the CUTLASS builder has always hashed: its fingerprint JSON, a newline,
      // the source (kernel packs stay valid).
      const std::string fingerprint =
          nlohmann::json{{"format", 1},
                         {"nvcc", nlohmann::json::parse(slurp_record(root)).at("nvcc")},
                         {"cutlass", nlohmann::json::parse(slurp_record(root)).at("cutlass")},
                         {"kernel", nlohmann::json::parse(slurp_record(root)).at("kernel")},
                         {"flags", compile::nvcc_flags()}}
              .dump();
      expect(cache.key(job(spec)) == ArtifactStore::make_key(fingerprint + "\n" + spec.source()),
             "the key is the fingerprint and the source, as always");
      // fp8 block scales (1x128 / 128x128), cooperative, cluster 1x2: the blockwise collective.
      GemmProblem block = GemmProblem::linear(2048, 4096, 4096, DType::e4m3);
      block.scale = ScaleMode::block;
      const std::vector<std::pair<GemmProblem, Config>> instances{
          {bf16, Config{128, 128, 64, 1, 1, Schedule::cooperative, false}},
          {fp8, spec.config},
          {block, Config{128, 128, 128, 1, 2, Schedule::cooperative, false}}};
      // One nvcc slot and four misses: one group, one translation unit, four shared objects,
      // each answering for its own instance.
      std::vector<compile::Job> jobs;
      for (const auto& [p, c] : instances) jobs.push_back(job(InstanceSpec::of(c, p)));
      // And a grouped instance (masked layout, ping-pong, cluster 2x1).
      GroupedGemmProblem grouped = GroupedGemmProblem::make(8, 1024, 512, 64);
      grouped.layout = GroupedLayout::masked;
      const Config grouped_config{64, 128, 64, 2, 1, Schedule::pingpong, false};
      jobs.push_back(grouped_job(GroupedInstanceSpec::of(grouped_config, grouped)));
      const auto built = cache.build_all(jobs);
      for (size_t i = 0; i < jobs.size(); ++i) {
        expect(built[i].built.has_value(), "built " + jobs[i].what + (built[i].error.empty() ? "" : ": " + built[i].error));
        if (!built[i].built) continue;
        const nlohmann::json& meta = built[i].built->artifact.meta;
        expect(meta.contains("group") && meta["group"].value("size", 0) == int(jobs.size()),
               "built in one nvcc run with the others: " + meta.value("group", nlohmann::json()).dump());
        if (i < instances.size())
          check_instance(*built[i].built, instances[i].first, instances[i].second);
        else
          check_grouped(*built[i].built, grouped, grouped_config);
      }
      expect(cache.build(jobs[1]).hit, "a group's member is a store hit afterwards");

      // A machine without nvcc (the GPU machine) reads the same store as a kernel pack.
      CompileOptions no_nvcc = opt;
      no_nvcc.nvcc = "/nonexistent/nvcc";
      compile::ArtifactCache pack(no_nvcc, compile::make_toolchains(no_nvcc, log), log);
      expect(pack.available("cutlass") && pack.load_only("cutlass"), "without nvcc the store is usable load-only");
      expect(pack.key(job(spec)) == cache.key(job(spec)), "load-only computes the same artifact key");
      expect(pack.has(job(spec)) && pack.build(job(spec)).hit, "load-only finds the built instance");
      InstanceSpec absent = InstanceSpec::of(Config{128, 192, 128, 1, 1, Schedule::cooperative, false}, fp8);
      expect(!pack.has(job(absent)), "load-only reports an instance it lacks as absent");
      rc = failures ? 1 : 0;
    }
  } catch (const Error& e) {
    std::printf("FAIL: %s\n", e.what());
    rc = 1;
  }
  if (temp) {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  std::printf("%s\n", rc == 0 ? "PASSED" : rc == 77 ? "SKIPPED" : "FAILED");
  return rc;
}
