// The CuTe DSL GEMM and softmax backends' start-up without a GPU: a non-Hopper device is refused
// with the reason; with no device (index -1, as `gemmtune precompile`) they come up over an
// artifact cache and answer available() either way.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "backends/backend.hpp"
#include "compile/artifact_cache.hpp"
#include "compile/python_worker.hpp"
#include "core/settings.hpp"

namespace gemmtune {
namespace {

BackendContext context(int index, int cc_major, int cc_minor) {
  BackendContext ctx;
  ctx.device.index = index;
  ctx.device.name = "test device";
  ctx.device.cc_major = cc_major, ctx.device.cc_minor = cc_minor;
  ctx.device.sm_count = 132;
  return ctx;
}

TEST(CutedslBackends, RefuseANonHopperDeviceWithTheReason) {
  const BackendContext ampere = context(0, 8, 0);
  auto gemm = make_cutedsl_backend(ampere);
  auto softmax = make_cutedsl_softmax_backend(ampere);
  for (const Verdict& v : {gemm->available(), softmax->available()}) {
    EXPECT_FALSE(v);
    EXPECT_NE(v.reason.find("sm_90a"), std::string::npos) << v.reason;
    EXPECT_NE(v.reason.find("cc 8.0"), std::string::npos) << v.reason;
  }
  EXPECT_EQ(gemm->version(), "unavailable");
  EXPECT_EQ(softmax->version(), "unavailable");
}

TEST(CutedslBackends, ComeUpWithoutADevice) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("gt-cutedsl-up-" + std::to_string(::getpid()));
  CompileOptions co;
  co.artifacts = dir;
  co.workers = 1;
  co = resolve(co);
  compile::ArtifactCache cache(co, compile::make_toolchains(co, Log()), Log());
  BackendContext none = context(-1, 9, 0);
  none.artifacts = &cache;
  auto gemm = make_cutedsl_backend(none);
  auto softmax = make_cutedsl_softmax_backend(none);
  EXPECT_EQ(gemm->name(), "cutedsl");
  EXPECT_EQ(softmax->name(), "cutedsl");
  // Available where .venv has the DSL (or a pack makes it load-only), else with a reason.
  for (const Verdict& v : {gemm->available(), softmax->available()}) {
    std::printf("  cutedsl: %s\n", v ? "available" : ("not available: " + v.reason).c_str());
    if (!v) EXPECT_FALSE(v.reason.empty());
  }
  if (softmax->available()) EXPECT_NE(softmax->version().find(" softmax="), std::string::npos) << softmax->version();
  if (gemm->available()) EXPECT_NE(gemm->version().find(" src="), std::string::npos) << gemm->version();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gemmtune
