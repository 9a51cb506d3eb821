// The cutedsl backend's softmax candidates: our CuTe DSL softmax (python/gemmtune/cutedsl/
// softmax_sm90.py), compiled ahead of time by the CuTe DSL toolchain (src/compile/python_worker.hpp;
// the worker routes params with "op": "softmax" to softmax_compile.py),
// loaded with dlopen and run through its C ABI (python/gemmtune/cutedsl/softmax_abi.h).
//
// Kernels (docs/cutedsl.md "Softmax"): one pass, the row in registers: `threads` threads per CTA,
// `tpr` threads per row (threads / tpr rows per CTA), each thread `chunks` accesses of `vec`
// consecutive elements; with a cluster of 2..16 CTAs one row is split across the cluster and the
// CTAs merge their (max, sum) through distributed shared memory (16: a non-portable cluster size,
// allowed by the module loader on every kernel). The online kind reads the row twice in tiles of
// tpr * chunks * vec columns (any row length): with one CTA per row, or (the cluster re-read kind,
// rows of 65536+ columns) with the row's tiles dealt to a cluster of 8 or 16 CTAs, which exchange
// their (max, sum) as above, so few rows are in flight and pass 2 re-reads x from L2.
//
// The packed kind (one pass, 16-bit inputs, rows of 16384+ columns, one row per CTA) keeps x packed
// in registers (two values a register: up to 128 values a thread, twice the fp32 kind's) and
// computes exp twice (sum pass, output pass) with fewer instructions per element (packed max,
// one FFMA + ex2 per exp, pairwise conversion), so that a CTA holds as many bytes as the fp32
// winners (64 KiB: 256 threads x 128 bf16; 128 KiB: 512 x 128 or 1024 x 64, one CTA an SM) for
// long bf16 / fp16 rows.
//
// Virtual columns (`virt`, suffix "_u"; the one-pass kinds, fp32 and packed): rows that do not
// start on a 16-byte pack (ld % (16 / input bytes) != 0: odd packed widths such as 50257 or 4097,
// odd ld). Row r is read as the 16-byte packs of its aligned span, which starts a = (r ld) % vec
// elements before the row: the partial head and tail packs are loaded whole (their foreign
// elements, of the neighbour rows or the padding, masked to -Inf, never stored; a pack past the
// end of x element by element), whole packs of y stored by 16-byte stores, the partial ones
// element by element. A config then holds rows of cluster x cols_per_cta - (vec - 1) columns.
// Offered only where the aligned kinds are narrowed to vec < 16 bytes (softmax_vec).
//
// A config's id is canonical: "p32_t256_v8x4" (32 threads per row, 256 threads, 4 accesses of 8),
// "p512_t512_v8x8_c8" (a cluster of 8), "o_p1024_t1024_v8x2" (online), "o_p256_t256_v8x4_c16"
// (cluster re-read), "x_p256_t256_v8x16_c8" (packed), "x_p256_t256_v8x25_c2_u" (packed, virtual
// columns). The artifact depends on
// the config, the dtypes and the sources (their digest travels in the params), not on rows, cols,
// ld or scale, so one artifact serves every problem whose rows the config holds.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.hpp"
#include "compile/toolchain.hpp"
#include "gemmtune/softmax.hpp"
#include "../../../python/gemmtune/cutedsl/softmax_abi.h"

namespace gemmtune::cutedsl {

struct SoftmaxConfig {
  int vec = 8;        // elements per access (1, 2, 4, 8; at most 16 bytes of the input)
  int chunks = 4;     // accesses per thread
  int tpr = 32;       // threads per row (a power of two dividing threads)
  int threads = 256;  // threads per CTA
  int cluster = 1;    // CTAs per row (1, 2, 4, 8, 16; > 1: tpr == threads)
  bool online = false;
  bool packed = false;  // one pass, x kept packed (16-bit inputs; not with online)
  bool virt = false;    // one pass in virtual columns: any ld (rows need not start on a vec pack)

  int rows_per_cta() const { return threads / tpr; }
  int values() const { return chunks * vec; }  // values a thread keeps (fp32; packed: 16-bit pairs)
  int64_t cols_per_cta() const { return int64_t(tpr) * chunks * vec; }
  // Longest row the config holds (the online kind: any; virt: the span's first vec - 1 columns
  // may belong to the row before).
  int64_t max_cols() const;
  std::string id() const;
  std::string name() const { return id(); }
  // Throws Error naming the id when it is not the canonical id of a config in range.
  static SoftmaxConfig parse(std::string_view id);
  // Empty when the structure is valid for an input of `in_bytes` bytes, else why not.
  std::string invalid(int in_bytes) const;
  // Empty when this config can run p (dtypes, sizes, row length, vector width vs ld), else why not.
  std::string cannot_run(const SoftmaxProblem& p) const;
  bool operator==(const SoftmaxConfig&) const = default;
};

// Problem-level rules (no config): dtypes and sizes the kernels take.
Verdict softmax_problem_verdict(const SoftmaxProblem& p);
// The widest vector (elements per access) p allows: 16 bytes of the input dtype, halved until
// it divides the row stride.
int softmax_vec(const SoftmaxProblem& p);
// Every config that can run p and is worth compiling (before ranking), in a stable order.
std::vector<SoftmaxConfig> softmax_valid_configs(const SoftmaxProblem& p);
// The ranked candidates for p: at most max_configs, the best of each kind (rows per CTA > 1,
// one CTA per row, cluster, online, cluster re-read) kept in. One-pass configs when the row fits
// 16 CTAs' registers (524288 columns of 2 bytes), else online ones; cluster re-read ones for rows
// of 65536+ columns. Plus, ranked apart and on top of those, at most max_configs / 2 + 2 packed
// ones (16-bit inputs, rows of 16384 to 524288 columns). Where ld is not a multiple of a 16-byte
// pack, the one-pass kinds also in virtual columns at 16-byte vectors (ranked with the others:
// the narrower aligned configs cost more).
// `admit` (may be empty) restricts the configs ranked (load-only: those in the store).
std::vector<SoftmaxConfig> softmax_configs(const SoftmaxProblem& p, int max_configs,
                                           const std::function<bool(const SoftmaxConfig&)>& admit = {});
// A rough relative cost (lower is better) that ranks the configs of p.
double softmax_cost(const SoftmaxConfig& c, const SoftmaxProblem& p);
constexpr int kDefaultSoftmaxMaxConfigs = 12;

// The files (relative to the python dir) that determine a softmax artifact besides its params
// and the toolchain (softmax_compile.py SOURCES), and their digest (16 hex digits, computed as
// softmax_compile.sources_digest does). Throws Error when a file is missing.
extern const char* const kSoftmaxSources[7];
std::string softmax_sources_digest(const std::filesystem::path& python_dir);

// The compile request's params (softmax_compile.py): {"op": "softmax", dtypes, the config,
// "src": digest}. params(...).dump() is also the config text the .so reports.
nlohmann::json softmax_params(const SoftmaxConfig& c, const SoftmaxProblem& p, const std::string& digest);

// The entry points of one loaded softmax instance (loaded as Library is: from the verified bytes,
// after its runtime library; never unloaded; one load per key per process).
struct SoftmaxLibrary {
  std::string key;
  gt_cutedsl_softmax_config_fn config = nullptr;
  gt_cutedsl_softmax_max_cols_fn max_cols = nullptr;
  gt_cutedsl_softmax_can_implement_fn can_implement = nullptr;
  gt_cutedsl_softmax_run_fn run = nullptr;
  gt_cutedsl_softmax_status_text_fn status_text = nullptr;

  // Throws Error when the bytes cannot be loaded, a symbol is missing, the ABI version differs,
  // or the instance's config text is not `expect_config`.
  static std::shared_ptr<const SoftmaxLibrary> open(const compile::Built& built, const std::string& expect_config);
};

// The arguments of one run of `p` (pointers may be null for can_implement).
GtCutedslSoftmaxArgs softmax_args(const SoftmaxProblem& p, int device, const void* x, void* y);

// The compile job of config `c` for `p` (toolchain "cutedsl").
compile::Job softmax_job(const SoftmaxConfig& c, const SoftmaxProblem& p, const std::string& digest);

}  // namespace gemmtune::cutedsl
