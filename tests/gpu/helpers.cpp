// Shared GPU test helpers (helpers.hpp).
#include "gpu/helpers.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <random>
#include <thread>

#include "compile/python_worker.hpp"
#include "core/settings.hpp"
#include "support/host_reference.hpp"

namespace gemmtune::gpu_test {

namespace fs = std::filesystem;

DeviceInfo current_device() {
  DeviceInfo dev;
  int device = 0;
  GT_CUDA(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  GT_CUDA(cudaGetDeviceProperties(&prop, device));
  dev.index = device, dev.name = prop.name, dev.sm_count = prop.multiProcessorCount;
  dev.cc_major = prop.major, dev.cc_minor = prop.minor;
  return dev;
}

compile::ArtifactCache& artifacts() {
  static compile::ArtifactCache* cache = [] {
    const EngineOptions o = resolve(EngineOptions{});
    const Log log([](const std::string& m) { std::fprintf(stderr, "[artifacts] %s\n", m.c_str()); }, LogLevel::warning);
    auto* c = new compile::ArtifactCache(o.compile, compile::make_toolchains(o.compile, log), log);
    c->start_probes();
    return c;
  }();  // never destroyed: candidates may outlive the tests' scopes
  return *cache;
}

BackendContext context(const DeviceInfo& dev, std::function<void(const std::string&)> log) {
  return BackendContext{dev, Log(std::move(log), LogLevel::info), &artifacts(), 0};
}

void prepare(detail::CandidateBase& c) {
  std::vector<compile::Built> built;
  for (const compile::Job& j : c.jobs()) built.push_back(artifacts().build(j));
  c.prepare(built);
}

fs::path temp_cache(const char* name) {
  fs::path dir = fs::temp_directory_path() / ("gemmtune-gpu-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path p = dir / name;
  fs::remove(p);
  return p;
}

EngineOptions quick(const fs::path& cache) {
  EngineOptions o;
  o.cache_path = cache;
  o.tune.warmup_ms = 10;
  o.tune.min_rounds = 3;
  o.tune.max_rounds = 5;
  o.tune.tie_rounds = 3;
  return o;
}

void expect_winner_within_race_reach(const TuneReport& r, const TuneOptions& opt) {
  ASSERT_NE(r.winner(), nullptr);
  double fastest = r.winner()->median_us;
  for (auto& c : r.results)
    if (c.status == CandidateStatus::ok && c.median_us > 0) fastest = std::min(fastest, c.median_us);
  const double reach = std::max(opt.duel_window, opt.tie_tolerance);
  EXPECT_LE(r.winner()->median_us, fastest * (1 + reach) * (1 + reach))
      << r.winner()->backend << " " << r.winner()->name << " vs the fastest correct candidate";
}

CheckResult check_d(const GemmProblem& p, const GemmArgs& args, const std::vector<double>& ref) {
  const auto d = host::unpack_d(p, host::download_bytes(args.d, size_t(p.elems_d()) * size_of(p.d.dtype)));
  return host::host_compare(p, d, ref);
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// Row r of `v` (packed [rows, cols] doubles) becomes special by r % 6 (helpers.hpp).
void make_special(std::vector<double>& v, int64_t cols, int64_t r, std::mt19937_64& rng) {
  double* row = &v[size_t(r * cols)];
  const int64_t at = int64_t(rng() % uint64_t(cols));
  switch (r % 6) {
    case 1:
      row[at] = kNaN;
      break;
    case 2:
      row[at] = kInf;
      break;
    case 3:
      for (int64_t c = 0; c < cols; ++c) row[c] = -kInf;
      break;
    case 4:
      for (int64_t c = 1; c < cols; c += 2) row[c] = -kInf;
      break;
    case 5:
      row[at] = -kInf;
      row[(at + 1) % cols] = 1e4;
      break;
    default:
      break;
  }
}

}  // namespace

SoftmaxHostInput softmax_host_input(const SoftmaxProblem& p, bool specials, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-8.0, 8.0);
  std::vector<double> values(size_t(p.rows * p.cols));
  for (double& v : values) v = dist(rng);
  if (specials)
    for (int64_t r = 0; r < p.rows; ++r) make_special(values, p.cols, r, rng);
  const int64_t ld = p.row_stride();
  SoftmaxHostInput in;
  in.x.resize(size_t(p.elems()) * size_of(p.in));
  for (int64_t r = 0; r < p.rows; ++r)
    for (int64_t c = 0; c < ld; ++c)
      host::store(p.in, in.x.data(), r * ld + c, c < p.cols ? values[size_t(r * p.cols + c)] : kNaN);
  in.ref = host::host_softmax(p, in.x.data());
  return in;
}

int64_t written_padding_row(const SoftmaxProblem& p, const std::vector<uint8_t>& y) {
  const int64_t ld = p.row_stride();
  const size_t es = size_of(p.out);
  for (int64_t r = 0; r < p.rows; ++r)
    for (size_t b = size_t(r * ld + p.cols) * es; b < size_t((r + 1) * ld) * es; ++b)
      if (y[b] != 0xff) return r;
  return -1;
}

void SoftmaxOutputChecks::add(std::string name, std::vector<uint8_t> y) {
  pending_.push_back(std::async(std::launch::async, [&p = p_, &in = in_, y = std::move(y), name = std::move(name)] {
    return Outcome{name, host::softmax_compare(p, in.x.data(), y.data(), in.ref), written_padding_row(p, y) < 0};
  }));
  drain(std::clamp<size_t>(std::thread::hardware_concurrency(), 2, 16) - 1);
}

int SoftmaxOutputChecks::finish() {
  drain(0);
  return failed_;
}

void SoftmaxOutputChecks::drain(size_t keep) {
  while (pending_.size() > keep) {
    const Outcome o = pending_.front().get();
    pending_.pop_front();
    EXPECT_TRUE(o.res.ok) << o.name << ": " << o.res.reason;
    EXPECT_TRUE(o.pad_ok) << o.name << ": wrote into the padding between cols and ld";
    failed_ += !(o.res.ok && o.pad_ok);
  }
}

}  // namespace gemmtune::gpu_test
