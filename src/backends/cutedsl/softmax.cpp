// The cutedsl backend's softmax candidates (see softmax.hpp): config space, params, the loader
// of one softmax .so, precompile, and the SoftmaxBackend.
//
// Candidates: softmax_configs(problem) (at most EngineOptions::max_configs, default
// 12); in load-only mode (a copied artifact store, no CuTe DSL here) only configs whose artifact
// is in the store. prepare(): compile (store hit or a worker), load the .so, ask its
// can_implement for this problem. run(): fill the arguments, call the entry point; a non-OK
// status throws Error with the instance's status text. Runs keep no per-run state in the
// instance, so runs on different streams may overlap.
#include "backends/cutedsl/softmax.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "backends/cutedsl/cutedsl_backend.hpp"
#include "backends/kernel_library.hpp"
#include "compile/source_hash.hpp"
#include "compile/artifact_cache.hpp"
#include "gemmtune/error.hpp"
#include "store/sha256.hpp"
#include "store/shared_object.hpp"

namespace gemmtune {
namespace cutedsl {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int64_t kMax32 = 2147483647;
// rows past this would overflow the kernel's 32-bit grid arithmetic (rows + rows per CTA - 1).
constexpr int64_t kMaxRows = kMax32 - 1024;
// Registers: a thread keeps about 2 registers per value (the fp32 values and the loaded input,
// ptxas -v: 64 values -> 127-128 registers, 32 -> 63-64); the CTA must fit the SM's 65536.
constexpr int64_t kMaxValuesTimesThreads = 32768;
constexpr int kMaxValues = 64;
// The packed kind: 16-bit pairs (one register each) of up to 128 values a thread, more than 32
// (fewer: the fp32 kind holds them); ptxas (sm_90a): 128 values -> 96 registers at 128 threads,
// 128 at 256 and 512 threads; 64 values -> 64 at 256 to 1024 threads; no spills. So values x
// threads <= 65536 (the SM's registers: one CTA an SM past 32768, as the fp32 kind's 128 KiB
// CTAs that win at 65536 fp32 columns), and such CTAs in clusters of at most 8 (16 would need 16
// SMs of one GPC at once).
constexpr int kMaxPackedValues = 128;
constexpr int kMinPackedValues = 33;
constexpr int64_t kMaxPackedValuesTimesThreads = 65536;
// Offered past 4096 columns, where a CTA of 128 threads holds 33+ values a thread (at 4096: 32, which
// the fp32 kind holds); the H200 measured it ahead of the fp32 kind at 16385 and 50257 bf16 columns.
constexpr int kPackedMinCols = 4097;
constexpr int kClusterMinCols = 16384;  // shorter rows fit one CTA: no cluster candidates
constexpr int kCluster16MinCols = 65536;  // one-pass clusters of 16 (non-portable) from here
constexpr int kRereadMinCols = 65536;     // the cluster re-read kind from here
constexpr int kMaxCluster = 16;
constexpr int kSms = 132;               // H100 / H200 SXM: only ranks the configs
// L2 bytes the re-read kind may keep in flight (x of the rows its resident CTAs work on) and
// still expect pass 2 to hit L2 (H200: 60 MB in two partitions; kept well under).
constexpr double kRereadL2Bytes = 24.0 * 1024 * 1024;

bool pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
bool softmax_dtype(DType t) { return t == DType::bf16 || t == DType::fp16 || t == DType::fp32; }

// Which kind a config is, for keeping each represented among the ranked candidates.
int kind_of(const SoftmaxConfig& c) {
  if (c.packed) return 5;
  if (c.online) return c.cluster > 1 ? 4 : 3;
  if (c.cluster > 1) return 2;
  return c.rows_per_cta() > 1 ? 0 : 1;
}

}  // namespace

// ---- SoftmaxConfig ------------------------------------------------------------------------------

int64_t SoftmaxConfig::max_cols() const {
  return online ? kMax32 : int64_t(cluster) * cols_per_cta() - (virt ? vec - 1 : 0);
}

std::string SoftmaxConfig::id() const {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%sp%d_t%d_v%dx%d", online ? "o_" : packed ? "x_" : "", tpr, threads, vec, chunks);
  std::string s = buf;
  if (cluster > 1) s += "_c" + std::to_string(cluster);
  if (virt) s += "_u";
  return s;
}

SoftmaxConfig SoftmaxConfig::parse(std::string_view id) {
  const std::string text(id);
  SoftmaxConfig c;
  c.virt = text.size() > 2 && text.ends_with("_u");
  const std::string head = c.virt ? text.substr(0, text.size() - 2) : text;
  const bool online = text.rfind("o_", 0) == 0;
  const bool packed = text.rfind("x_", 0) == 0;
  const char* body = head.c_str() + (online || packed ? 2 : 0);
  int used = 0, used_c = 0;
  bool ok = std::sscanf(body, "p%d_t%d_v%dx%d%n", &c.tpr, &c.threads, &c.vec, &c.chunks, &used) == 4;
  if (ok && body[used] != '\0') {
    ok = std::sscanf(body + used, "_c%d%n", &c.cluster, &used_c) == 1 && body[used + used_c] == '\0';
  }
  c.online = online;
  c.packed = packed;
  if (!ok)
    GT_THROW("cutedsl softmax config '" + text + "': expected [o_|x_]p<TPR>_t<THREADS>_v<VEC>x<CHUNKS>[_c<CLUSTER>][_u]");
  if (std::string why = c.invalid(1); !why.empty()) GT_THROW("cutedsl softmax config '" + text + "': " + why);
  if (c.id() != text) GT_THROW("cutedsl softmax config '" + text + "': not in canonical form (" + c.id() + ")");
  return c;
}

std::string SoftmaxConfig::invalid(int in_bytes) const {
  if (!(vec == 1 || vec == 2 || vec == 4 || vec == 8) || vec * in_bytes > 16)
    return "vec " + std::to_string(vec) + " (1, 2, 4 or 8 elements, at most 16 bytes)";
  if (chunks < 1 || chunks > 128) return "chunks " + std::to_string(chunks) + " not in 1..128";
  if (threads % 32 || threads < 32 || threads > 1024)
    return "threads " + std::to_string(threads) + " not a multiple of 32 in 32..1024";
  if (!pow2(tpr) || tpr > threads || threads % tpr)
    return "tpr " + std::to_string(tpr) + " is not a power of two dividing threads " + std::to_string(threads);
  if (cluster < 1 || cluster > kMaxCluster || !pow2(cluster))
    return "cluster " + std::to_string(cluster) + " not in 1, 2, 4, 8, 16";
  if (cluster > 1 && tpr != threads) return "a cluster needs one row per CTA (tpr == threads)";
  if (virt && (online || vec < 2)) return "virtual columns (_u): a one-pass kind with vec >= 2";
  if (packed) {
    if (online) return "packed is a one-pass kind (not online)";
    if (in_bytes > 2) return "packed needs a 16-bit input";
    if (vec < 2) return "packed needs pairs (vec >= 2)";
    if (tpr != threads) return "packed keeps one row per CTA (tpr == threads)";
    if (values() < kMinPackedValues || values() > kMaxPackedValues)
      return "packed: " + std::to_string(values()) + " values a thread (" + std::to_string(kMinPackedValues) + ".." +
             std::to_string(kMaxPackedValues) + ")";
    if (int64_t(values()) * threads > kMaxPackedValuesTimesThreads)
      return "packed: " + std::to_string(values()) + " values x " + std::to_string(threads) +
             " threads need more than the SM's 65536 registers";
    if (int64_t(values()) * threads > kMaxValuesTimesThreads && cluster > 8)
      return "packed: CTAs of one an SM in a cluster of 16 (16 SMs of one GPC at once)";
    return {};
  }
  if (values() > kMaxValues)
    return std::to_string(values()) + " values a thread (at most " + std::to_string(kMaxValues) + ")";
  if (int64_t(values()) * threads > kMaxValuesTimesThreads)
    return std::to_string(values()) + " values x " + std::to_string(threads) +
           " threads need more than the SM's 65536 registers";
  return {};
}

std::string SoftmaxConfig::cannot_run(const SoftmaxProblem& p) const {
  if (Verdict v = softmax_problem_verdict(p); !v) return v.reason;
  if (std::string why = invalid(int(size_of(p.in))); !why.empty()) return why;
  if (p.cols > max_cols())
    return "rows of " + std::to_string(p.cols) + " columns are longer than the " + std::to_string(max_cols()) +
           " this config holds";
  if (p.row_stride() % vec && !virt)
    return "ld " + std::to_string(p.row_stride()) + " is not a multiple of the vector width " + std::to_string(vec);
  return {};
}

// ---- the config space ---------------------------------------------------------------------------

Verdict softmax_problem_verdict(const SoftmaxProblem& p) {
  try {
    p.validate();
  } catch (const Error& e) {
    return Verdict::no(e.message());
  }
  if (!softmax_dtype(p.in) || !softmax_dtype(p.out))
    return Verdict::no(std::string("dtypes ") + to_string(p.in) + "->" + to_string(p.out) +
                       ": bf16, fp16 or fp32 only");
  if (p.rows > kMaxRows) return Verdict::no("more than " + std::to_string(kMaxRows) + " rows");
  if (p.cols > kMax32) return Verdict::no("more than 2^31 - 1 columns");
  return Verdict::yes();
}

int softmax_vec(const SoftmaxProblem& p) {
  int v = 16 / int(size_of(p.in));
  while (v > 1 && p.row_stride() % v) v /= 2;
  return v;
}

std::vector<SoftmaxConfig> softmax_valid_configs(const SoftmaxProblem& p) {
  std::vector<SoftmaxConfig> out;
  if (!softmax_problem_verdict(p)) return out;
  const int aligned_vec = softmax_vec(p);  // the widest vector dividing ld
  auto add = [&](const SoftmaxConfig& c) {
    if (c.cannot_run(p).empty() && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  };
  // The one-pass kinds at vector width vec, in virtual columns or not. A row in virtual columns
  // spans up to cols + vec - 1 of them (its first pack may start vec - 1 elements early).
  auto add_one_pass = [&](int vec, bool virt) {
    const int64_t span = p.cols + (virt ? vec - 1 : 0);
    // Every (cluster, threads, threads per row) whose row slice fits the registers and whose
    // threads are at least half busy (one thread per row is always allowed: tiny rows).
    for (int cluster : {1, 2, 4, 8, 16}) {
      if (cluster > 1 && p.cols < kClusterMinCols) continue;
      if (cluster > 8 && p.cols < kCluster16MinCols) continue;
      for (int threads : {128, 256, 512, 1024}) {
        for (int tpr = cluster > 1 ? threads : 1; tpr <= threads; tpr *= 2) {
          const int64_t per = int64_t(cluster) * tpr * vec;
          const int64_t chunks = ceil_div(span, per);
          if (chunks * vec > kMaxValues) continue;
          const double util = double(p.cols) / double(per * chunks);
          if (util < 0.5 && !(cluster == 1 && tpr == 1)) continue;
          if (threads > 128 && threads / tpr > p.rows) continue;  // rows per CTA past the problem's rows
          SoftmaxConfig c{vec, int(chunks), tpr, threads, cluster, false};
          c.virt = virt;
          add(c);
        }
      }
    }
    // Packed (16-bit inputs, rows past 4096 columns): one row per CTA, the CTAs (a power of two)
    // that hold the row with 33..128 values a thread (the threads then at least half busy); rows
    // up to 524288 columns (16 CTAs of 256 threads), as the other one-pass kinds.
    if (size_of(p.in) == 2 && vec >= 2 && p.cols >= kPackedMinCols) {
      for (int cluster : {1, 2, 4, 8, 16}) {
        if (cluster > 1 && p.cols < kClusterMinCols) continue;
        if (cluster > 8 && p.cols < kCluster16MinCols) continue;
        for (int threads : {128, 256, 512, 1024}) {
          const int64_t chunks = ceil_div(span, int64_t(cluster) * threads * vec);
          if (chunks * vec < kMinPackedValues || chunks * vec > kMaxPackedValues) continue;
          SoftmaxConfig c{vec, int(chunks), threads, threads, cluster, false};
          c.packed = true;
          c.virt = virt;
          if (c.invalid(int(size_of(p.in))).empty()) add(c);
        }
      }
    }
  };
  add_one_pass(aligned_vec, false);
  // Rows that do not start on a 16-byte pack: the one-pass kinds in virtual columns too, with
  // 16-byte accesses (the aligned configs above have narrower ones).
  if (const int full = 16 / int(size_of(p.in)); aligned_vec < full) add_one_pass(full, true);
  // Online, one CTA per row: only for rows no one-pass config holds (they read x twice from DRAM
  // when many rows are in flight). Tiles of 8 to 32 values a thread.
  const bool one_pass = !out.empty();
  if (!one_pass) {
    for (int threads : {256, 512, 1024})
      for (int values : {8, 16, 32}) {
        if (values < aligned_vec) continue;
        add({aligned_vec, values / aligned_vec, threads, threads, 1, true});
      }
  }
  // Cluster re-read (online with a cluster): long rows; the row's tiles dealt to 8 or 16 CTAs,
  // few rows in flight, so pass 2 re-reads x from L2. Tiles of 32 values a thread; every CTA
  // gets at least two tiles (else the one-pass cluster kernel does the same in registers).
  if (p.cols >= kRereadMinCols) {
    for (int cluster : {8, 16})
      for (int threads : {128, 256, 512}) {
        const int values = 32;
        if (values < aligned_vec) continue;
        const SoftmaxConfig c{aligned_vec, values / aligned_vec, threads, threads, cluster, true};
        if (ceil_div(p.cols, c.cols_per_cta()) < 2 * cluster) continue;
        add(c);
      }
  }
  return out;
}

double softmax_cost(const SoftmaxConfig& c, const SoftmaxProblem& p) {
  // Registers per thread (about two per value, at least 32, granules of 8; packed: the ptxas
  // counts, one per value, 128 at most) -> CTAs per SM.
  const int64_t regs = c.packed ? (c.values() <= 64 ? 64 : c.threads <= 128 ? 96 : 128)
                                : std::max<int64_t>(32, (2 * c.values() + 8 + 7) / 8 * 8);
  const int64_t ctas_per_sm =
      std::max<int64_t>(1, std::min<int64_t>({65536 / (regs * c.threads), 2048 / c.threads, 32}));
  // Bytes each SM has in flight right after the loads: want >= 32 KiB (H200: 4.8 TB/s x ~1 us
  // over 132 SMs).
  const double inflight = double(ctas_per_sm * c.threads) * c.values() * double(size_of(p.in));
  double cost = 1.0;
  if (inflight < 32768) cost += 32768 / inflight - 1;
  // Accesses narrower than 16 bytes (rows not on 16-byte packs, but in virtual columns): more
  // load and store instructions for the same bytes.
  if (c.vec * size_of(p.in) < 16) cost += 0.5;
  // A CTA alone on its SM leaves the memory idle while it reduces and stores.
  if (ctas_per_sm == 1) cost += 0.3;
  else if (ctas_per_sm == 2) cost += 0.1;
  // Masked values: threads that hold nothing.
  const int64_t span = c.online ? ceil_div(p.cols, c.cols_per_cta()) * c.cols_per_cta() : c.max_cols();
  cost += 0.5 * (double(span) / double(p.cols) - 1);
  // Cluster exchanges (16: non-portable, placement within a GPC); the online kind reads x twice:
  // from DRAM with one CTA per row, from L2 in a cluster while the rows in flight fit in it.
  if (c.cluster > 1) cost += 0.05 * std::log2(double(c.cluster));
  if (c.online && c.cluster == 1) cost += 1.0;
  if (c.online && c.cluster > 1) {
    const double rows_in_flight = double(kSms * ctas_per_sm) / c.cluster;
    const double l2 = rows_in_flight * double(p.cols) * double(size_of(p.in));
    cost += l2 <= kRereadL2Bytes ? 0.1 : 1.0;
    // Tiles dealt unevenly over the cluster.
    const int64_t tiles = ceil_div(p.cols, c.cols_per_cta());
    cost += 0.5 * (double(ceil_div(tiles, c.cluster) * c.cluster) / double(tiles) - 1);
  }
  // The last wave.
  const double ctas = double(ceil_div(p.rows, c.rows_per_cta())) * c.cluster;
  const double waves = ctas / double(kSms * ctas_per_sm);
  cost += 0.5 * (std::ceil(waves) / waves - 1);
  return cost;
}

namespace {

using Ranked = std::vector<std::pair<double, SoftmaxConfig>>;

// The cheapest max_configs of ranked (sorted by cost), the best of each kind first.
std::vector<SoftmaxConfig> pick_configs(const Ranked& ranked, int max_configs);

}  // namespace

std::vector<SoftmaxConfig> softmax_configs(const SoftmaxProblem& p, int max_configs,
                                           const std::function<bool(const SoftmaxConfig&)>& admit) {
  // The packed kind is ranked apart and comes on top of the others (at most max_configs / 2 + 2),
  // so that adding it leaves the other kinds' candidates as they were.
  Ranked ranked, packed;
  for (const SoftmaxConfig& c : softmax_valid_configs(p))
    if (!admit || admit(c)) (c.packed ? packed : ranked).emplace_back(softmax_cost(c, p), c);
  auto by_cost = [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second.id() < b.second.id();
  };
  std::stable_sort(ranked.begin(), ranked.end(), by_cost);
  std::stable_sort(packed.begin(), packed.end(), by_cost);
  std::vector<SoftmaxConfig> out = pick_configs(ranked, max_configs);
  const std::vector<SoftmaxConfig> more = pick_configs(packed, max_configs <= 0 ? 0 : max_configs / 2 + 2);
  if (more.empty()) return out;
  // Returned in cost order (ties: packed after the others).
  Ranked all;
  for (const SoftmaxConfig& c : out) all.emplace_back(softmax_cost(c, p), c);
  for (const SoftmaxConfig& c : more) all.emplace_back(softmax_cost(c, p), c);
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  out.clear();
  for (auto& [cost, c] : all) out.push_back(c);
  return out;
}

namespace {

std::vector<SoftmaxConfig> pick_configs(const Ranked& ranked, int max_configs) {
  if (max_configs <= 0 || int(ranked.size()) <= max_configs) {
    std::vector<SoftmaxConfig> out;
    for (auto& [cost, c] : ranked) out.push_back(c);
    return out;
  }
  // The best of each kind first, then the cheapest of the rest; returned in cost order.
  std::vector<bool> take(ranked.size(), false);
  std::set<int> kinds;
  int n = 0;
  for (size_t i = 0; i < ranked.size() && n < max_configs; ++i)
    if (kinds.insert(kind_of(ranked[i].second)).second) take[i] = true, ++n;
  for (size_t i = 0; i < ranked.size() && n < max_configs; ++i)
    if (!take[i]) take[i] = true, ++n;
  std::vector<SoftmaxConfig> out;
  for (size_t i = 0; i < ranked.size(); ++i)
    if (take[i]) out.push_back(ranked[i].second);
  return out;
}

}  // namespace

// ---- params and sources ------------------------------------------------------------------------

const char* const kSoftmaxSources[7] = {"gemmtune/cutedsl/softmax_sm90.py",  "gemmtune/cutedsl/softmax_compile.py",
                                        "gemmtune/cutedsl/softmax_shim.cpp", "gemmtune/cutedsl/softmax_abi.h",
                                        "gemmtune/cutedsl/compile.py",       "gemmtune/cutedsl/runtime.cpp",
                                        "gemmtune/cutedsl/shim_common.h"};

std::string softmax_sources_digest(const fs::path& python_dir) {
  SourcesHash sources = hash_sources(python_dir, kSoftmaxSources);  // every one required
  GT_CHECK(!sources.missing,
           "cutedsl: softmax sources not found: " + sources.missing->string() + " (set compile.python_dir / $GEMMTUNE_PYTHON_DIR)");
  return sources.hex.substr(0, 16);
}

json softmax_params(const SoftmaxConfig& c, const SoftmaxProblem& p, const std::string& digest) {
  return {{"op", "softmax"},      {"in_dtype", to_string(p.in)}, {"out_dtype", to_string(p.out)},
          {"vec", c.vec},         {"chunks", c.chunks},          {"tpr", c.tpr},
          {"threads", c.threads}, {"cluster", c.cluster},        {"online", c.online},
          {"packed", c.packed},   {"virt", c.virt},              {"src", digest}};
}

GtCutedslSoftmaxArgs softmax_args(const SoftmaxProblem& p, int device, const void* x, void* y) {
  GtCutedslSoftmaxArgs a{};
  a.abi_version = GT_CUTEDSL_SOFTMAX_ABI_VERSION;
  a.device = device < 0 ? 0 : device;
  a.rows = p.rows, a.cols = p.cols, a.ld = p.row_stride();
  a.x = x, a.y = y;
  a.scale = p.scale;
  return a;
}

// ---- SoftmaxLibrary -----------------------------------------------------------------------------

std::shared_ptr<const SoftmaxLibrary> SoftmaxLibrary::open(const compile::Built& built, const std::string& expect_config) {
  return open_instance<SoftmaxLibrary>(built, expect_config, GT_CUTEDSL_SOFTMAX_ABI_VERSION, "cutedsl: softmax artifact",
                                       [](void* h, SoftmaxLibrary& lib) {
    constexpr const char* kWho = "cutedsl";
    const std::string& key = lib.key;
    lib.config = dlsym_as<gt_cutedsl_softmax_config_fn>(h, "gt_cutedsl_softmax_config", kWho, key);
    lib.max_cols = dlsym_as<gt_cutedsl_softmax_max_cols_fn>(h, "gt_cutedsl_softmax_max_cols", kWho, key);
    lib.can_implement = dlsym_as<gt_cutedsl_softmax_can_implement_fn>(h, "gt_cutedsl_softmax_can_implement", kWho, key);
    lib.run = dlsym_as<gt_cutedsl_softmax_run_fn>(h, "gt_cutedsl_softmax_run", kWho, key);
    lib.status_text = dlsym_as<gt_cutedsl_softmax_status_text_fn>(h, "gt_cutedsl_softmax_status_text", kWho, key);
    return dlsym_as<gt_cutedsl_softmax_abi_version_fn>(h, "gt_cutedsl_softmax_abi_version", kWho, key)();
  });
}

compile::Job softmax_job(const SoftmaxConfig& c, const SoftmaxProblem& p, const std::string& digest) {
  return {"cutedsl", "softmax " + c.id() + " (" + to_string(p.in) + " -> " + to_string(p.out) + ")", {},
          softmax_params(c, p, digest)};
}

// ---- the backend --------------------------------------------------------------------------------

namespace {

constexpr const char* kName = "cutedsl";

class CutedslSoftmaxCandidate final : public detail::CandidateFor<SoftmaxOp> {
 public:
  CutedslSoftmaxCandidate(int device, const SoftmaxProblem& p, const SoftmaxConfig& c, const std::string& digest)
      : device_(device), p_(p), c_(c), digest_(digest), params_(softmax_params(c, p, digest)) {}

  std::string backend() const override { return kName; }
  std::string id() const override { return c_.id(); }
  std::string name() const override { return c_.name(); }

  std::vector<compile::Job> jobs() const override { return {softmax_job(c_, p_, digest_)}; }

  void prepare(std::span<const compile::Built> built) override {
    GT_CHECK(built.size() == 1, "cutedsl: softmax " + id() + ": prepare expects one artifact");
    auto lib = SoftmaxLibrary::open(built[0], params_.dump());
    GtCutedslSoftmaxArgs a = softmax_args(p_, device_, nullptr, nullptr);
    if (int st = lib->can_implement(&a); st != GT_CUTEDSL_SOFTMAX_OK)
      GT_THROW("cutedsl: softmax " + id() + " cannot run " + p_.str() + ": " + lib->status_text(st));
    lib_ = std::move(lib);
  }

  void run(const SoftmaxArgs& a, cudaStream_t s) override {
    GT_CHECK(lib_, "cutedsl: softmax " + id() + ": run before prepare");
    GtCutedslSoftmaxArgs args = softmax_args(p_, device_, a.x, a.y);
    if (int st = lib_->run(&args, s); st != GT_CUTEDSL_SOFTMAX_OK)
      GT_THROW("cutedsl: softmax " + id() + ": " + lib_->status_text(st));
  }

 private:
  int device_;
  SoftmaxProblem p_;
  SoftmaxConfig c_;
  std::string digest_;
  json params_;
  std::shared_ptr<const SoftmaxLibrary> lib_;
};

class CutedslSoftmaxBackend final : public SoftmaxBackend {
 public:
  explicit CutedslSoftmaxBackend(const BackendContext& ctx)
      : link_(ctx, "cutedsl"), max_configs_(ctx.max_configs > 0 ? ctx.max_configs : kDefaultSoftmaxMaxConfigs) {
    try {
      digest_ = softmax_sources_digest(ctx.artifacts ? ctx.artifacts->options().python_dir : fs::path());
    } catch (const Error& e) {
      broken_ = e.message();
    }
  }

  std::string name() const override { return kName; }
  std::string version() const override {
    return available() ? link_.version() + " src=" + link_.sources_digest() + " softmax=" + digest_ : "unavailable";
  }
  Verdict available() const override {
    if (Verdict v = link_.available(); !v) return v;
    if (!broken_.empty()) return Verdict::no(broken_);
    return Verdict::yes();
  }

  Verdict supports(const SoftmaxProblem& p) const override {
    if (Verdict v = softmax_problem_verdict(p); !v) return v;
    if (softmax_configs(p, max_configs_).empty()) return Verdict::no("no CuTe DSL softmax config fits this problem");
    // Load-only: "supported" means "has candidates" (a read of the store's file names).
    if (available() && link_.load_only() && configs(p).empty())
      return Verdict::no("load-only (the cutedsl toolchain does not compile here) and the artifact store holds none of this problem's softmax artifacts");
    return Verdict::yes();
  }

  std::vector<std::unique_ptr<Cand>> candidates(const SoftmaxProblem& p) override {
    require(p);
    std::vector<std::unique_ptr<Cand>> out;
    for (const SoftmaxConfig& c : configs(p))
      out.push_back(std::make_unique<CutedslSoftmaxCandidate>(link_.ctx.device.index, p, c, digest_));
    if (out.empty())
      GT_THROW("cutedsl: load-only (the cutedsl toolchain does not compile here) and the artifact store holds none of this problem's softmax "
               "artifacts");
    return out;
  }

  std::unique_ptr<Cand> load(const SoftmaxProblem& p, const std::string& id) override {
    require(p);
    const SoftmaxConfig c = SoftmaxConfig::parse(id);
    if (std::string why = c.cannot_run(p); !why.empty())
      GT_THROW("cutedsl: softmax config " + id + " cannot run " + p.str() + ": " + why);
    return std::make_unique<CutedslSoftmaxCandidate>(link_.ctx.device.index, p, c, digest_);
  }

 private:
  // The ranked configs for p (no compile budget: see docs/compile-stage.md); in load-only mode ranked over those whose artifact is in the store.
  std::vector<SoftmaxConfig> configs(const SoftmaxProblem& p) const {
    if (!link_.load_only()) return softmax_configs(p, max_configs_);
    return softmax_configs(p, max_configs_, [&](const SoftmaxConfig& c) { return link_.stored({softmax_job(c, p, digest_)}); });
  }

  void require(const SoftmaxProblem& p) const {
    Verdict v = available();
    GT_CHECK(v, "cutedsl: not available: " + v.reason);
    v = supports(p);
    GT_CHECK(v, "cutedsl: does not support " + p.str() + ": " + v.reason);
  }

  ToolchainLink link_;
  int max_configs_;
  std::string digest_, broken_;
};

}  // namespace
}  // namespace cutedsl

std::unique_ptr<SoftmaxBackend> make_cutedsl_softmax_backend(const BackendContext& ctx) {
  return std::make_unique<cutedsl::CutedslSoftmaxBackend>(ctx);
}

}  // namespace gemmtune
