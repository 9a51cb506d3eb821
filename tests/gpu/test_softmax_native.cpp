// The native softmax kernels against the float64 host reference: every config for every shape
// of {1, 7, 1000} x {1, 31, 32, 33, 1024, 4097, 65536, 262144, 262147} (1000 rows capped at 4M
// elements: 16 rows of 262144), packed and strided rows, scale
// 1 and not, bf16 / fp16 / fp32 (and mixed) in and out, and rows of NaN, +-Inf and all -Inf;
// the pipe kind (the long-row kernel) on its own at 32K-256K columns (odd lengths, tails, every
// dtype pair, few rows) and with its persistent grid capped so that clusters loop over rows and
// wrap around their stages; the tiny kind (rows of 1-1024 columns, CTA spans starting inside a
// 16-byte pack), rows not starting on a 16-byte pack (odd packed widths: pipe, row, tiny, wide), the
// row kind (odd widths, clusters, several rows a CTA), the flat kind (rows of 2-8 values), and
// the wide kind (1-8 long rows over the whole GPU, its grid also capped so that CTAs hold several
// slices). Inputs are random (never constant), outputs poisoned (NaN bits)
// before every run, and the padding between cols and ld must stay poisoned. Skips without a
// CUDA device.
//
// Also the probe (SoftmaxNativeProbe.DISABLED_TimeEveryConfig, run by
// bench/softmax-native-probe.sh, never by default): every native config of the suite's shapes
// timed against the copy bandwidth.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backends/native/softmax.hpp"
#include "core/cuda.hpp"
#include "gpu/helpers.hpp"
#include "support/gpu.hpp"
#include "support/host_softmax.hpp"

using namespace gemmtune;
using namespace gemmtune::native;

namespace {

const int64_t kRows[] = {1, 7, 1000};
const int64_t kCols[] = {1, 31, 32, 33, 1024, 4097, 65536, 262144, 262147};

struct Dtypes {
  DType in, out;
};
const Dtypes kSame[] = {{DType::bf16, DType::bf16}, {DType::fp16, DType::fp16}, {DType::fp32, DType::fp32}};
const Dtypes kMixed[] = {{DType::bf16, DType::fp32}, {DType::fp32, DType::bf16}, {DType::fp16, DType::fp32}};

// Runs every native config on one problem (those `only` accepts, when given); returns the number
// of failing configs.
int check_problem(const SoftmaxProblem& p, bool specials, uint64_t seed,
                  const std::function<bool(const NativeSoftmaxConfig&)>& only = {}) {
  SCOPED_TRACE(p.str() + (specials ? " (special rows)" : ""));
  // x on the host, padding NaN: a kernel that reads it makes its row NaN.
  const gpu_test::SoftmaxHostInput in = gpu_test::softmax_host_input(p, specials, seed);
  DeviceBuffer dx(in.x.size()), dy(size_t(p.elems()) * size_of(p.out));
  GT_CUDA(cudaMemcpy(dx.get(), in.x.data(), in.x.size(), cudaMemcpyHostToDevice));
  Stream stream;
  // The float64 comparison (~60 ns an element on one core) dominates this test: each config's
  // output is compared on its own thread while the next configs run; results are reported here,
  // on the test's thread (SCOPED_TRACE is per thread).
  gpu_test::SoftmaxOutputChecks checks(p, in);
  for (const NativeSoftmaxConfig& cfg : native_softmax_configs(p)) {
    if (only && !only(cfg)) continue;
    // Launches this device cannot make resident are not candidates (native_backend.cpp); any
    // other refusal of an offered config is a bug in the config space or the launcher.
    if (const std::string why = native_softmax_device_check(cfg, p); !why.empty()) {
      EXPECT_EQ(why.rfind("cannot be resident", 0), 0u) << cfg.name() << ": " << why;
      std::printf("  %s: %s skipped: %s\n", p.str().c_str(), cfg.name().c_str(), why.c_str());
      continue;
    }
    GT_CUDA(cudaMemsetAsync(dy.get(), 0xff, dy.bytes(), stream.get()));  // NaN in every dtype
    run_native_softmax(cfg, p, dx.get(), dy.get(), stream.get());
    stream.sync();
    std::vector<uint8_t> y(dy.bytes());
    GT_CUDA(cudaMemcpy(y.data(), dy.get(), y.size(), cudaMemcpyDeviceToHost));
    checks.add(cfg.name(), std::move(y));
  }
  return checks.finish();
}

// Strided rows: ld past cols, a multiple of 8 (so vector configs run, with tails).
int64_t padded(int64_t cols) { return (cols + 1 + 7) / 8 * 8; }

}  // namespace

// At most this many elements per problem: the float64 host reference and the comparison run on
// one host core for every config (~20), so 1000 x 262147 (262M elements) took minutes. Long rows
// keep at least 7 rows (every special-row kind of gpu_test::softmax_host_input appears).
constexpr int64_t kMaxElems = int64_t(1) << 22;
int64_t capped_rows(int64_t rows, int64_t cols) { return std::max<int64_t>(std::min(rows, kMaxElems / cols), 7); }

TEST(SoftmaxNative, EveryConfigEveryShape) {
  REQUIRE_GPU();
  uint64_t seed = 1;
  for (int64_t rows_wanted : kRows)
    for (int64_t cols : kCols) {
      const int64_t rows = rows_wanted >= 7 ? capped_rows(rows_wanted, cols) : rows_wanted;
      const bool big = rows * cols > (int64_t(1) << 21);
      for (const Dtypes& d : kSame) {
        if (big && d.in != DType::bf16) continue;  // host reference time: one dtype past 2M elements
        SoftmaxProblem p = SoftmaxProblem::make(rows, cols, d.in);
        p.out = d.out;
        check_problem(p, rows >= 6, seed++);  // packed, scale 1
        if (big) continue;
        p.ld = padded(cols);
        p.scale = 0.37f;
        check_problem(p, rows >= 6, seed++);  // strided, scaled
      }
      if (rows * cols <= (int64_t(1) << 22))
        for (const Dtypes& d : kMixed) {
          SoftmaxProblem p = SoftmaxProblem::make(rows, cols, d.in);
          p.out = d.out;
          p.scale = -1.5f;
          check_problem(p, rows >= 6, seed++);
        }
    }
}

// Every row special (six kinds, repeated), every config and dtype, scales that keep, flip
// (+Inf <-> -Inf) and zero (0 * Inf = NaN) the special values.
TEST(SoftmaxNative, SpecialRowsBehaveAsTorch) {
  REQUIRE_GPU();
  uint64_t seed = 1000;
  for (int64_t cols : kCols)
    for (const Dtypes& d : kSame)
      for (float scale : {1.0f, -0.5f, 0.0f}) {
        SoftmaxProblem p = SoftmaxProblem::make(12, cols, d.in);
        p.out = d.out;
        p.scale = scale;
        p.ld = scale == 1.0f ? 0 : padded(cols);
        check_problem(p, true, seed++);
      }
}

// Every offered config of the shapes that failed on the H200 (the smem kernel's dynamic shared
// memory opt-in of 227 KiB + its static shared memory was cudaErrorInvalidValue, and that error,
// left in the runtime, was then reported by the next launch's cudaGetLastError) and of the suite
// (bench/suites/softmax.csv's row lengths, 4M elements) passes the device check, except residency; the checks
// and a launch of each leave no error behind in the runtime.
TEST(SoftmaxNative, DeviceCheckAcceptsEveryOfferedConfig) {
  REQUIRE_GPU();
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)  // not this test's: noted and cleared
    std::printf("  note: an earlier test left %s in the runtime\n", cudaGetErrorName(e));
  struct Shape {
    int64_t rows, cols;
    DType in;
  };
  std::vector<Shape> shapes = {{40, 4096, DType::fp16}, {24, 16384, DType::fp32}, {16, 65536, DType::bf16}};
  for (int64_t cols : {1024, 4096, 16384, 32768, 65536, 131072, 262144})
    for (DType in : {DType::bf16, DType::fp16, DType::fp32}) shapes.push_back({(int64_t(1) << 22) / cols, cols, in});
  int checked = 0, launched = 0;
  for (const Shape& sh : shapes) {
    SoftmaxProblem p = SoftmaxProblem::make(sh.rows, sh.cols, sh.in);
    p.out = sh.in;
    for (const NativeSoftmaxConfig& cfg : native_softmax_configs(p)) {
      const std::string why = native_softmax_device_check(cfg, p);
      ++checked;
      if (!why.empty()) {
        EXPECT_EQ(why.rfind("cannot be resident", 0), 0u) << p.str() << " " << cfg.name() << ": " << why;
        std::printf("  %s: %s skipped: %s\n", p.str().c_str(), cfg.name().c_str(), why.c_str());
      }
      EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess) << p.str() << " " << cfg.name() << ": the check left an error";
      if (!why.empty()) continue;
      // Launchable: one launch into poisoned output (results are checked by EveryConfigEveryShape).
      DeviceBuffer x(size_t(p.elems()) * size_of(p.in)), y(size_t(p.elems()) * size_of(p.out));
      GT_CUDA(cudaMemset(x.get(), 0, x.bytes()));
      EXPECT_NO_THROW(run_native_softmax(cfg, p, x.get(), y.get(), nullptr)) << p.str() << " " << cfg.name();
      GT_CUDA(cudaDeviceSynchronize());
      ++launched;
    }
  }
  EXPECT_GT(checked, 100);
  EXPECT_GT(launched, 50);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// A config that cannot hold the row, or misaligned vectors, is refused with an Error.
TEST(SoftmaxNative, LauncherRefusesWhatAConfigCannotRun) {
  REQUIRE_GPU();
  SoftmaxProblem p = SoftmaxProblem::make(4, 2048);
  DeviceBuffer x(size_t(p.elems()) * 2 + 16), y(size_t(p.elems()) * 2 + 16);
  EXPECT_THROW(run_native_softmax({SoftmaxKind::warp, 8, 32, 128}, p, x.get(), y.get(), nullptr), Error);
  const char* xm = static_cast<const char*>(x.get()) + 2;
  EXPECT_THROW(run_native_softmax({SoftmaxKind::online, 8, 0, 256}, p, xm, y.get(), nullptr), Error);
  EXPECT_NO_THROW(run_native_softmax({SoftmaxKind::online, 1, 0, 256}, p, xm, y.get(), nullptr));
  GT_CUDA(cudaDeviceSynchronize());
}

// ---- the pipe kind ---------------------------------------------------------------------------

namespace {

bool is_pipe(const NativeSoftmaxConfig& c) { return c.kind == SoftmaxKind::pipe; }

int count_pipe(const SoftmaxProblem& p) {
  int n = 0;
  for (const auto& c : native_softmax_configs(p)) n += is_pipe(c);
  return n;
}

}  // namespace

// The pipe kind alone at the suite's long row lengths and odd ones: 262143 and 32771 (strided:
// the last partial pack read from global memory; 32771: a last CTA with fewer columns than a
// pack), 200000 (a last CTA shorter than its slice), every dtype pair, scales 1, 0.37 and -1.5,
// rows of NaN / +Inf / all -Inf / -Inf mixed in. Few rows: the float64 reference.
TEST(SoftmaxNative, PipeLongRows) {
  REQUIRE_GPU();
  struct Case {
    int64_t rows, cols;
    bool strided;
  };
  const Case cases[] = {{7, 32768, false}, {7, 32771, true}, {6, 65536, false},  {6, 131072, false},
                        {7, 262144, false}, {7, 262143, true}, {3, 200000, false}, {7, 16384, false}};
  uint64_t seed = 2000;
  for (const Case& cs : cases) {
    int k = 0;
    for (const Dtypes& d : {kSame[0], kSame[1], kSame[2], kMixed[0], kMixed[1], kMixed[2]}) {
      SoftmaxProblem p = SoftmaxProblem::make(d.in == d.out ? cs.rows : 3, cs.cols, d.in);
      p.out = d.out;
      p.ld = cs.strided ? padded(cs.cols) : 0;
      const float scales[] = {1.0f, 0.37f, -1.5f};
      p.scale = scales[k++ % 3];
      const int n = count_pipe(p);
      // fp32 rows of 200000 (800 KB) have none: 8 CTAs x 1024 x 32 need 2 x 128 KiB stages, 16
      // CTAs of 16384 would leave the last idle.
      if (!(d.in == DType::fp32 && cs.cols == 200000)) EXPECT_GT(n, 0) << p.str() << ": no pipe config";
      if (n) check_problem(p, true, seed++, is_pipe);
    }
  }
}

// Persistent grids capped at 1 and 3 clusters: each cluster loops over several rows (block-rows
// of up to 8 rows, the last one short), its stages wrap around (barrier phases flip) and rows
// split unevenly; the launch is what the cap says.
TEST(SoftmaxNative, PipeLoopsOverRowsAndStages) {
  REQUIRE_GPU();
  struct Reset {
    ~Reset() { set_native_softmax_persistent_cap(0); }
  } reset;
  struct Shape {
    int64_t rows, cols;
    DType in;
  };
  const Shape shapes[] = {{43, 1024, DType::bf16}, {25, 4096, DType::fp32}, {13, 65536, DType::bf16}, {9, 262144, DType::fp16}};
  uint64_t seed = 3000;
  for (int64_t cap : {1, 3}) {
    set_native_softmax_persistent_cap(cap);
    for (const Shape& sh : shapes) {
      const SoftmaxProblem p = SoftmaxProblem::make(sh.rows, sh.cols, sh.in);
      ASSERT_GT(count_pipe(p), 0) << p.str();
      int sms = 0, dev = 0;
      GT_CUDA(cudaGetDevice(&dev));
      GT_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
      for (const auto& c : native_softmax_configs(p))
        if (is_pipe(c) && native_softmax_device_check(c, p).empty()) {
          const NativeSoftmaxKernelInfo info = native_softmax_kernel_info(c, p);
          const int64_t resident = c.cluster > 1 ? info.active_clusters : int64_t(info.blocks_per_sm) * sms;
          const int64_t block_rows = (p.rows + c.block_rows - 1) / c.block_rows;
          EXPECT_EQ(info.launch.grid, std::min({cap, block_rows, resident}) * c.cluster) << p.str() << " " << c.name();
        }
      check_problem(p, true, seed++, is_pipe);
    }
  }
}

// ---- the probe (bash bench/softmax-native-probe.sh; disabled: never part of a test run) -----
//
// Times every native config that passes the device check (GEMMTUNE_PROBE_CONFIGS: only these,
// comma-separated names) on each shape of GEMMTUNE_PROBE_SHAPES (default: bench/suites/softmax.csv,
// "524288x1024,...") in each dtype of GEMMTUNE_PROBE_DTYPES (default bf16), against a
// device-to-device cudaMemcpy of the same bytes (x read + y written): back-to-back launches on
// one stream, CUDA events around each, median of GEMMTUNE_PROBE_SAMPLES (15) after one warm-up.
// Each operand is 1 GiB (bf16, 2^29 elements; 20x the L2), so L2 is cold for every launch without
// a flush. Prints one table per shape (registers, residency, launched grid, us, TB/s, % of copy)
// and checks 3 rows of every config's output against the float64 host reference.
// GEMMTUNE_PROBE_NCU=1: one launch per config, nothing timed (for ncu's kernel replay).
// GEMMTUNE_PROBE_INTERLEAVE=1: the configs and the copy timed in rounds (one launch of each per
// round, in turn), so that clock and thermal drift hit every contender alike.

namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : std::string(fallback);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = s.find(sep, start);
    const std::string part = s.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!part.empty()) out.push_back(part);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

DType parse_dtype(const std::string& s) {
  if (s == "bf16") return DType::bf16;
  if (s == "fp16") return DType::fp16;
  if (s == "fp32") return DType::fp32;
  GT_THROW("probe: unknown dtype " + s);
}

// Median milliseconds of `samples` back-to-back runs of f on s (one warm-up first).
double median_ms(const std::function<void()>& f, cudaStream_t s, int samples) {
  f();
  GT_CUDA(cudaStreamSynchronize(s));
  std::vector<cudaEvent_t> ev(size_t(2 * samples));
  for (auto& e : ev) GT_CUDA(cudaEventCreate(&e));
  for (int i = 0; i < samples; ++i) {
    GT_CUDA(cudaEventRecord(ev[size_t(2 * i)], s));
    f();
    GT_CUDA(cudaEventRecord(ev[size_t(2 * i + 1)], s));
  }
  GT_CUDA(cudaStreamSynchronize(s));
  std::vector<double> ms;
  for (int i = 0; i < samples; ++i) {
    float m = 0;
    GT_CUDA(cudaEventElapsedTime(&m, ev[size_t(2 * i)], ev[size_t(2 * i + 1)]));
    ms.push_back(m);
  }
  for (auto& e : ev) cudaEventDestroy(e);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

TEST(SoftmaxNativeProbe, DISABLED_TimeEveryConfig) {
  REQUIRE_GPU();
  const auto shapes = split(env_or("GEMMTUNE_PROBE_SHAPES", "524288x1024,131072x4096,32768x16384,16384x32768,8192x65536,"
                                                           "4096x131072,2048x262144"),
                            ',');
  const auto dtypes = split(env_or("GEMMTUNE_PROBE_DTYPES", "bf16"), ',');
  const auto only = split(env_or("GEMMTUNE_PROBE_CONFIGS", ""), ',');
  const int samples = std::max(3, std::atoi(env_or("GEMMTUNE_PROBE_SAMPLES", "15").c_str()));
  const bool ncu = env_or("GEMMTUNE_PROBE_NCU", "0") == "1";
  const bool interleave = env_or("GEMMTUNE_PROBE_INTERLEAVE", "0") == "1";
  cudaDeviceProp prop{};
  int dev = 0;
  GT_CUDA(cudaGetDevice(&dev));
  GT_CUDA(cudaGetDeviceProperties(&prop, dev));
  std::printf("probe: %s, %d SMs, L2 %d MiB; %d samples a config%s\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20, samples, ncu ? " (ncu mode: one launch a config, no timing)" : "");
  Stream stream;
  for (const std::string& dts : dtypes)
    for (const std::string& shape : shapes) {
      const auto rc = split(shape, 'x');
      ASSERT_EQ(rc.size(), 2u) << shape;
      const SoftmaxProblem p = SoftmaxProblem::make(std::atoll(rc[0].c_str()), std::atoll(rc[1].c_str()), parse_dtype(dts));
      const size_t in_bytes = size_t(p.elems()) * size_of(p.in), out_bytes = size_t(p.elems()) * size_of(p.out);
      DeviceBuffer x(in_bytes), y(out_bytes);
      // x: 4M random elements in [-8, 8), repeated
      {
        const int64_t chunk = std::min<int64_t>(p.elems(), int64_t(1) << 22);
        std::mt19937_64 rng(7);
        std::uniform_real_distribution<double> dist(-8.0, 8.0);
        std::vector<uint8_t> h(size_t(chunk) * size_of(p.in));
        for (int64_t i = 0; i < chunk; ++i) host::store(p.in, h.data(), i, dist(rng));
        GT_CUDA(cudaMemcpy(x.get(), h.data(), h.size(), cudaMemcpyHostToDevice));
        for (size_t off = h.size(); off < in_bytes; off += h.size())
          GT_CUDA(cudaMemcpy(static_cast<char*>(x.get()) + off, x.get(), std::min(h.size(), in_bytes - off),
                             cudaMemcpyDeviceToDevice));
      }
      const double bytes = double(p.rows) * double(p.cols) * double(size_of(p.in) + size_of(p.out));
      double copy_tbps = 0;
      if (!ncu) {
        const double ms = median_ms(
            [&] { GT_CUDA(cudaMemcpyAsync(y.get(), x.get(), std::min(in_bytes, out_bytes), cudaMemcpyDeviceToDevice, stream.get())); },
            stream.get(), samples);
        copy_tbps = 2.0 * double(std::min(in_bytes, out_bytes)) / (ms * 1e-3) / 1e12;
      }
      std::printf("\n== %s: %.3f GB moved; copy (cudaMemcpy D2D) %.3f TB/s\n", p.str().c_str(), bytes / 1e9, copy_tbps);
      std::printf("%-30s %5s %5s %9s %6s %-34s %9s %7s %6s  %s\n", "config", "regs", "local", "resident", "smemKB",
                  "launch (grid x threads, cluster)", "us", "TB/s", "%copy", "check");
      std::string best;
      double best_tbps = 0;
      // Interleaved: every runnable config's median, timed in rounds with the copy (index 0).
      std::map<std::string, double> interleaved_ms;
      if (interleave && !ncu) {
        std::vector<std::function<void()>> runs = {[&] {
          GT_CUDA(cudaMemcpyAsync(y.get(), x.get(), std::min(in_bytes, out_bytes), cudaMemcpyDeviceToDevice, stream.get()));
        }};
        std::vector<std::string> names = {"copy"};
        for (const NativeSoftmaxConfig& cfg : native_softmax_configs(p)) {
          if (!only.empty() && std::find(only.begin(), only.end(), cfg.name()) == only.end()) continue;
          if (!native_softmax_device_check(cfg, p).empty()) continue;
          runs.push_back([&, cfg] { run_native_softmax(cfg, p, x.get(), y.get(), stream.get()); });
          names.push_back(cfg.name());
        }
        for (auto& f : runs) f();  // warm-up
        std::vector<cudaEvent_t> ev(2 * runs.size() * size_t(samples));
        for (auto& e : ev) GT_CUDA(cudaEventCreate(&e));
        for (int i = 0; i < samples; ++i)
          for (size_t j = 0; j < runs.size(); ++j) {
            const size_t at = 2 * (size_t(i) * runs.size() + j);
            GT_CUDA(cudaEventRecord(ev[at], stream.get()));
            runs[j]();
            GT_CUDA(cudaEventRecord(ev[at + 1], stream.get()));
          }
        GT_CUDA(cudaStreamSynchronize(stream.get()));
        for (size_t j = 0; j < runs.size(); ++j) {
          std::vector<double> ms;
          for (int i = 0; i < samples; ++i) {
            float m = 0;
            const size_t at = 2 * (size_t(i) * runs.size() + j);
            GT_CUDA(cudaEventElapsedTime(&m, ev[at], ev[at + 1]));
            ms.push_back(m);
          }
          std::sort(ms.begin(), ms.end());
          interleaved_ms[names[j]] = ms[ms.size() / 2];
        }
        for (auto& e : ev) cudaEventDestroy(e);
        copy_tbps = 2.0 * double(std::min(in_bytes, out_bytes)) / (interleaved_ms["copy"] * 1e-3) / 1e12;
        std::printf("interleaved: %d rounds; copy %.3f TB/s in the rounds\n", samples, copy_tbps);
      }
      for (const NativeSoftmaxConfig& cfg : native_softmax_configs(p)) {
        if (!only.empty() && std::find(only.begin(), only.end(), cfg.name()) == only.end()) continue;
        if (const std::string why = native_softmax_device_check(cfg, p); !why.empty()) {
          std::printf("%-30s skipped: %s\n", cfg.name().c_str(), why.c_str());
          continue;
        }
        const NativeSoftmaxKernelInfo info = native_softmax_kernel_info(cfg, p);
        const std::string resident = info.launch.cluster > 1 ? std::to_string(info.active_clusters) + " cl"
                                                             : std::to_string(info.blocks_per_sm) + "/SM";
        const std::string launch = std::to_string(info.launch.grid) + " x " + std::to_string(info.launch.threads) + ", c" +
                                   std::to_string(info.launch.cluster) + (info.launch.persistent ? " persistent" : "");
        auto run = [&] { run_native_softmax(cfg, p, x.get(), y.get(), stream.get()); };
        if (ncu) {
          run();
          stream.sync();
          std::printf("%-30s %5d %5lld %9s %6.1f %-34s launched\n", cfg.name().c_str(), info.regs_per_thread,
                      static_cast<long long>(info.local_bytes), resident.c_str(), double(info.launch.dynamic_smem) / 1024,
                      launch.c_str());
          continue;
        }
        GT_CUDA(cudaMemsetAsync(y.get(), 0xff, out_bytes, stream.get()));
        double ms = 0;
        if (interleave) {  // one more run for the check below
          run();
          stream.sync();
          ms = interleaved_ms.at(cfg.name());
        } else {
          ms = median_ms(run, stream.get(), samples);
        }
        const double tbps = bytes / (ms * 1e-3) / 1e12;
        // 3 rows against the float64 reference
        std::string check = "ok";
        for (int64_t r : {int64_t(0), p.rows / 2, p.rows - 1}) {
          SoftmaxProblem one = SoftmaxProblem::make(1, p.cols, p.in);
          one.out = p.out;
          const size_t off = size_t(r * p.row_stride());
          std::vector<uint8_t> hx(size_t(p.cols) * size_of(p.in)), hy(size_t(p.cols) * size_of(p.out));
          GT_CUDA(cudaMemcpy(hx.data(), static_cast<const char*>(x.get()) + off * size_of(p.in), hx.size(), cudaMemcpyDeviceToHost));
          GT_CUDA(cudaMemcpy(hy.data(), static_cast<const char*>(y.get()) + off * size_of(p.out), hy.size(), cudaMemcpyDeviceToHost));
          const host::SoftmaxCheck res = host::softmax_compare(one, hx.data(), hy.data(), host::host_softmax(one, hx.data()));
          if (!res.ok) {
            check = "WRONG row " + std::to_string(r) + ": " + res.reason;
            break;
          }
        }
        EXPECT_EQ(check, "ok") << p.str() << " " << cfg.name();
        std::printf("%-30s %5d %5lld %9s %6.1f %-34s %9.1f %7.3f %6.1f  %s\n", cfg.name().c_str(), info.regs_per_thread,
                    static_cast<long long>(info.local_bytes), resident.c_str(), double(info.launch.dynamic_smem) / 1024,
                    launch.c_str(), ms * 1e3, tbps, 100 * tbps / copy_tbps, check.c_str());
        if (check == "ok" && tbps > best_tbps) best_tbps = tbps, best = cfg.name();
      }
      if (!ncu)
        std::printf("best %s: %s %.3f TB/s = %.1f%% of copy\n", p.str().c_str(), best.c_str(), best_tbps,
                    100 * best_tbps / copy_tbps);
      std::fflush(stdout);
    }
}

// ---- short rows, odd widths, few long rows (issue 19) ------------------------------------------

namespace {

bool is_kind(const NativeSoftmaxConfig& c, SoftmaxKind k) { return c.kind == k; }

int count_kind(const SoftmaxProblem& p, SoftmaxKind k) {
  int n = 0;
  for (const auto& c : native_softmax_configs(p)) n += is_kind(c, k);
  return n;
}

}  // namespace

// The tiny kind at every row length 1-64 and a few up to 1024: packed rows (the CTAs' spans start
// inside a 16-byte pack: 3000 rows of 7 bf16 are 3 CTAs of 1170 rows, the second starting at
// element 8190), strided rows, every dtype pair, scales 1, 0.37 and -1.5 (and 0: 0 * Inf = NaN),
// special rows.
TEST(SoftmaxNative, TinyRows) {
  REQUIRE_GPU();
  uint64_t seed = 4000;
  std::vector<int64_t> cols_list;
  for (int64_t c = 1; c <= 64; ++c) cols_list.push_back(c);
  for (int64_t c : {65, 100, 127, 128, 129, 200, 255, 256, 257, 500, 512, 1001, 1024}) cols_list.push_back(c);
  auto tiny = [](const NativeSoftmaxConfig& c) { return is_kind(c, SoftmaxKind::tiny); };
  int k = 0;
  for (int64_t cols : cols_list) {
    const Dtypes d = k % 2 ? kMixed[k / 2 % 3] : kSame[k / 2 % 3];
    ++k;
    SoftmaxProblem p = SoftmaxProblem::make(cols <= 64 ? 3000 : 700, cols, d.in);
    p.out = d.out;
    const float scales[] = {1.0f, 0.37f, -1.5f, 0.0f};
    p.scale = scales[k % 4];
    ASSERT_GT(count_kind(p, SoftmaxKind::tiny), 0) << p.str();
    check_problem(p, true, seed++, tiny);
    p.ld = cols + 3;  // strided (and not a multiple of any pack)
    check_problem(p, true, seed++, tiny);
  }
  for (const Dtypes& d : kSame) {  // one row; fewer rows than a chunk
    SoftmaxProblem p = SoftmaxProblem::make(1, 7, d.in);
    p.out = d.out;
    check_problem(p, false, seed++, tiny);
    p.rows = 9;
    check_problem(p, true, seed++, tiny);
  }
  // The persistent grid capped at 1 and 3 CTAs: each CTA loops over several chunks, both x
  // buffers wrap around, chunk spans start anywhere in a pack, the last chunk is short.
  struct Reset {
    ~Reset() { set_native_softmax_persistent_cap(0); }
  } reset;
  for (int64_t cap : {1, 3}) {
    set_native_softmax_persistent_cap(cap);
    for (const Dtypes& d : {kSame[0], kMixed[1], kSame[2]})
      for (int64_t cols : {1, 7, 33, 1001}) {
        // Rows of one value: 50003 rows make several CTAs of packs (their strided twin, ld 6,
        // goes through shared memory chunks under the cap).
        SoftmaxProblem p = SoftmaxProblem::make(cols == 1001 ? 47 : cols == 1 ? 50003 : 5003, cols, d.in);
        p.out = d.out;
        for (const auto& c : native_softmax_configs(p))
          if (tiny(c) && native_softmax_device_check(c, p).empty()) {
            // Packed rows of one value are not persistent: a CTA per threads x 4 packs, uncapped.
            const int64_t per_cta = int64_t(c.threads) * 4 * c.vec;
            EXPECT_EQ(native_softmax_kernel_info(c, p).launch.grid, cols == 1 ? (p.rows + per_cta - 1) / per_cta : cap)
                << p.str() << " " << c.name();
          }
        check_problem(p, true, seed++, tiny);
        p.ld = cols + 5;
        check_problem(p, true, seed++, tiny);
      }
  }
}

// Packed rows whose starts are not 16-byte aligned (ld % vec != 0): pipe (the copy engine takes
// each row's whole packs, the head and tail element-wise), row, tiny and wide, every dtype pair, at
// vocabulary widths (50257) and odd ones.
TEST(SoftmaxNative, UnalignedRows) {
  REQUIRE_GPU();
  struct Case {
    int64_t rows, cols;
  };
  const Case cases[] = {{9, 50257}, {20, 4097}, {7, 32771}, {40, 1025}, {64, 999}, {5, 100003}, {12, 16385}, {300, 257}};
  auto own = [](const NativeSoftmaxConfig& c) {
    return c.kind == SoftmaxKind::pipe || c.kind == SoftmaxKind::row || c.kind == SoftmaxKind::tiny ||
           c.kind == SoftmaxKind::wide;
  };
  uint64_t seed = 5000;
  int k = 0;
  for (const Case& cs : cases)
    for (const Dtypes& d : {kSame[0], kSame[1], kSame[2], kMixed[0], kMixed[1], kMixed[2]}) {
      SoftmaxProblem p = SoftmaxProblem::make(cs.rows, cs.cols, d.in);
      p.out = d.out;
      const float scales[] = {1.0f, 0.37f, -1.5f};
      p.scale = scales[k++ % 3];
      int n = 0;
      for (const auto& c : native_softmax_configs(p)) n += own(c) && c.vec > 1;
      EXPECT_GT(n, 0) << p.str() << ": no 16-byte config for unaligned rows";
      check_problem(p, true, seed++, own);
    }
}

// The row kind (the row in registers, 16-byte packs in virtual columns): odd packed widths (rows
// starting anywhere in a pack; the last row's tail pack past the end of x), strided rows (the
// partial packs element by element, the padding never read), clusters of 2-16 CTAs with the
// row's packs dealt evenly, several rows a CTA with a short last CTA; every dtype pair, scales
// 1, 0.37, -1.5, special rows; then with the persistent grid capped.
TEST(SoftmaxNative, RowKindOddWidths) {
  REQUIRE_GPU();
  struct Case {
    int64_t rows, cols, ld;
  };
  const Case cases[] = {{9, 50257, 0},  {5, 100003, 0}, {12, 16385, 0}, {20, 4097, 0},  {7, 4097, 4100},
                        {130, 1001, 0}, {33, 1001, 1003}, {3, 262147, 0}, {13, 999, 0}, {6, 32768, 0}};
  auto row = [](const NativeSoftmaxConfig& c) { return is_kind(c, SoftmaxKind::row); };
  uint64_t seed = 7000;
  int k = 0, clusters = 0, several = 0;
  for (const Case& cs : cases)
    for (const Dtypes& d : {kSame[0], kSame[1], kSame[2], kMixed[0], kMixed[1], kMixed[2]}) {
      SoftmaxProblem p = SoftmaxProblem::make(cs.rows, cs.cols, d.in);
      p.out = d.out;
      p.ld = cs.ld;
      const float scales[] = {1.0f, 0.37f, -1.5f};
      p.scale = scales[k++ % 3];
      ASSERT_GT(count_kind(p, SoftmaxKind::row), 0) << p.str();
      for (const auto& c : native_softmax_configs(p))
        if (row(c)) clusters += c.cluster > 1, several += c.block_rows > 1;
      check_problem(p, true, seed++, row);
    }
  EXPECT_GT(clusters, 20);
  EXPECT_GT(several, 10);
  // The persistent grid capped at 1 and 3 clusters (CTAs): each loops over several rows (blocks of
  // rows), its cluster's mbarrier phases and the warps' pair buffers wrap, the last block is short.
  struct Reset {
    ~Reset() { set_native_softmax_persistent_cap(0); }
  } reset;
  for (int64_t cap : {1, 3}) {
    set_native_softmax_persistent_cap(cap);
    for (const Case& cs : {Case{11, 50257, 0}, Case{9, 16385, 0}, Case{37, 1001, 0}, Case{13, 4097, 4100}, Case{1001, 7, 0}})
      for (const Dtypes& d : {kSame[0], kMixed[1]}) {
        SoftmaxProblem p = SoftmaxProblem::make(cs.rows, cs.cols, d.in);
        p.out = d.out;
        p.ld = cs.ld;
        for (const auto& c : native_softmax_configs(p))
          if (row(c) && native_softmax_device_check(c, p).empty())
            EXPECT_EQ(native_softmax_kernel_info(c, p).launch.grid, cap * c.cluster) << p.str() << " " << c.name();
        check_problem(p, true, seed++, row);
      }
  }
}

// The span kind (packed rows as one flat span, chunks of rows staged by the copy engine), on the
// rows it is offered for: short rows (2 .. 16 values, a lane or a few a row, in registers) and
// rows of 257 values to 2 KiB in packs, odd widths among them (rows start anywhere in a pack;
// x's last bytes past its last whole 16 element by element); bf16, fp16, fp32 (y of x's dtype),
// scales 1, 0.37, -1.5, 0, special rows; then with the persistent grid capped at 1 and 3 CTAs,
// so that each loops over many chunks, its stages and their mbarrier phases wrap and the last
// chunk is short.
TEST(SoftmaxNative, SpanKind) {
  REQUIRE_GPU();
  struct Case {
    int64_t rows, cols;
  };
  const Case cases[] = {{37, 1024}, {41, 511}, {130, 1001}, {3001, 7}, {5003, 2}, {700, 257}, {23, 999}, {3, 3},
                        {1, 11},    {300, 260}, {777, 16},  {2001, 5}, {9, 1023}, {1, 2}, {50003, 3}, {61, 512}};
  auto span = [](const NativeSoftmaxConfig& c) { return is_kind(c, SoftmaxKind::span); };
  uint64_t seed = 9000;
  int k = 0;
  for (const Case& cs : cases)
    for (const Dtypes& d : kSame) {
      SoftmaxProblem p = SoftmaxProblem::make(cs.rows, cs.cols, d.in);
      p.out = d.out;
      const float scales[] = {1.0f, 0.37f, -1.5f, 0.0f};
      p.scale = scales[k++ % 4];
      const int64_t rb = cs.cols * int64_t(size_of(d.in));
      if (cs.cols <= 16 || (cs.cols > 256 && rb <= 2048)) ASSERT_GT(count_kind(p, SoftmaxKind::span), 0) << p.str();
      EXPECT_EQ(check_problem(p, cs.rows > 1, seed++, span), 0);
    }
  struct Reset {
    ~Reset() { set_native_softmax_persistent_cap(0); }
  } reset;
  for (int64_t cap : {1, 3}) {
    set_native_softmax_persistent_cap(cap);
    // (each at least 3 chunks of rows: 7-40; rows 301 x 1001 fp32 (4 KiB) have no span config)
    for (const Case& cs : {Case{20001, 7}, Case{50003, 3}, Case{201, 511}, Case{301, 1001}, Case{30001, 16}})
      for (const Dtypes& d : {kSame[0], kSame[2]}) {
        SoftmaxProblem p = SoftmaxProblem::make(cs.rows, cs.cols, d.in);
        p.out = d.out;
        for (const auto& c : native_softmax_configs(p))
          if (span(c) && native_softmax_device_check(c, p).empty())
            EXPECT_EQ(native_softmax_kernel_info(c, p).launch.grid, cap * c.cluster) << p.str() << " " << c.name();
        EXPECT_EQ(check_problem(p, true, seed++, span), 0);
      }
  }
}

// The flat kind (packed rows of 2 .. 8 values, a lane the fewest whole rows that end on a 16-byte
// pack, a warp's tile transposed through shared memory): every width 2 .. 8, bf16 / fp16 / fp32,
// scales 1, 0.37, -1.5, 0, special rows; row counts that leave the last tile short (one lane a
// row there), that fill whole tiles, and fewer rows than one tile.
TEST(SoftmaxNative, FlatRows) {
  REQUIRE_GPU();
  auto flat = [](const NativeSoftmaxConfig& c) { return is_kind(c, SoftmaxKind::flat); };
  uint64_t seed = 9500;
  int k = 0;
  for (int64_t cols = 2; cols <= 8; ++cols)
    for (const Dtypes& d : kSame)
      for (int64_t rows : {int64_t(20001), int64_t(16384), int64_t(5)}) {
        SoftmaxProblem p = SoftmaxProblem::make(rows, cols, d.in);
        p.out = d.out;
        const float scales[] = {1.0f, 0.37f, -1.5f, 0.0f};
        p.scale = scales[k++ % 4];
        ASSERT_EQ(count_kind(p, SoftmaxKind::flat), 3) << p.str();
        EXPECT_EQ(check_problem(p, rows > 6, seed++, flat), 0);
      }
}

// The wide kind: 1-8 long rows (2^16 .. 2^20, odd ones, strided), every dtype pair, special
// rows; then with its grid capped at 1 and 3 CTAs, so that each CTA holds several slices (of
// the same and of different rows: the first in registers, the others re-read) and waits for
// rows whose other slices it published itself. The ring (stages > 0, rows of whole packs) runs in
// both: uncapped its slots hold every slice until its row is merged; capped, a row's slices span
// more steps than the ring has slots, so slots are taken before their rows complete and those
// slices are re-read from x at the end.
TEST(SoftmaxNative, WideFewLongRows) {
  REQUIRE_GPU();
  struct Case {
    int64_t rows, cols, ld;
  };
  const Case cases[] = {{1, 65536, 0},   {8, 65536, 0},  {1, 1048576, 0}, {3, 262147, 0},
                        {7, 100000, 0},  {2, 131071, 131080}, {1, 8192, 0}, {8, 16391, 0}};
  auto wide = [](const NativeSoftmaxConfig& c) { return is_kind(c, SoftmaxKind::wide); };
  uint64_t seed = 6000;
  int k = 0;
  for (const Case& cs : cases)
    for (const Dtypes& d : {kSame[0], kSame[1], kSame[2], kMixed[0], kMixed[1], kMixed[2]}) {
      if (cs.cols > 300000 && d.in != d.out) continue;  // host reference time
      SoftmaxProblem p = SoftmaxProblem::make(cs.rows, cs.cols, d.in);
      p.out = d.out;
      p.ld = cs.ld;
      const float scales[] = {1.0f, 0.37f, -1.5f};
      p.scale = scales[k++ % 3];
      ASSERT_GT(count_kind(p, SoftmaxKind::wide), 0) << p.str();
      check_problem(p, true, seed++, wide);
    }
  struct Reset {
    ~Reset() { set_native_softmax_persistent_cap(0); }
  } reset;
  for (int64_t cap : {1, 3}) {
    set_native_softmax_persistent_cap(cap);
    for (const Case& cs : {Case{7, 65536, 0}, Case{2, 100003, 0}, Case{1, 262144, 0}}) {
      SoftmaxProblem p = SoftmaxProblem::make(cs.rows, cs.cols, DType::bf16);
      for (const auto& c : native_softmax_configs(p))
        if (wide(c) && native_softmax_device_check(c, p).empty())
          EXPECT_EQ(native_softmax_kernel_info(c, p).launch.grid, cap) << p.str() << " " << c.name();
      check_problem(p, true, seed++, wide);
    }
  }
}

// The band kind (offered for fp32 x): 1-64 long rows of whole 16-byte packs (8192 .. 2^20
// columns, strided), fp32 into each output dtype, special rows; then with the grid capped at 1 and
// 3 CTAs (a CTA a third of a row or all of it), so that a CTA's pieces wrap its slots many times,
// its rows' stats wrap their 4 buffers (9 and 12 rows), chunks end inside a piece, and rows have
// fewer and more pieces than the 4 a thread holds in registers; and one 16-bit input (not
// offered: the template's other load path).
TEST(SoftmaxNative, BandRows) {
  REQUIRE_GPU();
  struct Case {
    int64_t rows, cols, ld;
  };
  // 2 x 2^22: 5 pieces a CTA on 132 SMs, 4 held in registers and one written from its slot
  const Case cases[] = {{1, 8192, 0},   {8, 65536, 0},      {3, 262144, 262152}, {1, 1048576, 0},
                        {64, 8192, 0}, {20, 32768, 32776}, {7, 100000, 0},      {2, 4194304, 0}};
  auto band = [](const NativeSoftmaxConfig& c) { return is_kind(c, SoftmaxKind::band); };
  uint64_t seed = 9000;
  int k = 0;
  for (const Case& cs : cases)
    for (DType out : {DType::fp32, DType::bf16, DType::fp16}) {
      SoftmaxProblem p = SoftmaxProblem::make(cs.rows, cs.cols, DType::fp32);
      p.out = out;
      p.ld = cs.ld;
      const float scales[] = {1.0f, 0.37f, -1.5f};
      p.scale = scales[k++ % 3];
      ASSERT_EQ(count_kind(p, SoftmaxKind::band), 1) << p.str();
      EXPECT_EQ(check_problem(p, true, seed++, band), 0);
    }
  struct Reset {
    ~Reset() { set_native_softmax_persistent_cap(0); }
  } reset;
  // capped: the offered config's two rows less its held pieces fit its slots
  // (4 x 40000 on one CTA: 6 pieces a row, 2 x 6 - 4 = all 8 slots)
  for (const auto& [cap, capped] : {std::pair{1, std::vector<Case>{{12, 8192, 0}, {4, 40000, 0}}},
                                    std::pair{3, std::vector<Case>{{9, 49152, 49160}, {3, 40000, 0}}}}) {
    set_native_softmax_persistent_cap(cap);
    for (const Case& cs : capped) {
      SoftmaxProblem p = SoftmaxProblem::make(cs.rows, cs.cols, DType::fp32);
      p.ld = cs.ld;
      ASSERT_EQ(count_kind(p, SoftmaxKind::band), 1) << p.str();
      for (const auto& c : native_softmax_configs(p))
        if (band(c)) {
          EXPECT_EQ(native_softmax_device_check(c, p), "") << p.str() << " " << c.name();
          EXPECT_EQ(native_softmax_kernel_info(c, p).launch.grid, cap) << p.str() << " " << c.name();
        }
      EXPECT_EQ(check_problem(p, true, seed++, band), 0);
    }
  }
  set_native_softmax_persistent_cap(0);
  // 16-bit x through the same kernel (run directly: the config is not offered for it)
  SoftmaxProblem p = SoftmaxProblem::make(8, 65536, DType::bf16);
  const NativeSoftmaxConfig c = NativeSoftmaxConfig::parse("band_v8_e32_t448_s8");
  ASSERT_EQ(native_softmax_device_check(c, p), "");
  const gpu_test::SoftmaxHostInput in = gpu_test::softmax_host_input(p, true, seed++);
  DeviceBuffer dx(in.x.size()), dy(size_t(p.elems()) * size_of(p.out));
  GT_CUDA(cudaMemcpy(dx.get(), in.x.data(), in.x.size(), cudaMemcpyHostToDevice));
  GT_CUDA(cudaMemset(dy.get(), 0xff, dy.bytes()));
  run_native_softmax(c, p, dx.get(), dy.get(), nullptr);
  GT_CUDA(cudaDeviceSynchronize());
  std::vector<uint8_t> y(dy.bytes());
  GT_CUDA(cudaMemcpy(y.data(), dy.get(), y.size(), cudaMemcpyDeviceToHost));
  gpu_test::SoftmaxOutputChecks checks(p, in);
  checks.add(c.name(), std::move(y));
  EXPECT_EQ(checks.finish(), 0);
}
