// The native softmax kernels against the float64 host reference: every config for every shape
// of {1, 7, 1000} x {1, 31, 32, 33, 1024, 4097, 65536, 262147}, packed and strided rows, scale
// 1 and not, bf16 / fp16 / fp32 (and mixed) in and out, and rows of NaN, +-Inf and all -Inf.
// Inputs are random (never constant), outputs poisoned (NaN bits) before every run, and the
// padding between cols and ld must stay poisoned. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/native/softmax.hpp"
#include "core/cuda.hpp"
#include "support/host_softmax.hpp"
#include "support/gpu.hpp"

using namespace gemmtune;
using namespace gemmtune::native;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

const int64_t kRows[] = {1, 7, 1000};
const int64_t kCols[] = {1, 31, 32, 33, 1024, 4097, 65536, 262147};

struct Dtypes {
  DType in, out;
};
const Dtypes kSame[] = {{DType::bf16, DType::bf16}, {DType::fp16, DType::fp16}, {DType::fp32, DType::fp32}};
const Dtypes kMixed[] = {{DType::bf16, DType::fp32}, {DType::fp32, DType::bf16}, {DType::fp16, DType::fp32}};

// Overwrites row r of `v` (packed [rows, cols] doubles) with special values, by r % 6:
//   0 finite (left alone)   1 one NaN      2 one +Inf        3 all -Inf
//   4 -Inf at every other column, finite elsewhere (column 0 stays finite)
//   5 one -Inf and one large finite value (1e4: every other entry underflows to 0)
void make_special(std::vector<double>& v, int64_t cols, int64_t r, std::mt19937_64& rng) {
  double* row = &v[size_t(r * cols)];
  const int64_t at = int64_t(rng() % uint64_t(cols));
  switch (r % 6) {
    case 1: row[at] = kNaN; break;
    case 2: row[at] = kInf; break;
    case 3: for (int64_t c = 0; c < cols; ++c) row[c] = -kInf; break;
    case 4: for (int64_t c = 1; c < cols; c += 2) row[c] = -kInf; break;
    case 5:
      row[at] = -kInf;
      row[(at + 1) % cols] = 1e4;
      break;
    default: break;
  }
}

// Runs every native config on one problem; returns the number of failing configs.
int check_problem(const SoftmaxProblem& p, bool specials, uint64_t seed) {
  SCOPED_TRACE(p.str() + (specials ? " (special rows)" : ""));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-8.0, 8.0);
  std::vector<double> values(size_t(p.rows * p.cols));
  for (double& v : values) v = dist(rng);
  if (specials)
    for (int64_t r = 0; r < p.rows; ++r) make_special(values, p.cols, r, rng);

  // x on the host, padding NaN: a kernel that reads it makes its row NaN.
  const int64_t ld = p.row_stride();
  std::vector<uint8_t> x(size_t(p.elems()) * size_of(p.in));
  for (int64_t r = 0; r < p.rows; ++r)
    for (int64_t c = 0; c < ld; ++c)
      host::store(p.in, x.data(), r * ld + c, c < p.cols ? values[size_t(r * p.cols + c)] : kNaN);
  const host::SoftmaxRef ref = host::host_softmax(p, x.data());

  DeviceBuffer dx(x.size()), dy(size_t(p.elems()) * size_of(p.out));
  GT_CUDA(cudaMemcpy(dx.get(), x.data(), x.size(), cudaMemcpyHostToDevice));
  Stream stream;
  std::vector<uint8_t> y(dy.bytes());
  int failed = 0;
  for (const NativeSoftmaxConfig& cfg : native_softmax_configs(p)) {
    GT_CUDA(cudaMemsetAsync(dy.get(), 0xff, dy.bytes(), stream.get()));  // NaN in every dtype
    run_native_softmax(cfg, p, dx.get(), dy.get(), stream.get());
    stream.sync();
    GT_CUDA(cudaMemcpy(y.data(), dy.get(), y.size(), cudaMemcpyDeviceToHost));
    const host::SoftmaxCheck res = host::softmax_compare(p, x.data(), y.data(), ref);
    bool pad_ok = true;
    const size_t es = size_of(p.out);
    for (int64_t r = 0; r < p.rows && pad_ok; ++r)
      for (size_t b = size_t(r * ld + p.cols) * es; b < size_t((r + 1) * ld) * es; ++b)
        if (y[b] != 0xff) {
          pad_ok = false;
          break;
        }
    EXPECT_TRUE(res.ok) << cfg.name() << ": " << res.reason;
    EXPECT_TRUE(pad_ok) << cfg.name() << ": wrote into the padding between cols and ld";
    failed += !(res.ok && pad_ok);
  }
  return failed;
}

// Strided rows: ld past cols, a multiple of 8 (so vector configs run, with tails).
int64_t padded(int64_t cols) { return (cols + 1 + 7) / 8 * 8; }

}  // namespace

TEST(SoftmaxNative, EveryConfigEveryShape) {
  REQUIRE_GPU();
  uint64_t seed = 1;
  for (int64_t rows : kRows)
    for (int64_t cols : kCols) {
      const bool big = rows * cols > (int64_t(1) << 26);
      for (const Dtypes& d : kSame) {
        if (big && d.in != DType::bf16) continue;  // host reference time: one dtype at 262M elements
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
