// Our own CUDA softmax kernels (the "native" softmax backend), their config space and launcher.
//
//   warp     one warp per row, the row in registers (32 * elems columns at most); a block holds
//            threads / 32 rows. Reads x once.
//   block    one block per row, the row in registers (threads * elems columns at most). Reads x
//            once. (cluster with one CTA.)
//   cluster  a thread-block cluster of `cluster` CTAs per row (2 .. 16; 16 is Hopper's
//            non-portable size), each CTA holding a slice of threads * elems columns in
//            registers; the CTAs merge their (max, sum) through distributed shared memory. Reads
//            x once.
//   smem     like cluster (1 to 16 CTAs per row), but each CTA stages its slice of x in shared
//            memory with cp.async (16-byte packs): the whole slice is in flight at once and
//            several CTAs share an SM; exp is computed twice (sum, then write). Reads x once.
//   pipe     the long-row kernel (docs/softmax.md, "The pipe kernel"): persistent clusters of
//            `cluster` CTAs (1 .. 16; 9-16 non-portable), each CTA owning a slice
//            of threads / block_rows * elems columns of every row its cluster processes
//            (block_rows > 1, short rows, no cluster: a CTA holds block_rows rows at once). The
//            copy engine (cp.async.bulk, on an mbarrier) streams the slices of the next
//            `stages` - 1 block-rows into shared memory while the current one is reduced in
//            registers (exp once), the (max, sum) partials merged per warp, per row's warps,
//            then across the cluster through distributed shared memory, and y written with
//            streaming stores. Reads x once; 16-byte packs (a row not starting on one gets a
//            scalar head); any cols up to threads / block_rows * elems * cluster (less vec - 1
//            when ld % vec != 0).
//   online   one block per row, any cols: one pass keeps a running (max, sum) per thread,
//            merged across the block; a second pass re-reads the row and writes y. Reads x
//            twice (the fallback for rows no config above holds).
//   tiny     short rows (1 .. 1024 columns): persistent CTAs stage chunks of R consecutive rows
//            (~24 KiB of x and y) in shared memory, packed rows as one flat span with 16-byte
//            cp.async copies (two x buffers: the next chunks stream in while one is reduced) and
//            16-byte stores, and `group` lanes (1 .. 32) reduce each row from shared memory (a
//            thread a row for the shortest). Reads x once; any ld.
//   wide     few long rows: a row cut into slices of threads * elems columns spread over the
//            whole GPU (one cooperative launch, every CTA resident); each CTA publishes its
//            slices' (max, sum) to a global workspace, waits for its rows' other slices (an
//            arrival counter per row), and writes y: its first slice from registers, the
//            others re-read (from L2 while they fit). Reads x once when the grid holds every
//            slice, else partly twice. With stages > 0 (rows of whole 16-byte packs, <= 64 rows),
//            the ring: a loader warp keeps `stages` shared-memory slots filled with the CTA's
//            next slices (copy engine), the compute warps reduce them, a control warp publishes
//            and merges; each slice's y is written a row's span of steps later, from its slot
//            when the slots hold that span, else from x reread in L2 (threads + 64 a CTA).
//   band     few long rows of whole 16-byte packs, the whole GPU on one row at a time: every
//            CTA (one cooperative launch) owns a chunk of each row, which a loader warp brings
//            into `stages` shared-memory slots of threads * elems values (copy engine) and which
//            stays there until written; the compute warps reduce each row and write the oldest
//            row whose (max, sum) a sync warp has merged across the grid (a global workspace and
//            a counter per row) while the next row is reduced; each row's first 4 pieces wait
//            in registers, so that two rows' chunks fit a CTA. Reads x once; a CTA's chunks of
//            two rows, less the held pieces, must fit its slots (threads + 64 a CTA).
//   row      the row in registers, one pass, non-persistent (odd widths): a CTA holds block_rows
//            rows of threads / block_rows threads (any multiple of 32), or with a cluster of
//            `cluster` CTAs an even share of one row's 16-byte packs; every pack by one 16-byte
//            load (a row's partial head and tail packs masked), (max, sum) merged per warp, per
//            row's warps and across the cluster (st.async into every CTA's shared memory). Reads
//            x once; rows of up to threads / block_rows * elems * cluster (less vec - 1 when
//            ld % vec != 0).
//   span     packed rows (ld == cols) of any width, y of x's dtype: the tensor as one flat
//            span; persistent CTAs take chunks of whole rows (about chunk_kib KiB of x), which
//            the copy engine brings 16-byte aligned into `stages` shared-memory stages
//            (cp.async.bulk, the neighbours' edge bytes over-fetched); `group` lanes a row
//            reduce it there (elems > 0: elems values a lane in registers; elems 0: the row's
//            16-byte packs in three passes) and write y over x; y leaves by a bulk copy shared
//            -> global, only the chunk's two partial edge packs element by element. Reads x once.
//   flat     packed rows of elems == cols = 2 .. 8 values, y of x's dtype: a lane holds the fewest
//            whole rows that end on a 16-byte pack (8 rows of 7 bf16: 7 packs), a warp's tile
//            loaded and stored with coalesced 16-byte accesses and transposed through shared
//            memory; a warp a tile, non-persistent. Reads x once.
// Every kind loads `vec` consecutive elements per access (16 bytes at most: one vector load
// when vec > 1); x, y aligned to vec elements of their dtype (cudaMalloc's 256 bytes suffice;
// the launcher checks). warp, block, cluster, smem and online need ld % vec == 0 (configs only
// offer vec > 1 then); pipe, row, tiny and wide always use 16-byte packs and align them per row
// themselves (a row starting inside a pack gets a scalar head, see "virtual columns" in
// softmax.cu).
// All compute in fp32 (exp as exp2 of (s x - M) * log2 e) with torch.softmax's special values
// (see softmax.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gemmtune/softmax.hpp"

namespace gemmtune::native {

// Bump when a kernel's code changes what it computes or how fast: keys the tuning cache.
inline constexpr const char* kNativeSoftmaxVersion = "12";

enum class SoftmaxKind : uint8_t { warp, block, cluster, smem, pipe, online, tiny, wide, row, span, flat, band };
const char* to_string(SoftmaxKind);

struct NativeSoftmaxConfig {
  SoftmaxKind kind = SoftmaxKind::online;
  int vec = 1;        // elements per access: 1, or 16 bytes of the input dtype (4 fp32, 8 bf16/fp16)
  int elems = 0;      // elements per thread kept in registers (warp, block, cluster, pipe); 0 for smem, online
  int threads = 256;  // threads per block (warp: rows per block = threads / 32)
  int cluster = 1;    // CTAs per row (cluster: 2, 4, 8 or 16; smem: 1, 2, 4, 8, 16; pipe, row: 1 to 16; else 1)
  int stages = 0;     // pipe: shared-memory stages per CTA (block-rows in flight), 2 .. 4; row: blocks of rows in flight, 1 or 2;
                      // span: chunks in shared memory, 2 .. 6; wide: ring slots, 0 (two-pass) or 2 .. 16;
                      // band: slots of threads * elems values (elems = 4 vec), 2 .. 64; else 0
  int block_rows = 1;  // pipe, row: rows a CTA holds at once (each owned by threads / 32 / block_rows warps); else 1
  int group = 0;       // tiny: lanes a row (1, 2, 4, 8, 16 or 32); span: lanes a row (1 .. 32, or warps); else 0
  int chunk_kib = 0;   // span: KiB of x a chunk holds at most (its rows: a multiple of threads / group); else 0

  int rows_per_block() const {
    return kind == SoftmaxKind::warp                                   ? threads / 32
           : kind == SoftmaxKind::pipe || kind == SoftmaxKind::row ? block_rows
                                                                   : 1;
  }
  // Longest row this config handles (-1: any).
  int64_t max_cols() const;
  // Stable name (also the candidate id), e.g. "warp_v8_e32_t256", "block_v8_e16_t512",
  // "cluster_v8_e32_t512_c8", "smem_v8_t512_c4", "pipe_v8_e32_t1024_r1_c8_s3", "online_v4_t1024",
  // "tiny_v8_e1_t256_g8", "wide_v8_e32_t512", "row_v8_e32_t160_r1_c1_s1", "span_v8_e0_t512_g64_k48_s4", "flat_v8_e7_t256",
  // "band_v4_e16_t448_s8".
  std::string name() const;
  // The config named `name`; throws Error naming the bad part.
  static NativeSoftmaxConfig parse(const std::string& name);
  // Empty when this config can run p (row length, vector alignment of ld, sizes), else why not.
  std::string cannot_run(const SoftmaxProblem& p) const;
  bool operator==(const NativeSoftmaxConfig&) const = default;
};

// Every config worth timing for `p` (validated first), in a fixed order: warp, block, cluster,
// smem, pipe, row, tiny, span, flat, wide, band, online. num_sms (0: 132, the H200's) sizes the wide
// ring and the band kind's chunks.
std::vector<NativeSoftmaxConfig> native_softmax_configs(const SoftmaxProblem& p, int num_sms = 0);

// y = softmax(p.scale * x) for device pointers x (p.in), y (p.out), both rows * ld elements;
// padding between cols and ld is neither read nor written. Enqueued on `s` with
// cudaLaunchKernelEx (its own result is checked: an earlier unrelated error is not blamed on
// this launch); throws Error when the config cannot run p (too-long rows, misaligned vectors)
// or on a launch failure (naming the config and its launch), the runtime's error then cleared.
void run_native_softmax(const NativeSoftmaxConfig& cfg, const SoftmaxProblem& p, const void* in, void* out,
                        cudaStream_t s);

// ---- launch parameters -------------------------------------------------------------------

// sm_90 (H100 / H200) per-block shared memory a kernel may opt in to
// (cudaDevAttrMaxSharedMemoryPerBlockOptin = 227 KiB); static + dynamic must fit it.
inline constexpr int64_t kSm90SmemPerBlockOptin = 232448;
// Upper bound of any native kernel's static shared memory (ptxas -v: reduction scratch 144-256
// bytes; pipe 1088: its mbarriers and exchange slots); the dynamic shared memory the smem and
// pipe kinds opt in to is what is left of 227 KiB.
inline constexpr int64_t kNativeStaticSmemBound = 2048;
inline constexpr int64_t kNativeSmemDynamicOptIn = kSm90SmemPerBlockOptin - kNativeStaticSmemBound;

// The launch a config makes for a problem (computed on the host; the same numbers the
// launcher passes to cudaLaunchKernelEx).
struct NativeSoftmaxLaunch {
  int64_t grid = 0;          // blocks (x); a multiple of cluster
  int threads = 0;           // threads per block
  int64_t dynamic_smem = 0;  // bytes of dynamic shared memory per block (smem and pipe kinds)
  int cluster = 1;           // CTAs per cluster (1: launched without a cluster attribute)
  int launch_bound = 0;      // the kernel's __launch_bounds__ (max threads per block it is compiled for)
  // pipe, wide, band, tiny: the kernel is persistent (its clusters loop over rows / slices / chunks):
  // `grid` (rows * cluster, rows * slices, chunks) is an upper bound, and the launcher launches
  // min(grid, what is resident on the device at once).
  bool persistent = false;
  // wide, band: a cooperative launch (every CTA resident at once, or the launch fails): its CTAs wait
  // for each other.
  bool cooperative = false;
  std::string str() const;   // "grid 40 x 128 threads, 0 B dynamic smem, cluster 1" (+ ", persistent", ", cooperative")
};
// The launch of `cfg` for `p`; throws Error when the config cannot run p (cannot_run).
NativeSoftmaxLaunch native_softmax_launch(const NativeSoftmaxConfig& cfg, const SoftmaxProblem& p);

// Device limits a launch must respect; the defaults are sm_90's (H100 / H200).
struct NativeSoftmaxDeviceLimits {
  int max_threads_per_block = 1024;
  int64_t max_grid_x = 0x7fffffff;
  int64_t smem_per_block_optin = kSm90SmemPerBlockOptin;  // static + dynamic
  int max_cluster = 16;            // with cudaFuncAttributeNonPortableClusterSizeAllowed (8 portable)
  int64_t regs_per_block = 65536;  // registers per thread x threads
};
// Empty when launch `l` of a kernel with `static_smem` bytes of static shared memory and
// `regs_per_thread` registers fits `lim`, else why not (names the limit). Host-side: the device
// check (below) calls it with the kernel's and the device's real numbers.
std::string native_softmax_launch_violation(const NativeSoftmaxLaunch& l, const NativeSoftmaxDeviceLimits& lim,
                                            int64_t static_smem, int regs_per_thread);

// Empty when `cfg` can be launched for `p` on the current device, else why not: cannot_run,
// then the kernel instance's attributes (cudaFuncGetAttributes: registers, static shared
// memory, max threads) against the device's limits (native_softmax_launch_violation), the
// function attributes the launch needs (dynamic shared memory opt-in, non-portable cluster
// size), and residency (cudaOccupancyMaxActiveClusters / ...BlocksPerMultiprocessor >= 1; such
// reasons start with "cannot be resident"). Never throws for a CUDA error: returns it (cleared,
// so that no later cudaGetLastError reports it). The backend drops such candidates before the race.
std::string native_softmax_device_check(const NativeSoftmaxConfig& cfg, const SoftmaxProblem& p);

// Tests and the probe: at most `clusters` clusters (blocks, for one CTA per row) in a persistent
// (pipe) launch; 0 (the default) = no cap. With a cap, a few rows already make every cluster loop
// over several rows and wrap around its stages. Process-wide.
void set_native_softmax_persistent_cap(int64_t clusters);

// What the current device makes of a config's launch for `p` (for the probe, bench/softmax-native-probe.sh):
// the kernel instance's registers and static shared memory, the launch as the launcher makes it
// (a persistent grid already clamped to what is resident), and residency (blocks per SM, or
// clusters on the whole device). Throws Error when the config cannot run p or a CUDA call fails.
struct NativeSoftmaxKernelInfo {
  std::string kernel;            // the kernel's name, e.g. "softmax_pipe_kernel"
  int regs_per_thread = 0;       // cudaFuncAttributes::numRegs
  int64_t static_smem = 0;       // bytes
  int64_t local_bytes = 0;       // stack / spills per thread (cudaFuncAttributes::localSizeBytes)
  NativeSoftmaxLaunch launch;    // grid as launched
  int blocks_per_sm = 0;         // cluster == 1: cudaOccupancyMaxActiveBlocksPerMultiprocessor
  int active_clusters = 0;       // cluster > 1: cudaOccupancyMaxActiveClusters (whole device)
};
NativeSoftmaxKernelInfo native_softmax_kernel_info(const NativeSoftmaxConfig& cfg, const SoftmaxProblem& p);

}  // namespace gemmtune::native
