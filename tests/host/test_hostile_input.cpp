// Reproductions of the reliability audit (../shared/reviews/reliability-2026-12-01.md) through the
// CLI, each kept as a test: D4 (unbounded reads of operands), D7 (suite x m-values), D12 (empty or
// vanishing --alpha), D14/D15 (read-only cache commands, export onto the cache), D17 (exit codes
// and validation order), D18 (quoted input capped, control characters escaped), D21.
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "gemmtune/tuning_cache.hpp"
#include "host/problems.hpp"
#include "gemmtune/npy.hpp"

namespace gemmtune {
namespace {

namespace fs = std::filesystem;
using host_test::Exec;
using host_test::run_cli;
using host_test::TempDir;

std::string text_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Two small valid operands A[4,8], B[8,4] in `dir`.
void write_operands(const fs::path& dir) {
  std::vector<float> a(32, 1.0f);
  npy::write(dir / "a.npy", a.data(), npy::Elem::f4, {4, 8});
  npy::write(dir / "b.npy", a.data(), npy::Elem::f4, {8, 4});
}

// D12: an empty numeric flag (an unset shell variable) and a non-zero alpha/beta that float
// rounds to 0 are usage errors (exit 2), not a silent alpha = 0.
TEST(HostileInput, EmptyOrVanishingScalarsAreUsageErrors) {
  TempDir dir("gemmtune_hostile_");
  write_operands(dir.root);
  const std::string run = "run --a '" + (dir.root / "a.npy").string() + "' --b '" + (dir.root / "b.npy").string() +
                          "' --out '" + (dir.root / "d.npy").string() + "'";
  for (const std::string& cmd : {std::string("tune 64x64x64"), run}) {
    for (const char* flag : {" --alpha ''", " --beta ''", " --alpha 1e-50", " --beta 1e-50", " --alpha 1e39"}) {
      const Exec e = run_cli(dir.root, cmd + flag);
      EXPECT_EQ(e.code, 2) << cmd << flag << "\n" << e.err;
      EXPECT_TRUE(e.err.find("alpha") != std::string::npos || e.err.find("beta") != std::string::npos) << e.err;
    }
  }
  const Exec e = run_cli(dir.root, "tune 64x64x64 --alpha 1e-50");
  EXPECT_NE(e.err.find("too small for float"), std::string::npos) << e.err;
}

// D17: an invalid problem made from flags is exit 2 in every command; every suite row is checked
// before the GPU; `run` checks --out before reading or tuning; `precompile --sms 0` is refused.
TEST(HostileInput, ExitCodesAndValidationOrder) {
  TempDir dir("gemmtune_hostile_");
  write_operands(dir.root);
  const std::string ab = "--a '" + (dir.root / "a.npy").string() + "' --b '" + (dir.root / "b.npy").string() + "'";
  Exec e = run_cli(dir.root, "run " + ab + " --out '" + (dir.root / "d.npy").string() + "' --alpha nan");
  EXPECT_EQ(e.code, 2) << e.err;
  e = run_cli(dir.root, "run " + ab + " --out '" + (dir.root / "no" / "such" / "d.npy").string() + "'");
  EXPECT_EQ(e.code, 2) << e.err;
  EXPECT_NE(e.err.find("--out"), std::string::npos) << e.err;
  e = run_cli(dir.root, "run " + ab + " --out '" + dir.root.string() + "'");
  EXPECT_EQ(e.code, 2) << e.err;
  std::ofstream(dir.root / "s.csv") << "m,n,k\n64,64,64\n9223372036854775807,64,64\n";
  e = run_cli(dir.root, "suite '" + (dir.root / "s.csv").string() + "'");
  EXPECT_EQ(e.code, 2) << e.err;  // was 3 here, and an error row after tuning the others on a GPU
  EXPECT_NE(e.err.find("9223372036854775807x64x64"), std::string::npos) << e.err;
  std::ofstream(dir.root / "p.csv") << "m,n,k\n64,64,64\n";
  e = run_cli(dir.root, "precompile '" + (dir.root / "p.csv").string() + "' --dtype int8 --backends cutlass");
  EXPECT_EQ(e.code, 2) << e.err;
  for (const char* sms : {"0", "-5"}) {
    e = run_cli(dir.root, "precompile '" + (dir.root / "p.csv").string() + "' --sms " + sms + " --backends cutlass");
    EXPECT_EQ(e.code, 2) << sms << ": " << e.err;
  }
}

// D7: a suite crossed with m values is never expanded in memory: past the cap it is refused at
// once, and precompile takes distinct problems only.
TEST(HostileInput, SuiteCrossProductIsBoundedAndNotExpanded) {
  TempDir dir("gemmtune_hostile_");
  {
    std::ofstream s(dir.root / "shapes.csv");
    s << "model,layer,n,k\n";
    for (int i = 0; i < 20001; ++i) s << "m" << i << ",l,4096,4096\n";
    std::ofstream m(dir.root / "m.csv");
    m << "phase,m\n";
    for (int i = 0; i < 500; ++i) m << "p" << i << "," << i + 1 << "\n";
  }
  const std::string args = "'" + (dir.root / "shapes.csv").string() + "' --m-values '" + (dir.root / "m.csv").string() + "'";
  const auto t0 = std::chrono::steady_clock::now();
  Exec e = run_cli(dir.root, "suite " + args);
  EXPECT_EQ(e.code, 1) << e.err;
  EXPECT_NE(e.err.find("20001 rows x 500 m values are more than the 10000000 problems"), std::string::npos) << e.err;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0);
  // Within the cap: 2000 identical shapes x 3 m values are 3 problems to precompile.
  {
    std::ofstream s(dir.root / "shapes.csv", std::ios::trunc);
    s << "model,layer,n,k\n";
    for (int i = 0; i < 2000; ++i) s << "m" << i << ",l,4096,4096\n";
    std::ofstream(dir.root / "m.csv", std::ios::trunc) << "phase,m\na,16\nb,32\nc,16\n";
  }
  e = run_cli(dir.root, "precompile " + args + " --backends cutlass --load-only cutlass --artifacts '" +
                            (dir.root / "store").string() + "'");
  EXPECT_NE(e.err.find("precompiling 2 problems"), std::string::npos) << e.err;
}

// D18: errors quote at most ~200 bytes of the input, escaped; D4: operands that are not regular
// files are refused at once, naming the file (FIFO: no hang; /dev/zero: no memory exhaustion).
TEST(HostileInput, MessagesAndOperandReadsAreBounded) {
  TempDir dir("gemmtune_hostile_");
  write_operands(dir.root);
  // A 5 MB .npy header.
  {
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), 'junk': '" +
                         std::string(5 << 20, 'x') + "'}";
    std::string file = std::string("\x93NUMPY\x02\x00", 8);
    const uint32_t len = uint32_t(header.size());
    file.append(reinterpret_cast<const char*>(&len), 4);
    std::ofstream(dir.root / "big.npy", std::ios::binary) << file << header;
  }
  const std::string tail = " --b '" + (dir.root / "b.npy").string() + "' --out '" + (dir.root / "d.npy").string() + "'";
  Exec e = run_cli(dir.root, "run --a '" + (dir.root / "big.npy").string() + "'" + tail);
  EXPECT_EQ(e.code, 1);
  EXPECT_LT(e.err.size(), 2000u) << e.err.substr(0, 300);
  EXPECT_NE(e.err.find("bad .npy header"), std::string::npos) << e.err.substr(0, 300);
  // A 5 MB CSV field.
  std::ofstream(dir.root / "f.csv") << "m,n,k\n" << std::string(5 << 20, '7') << "x,64,64\n";
  e = run_cli(dir.root, "suite '" + (dir.root / "f.csv").string() + "'");
  EXPECT_EQ(e.code, 1);
  EXPECT_LT(e.err.size(), 2000u) << e.err.substr(0, 300);
  EXPECT_NE(e.err.find("is not a positive integer"), std::string::npos) << e.err.substr(0, 300);
  // Control characters in a CSV field are escaped.
  std::ofstream(dir.root / "c.csv") << "m,n,k\n\x1b]0;owned\x07,64,64\n";
  e = run_cli(dir.root, "suite '" + (dir.root / "c.csv").string() + "'");
  EXPECT_EQ(e.err.find('\x1b'), std::string::npos) << e.err;
  EXPECT_NE(e.err.find("\\x1b"), std::string::npos) << e.err;
  // A FIFO, /dev/zero and a directory as operands.
  ASSERT_EQ(mkfifo((dir.root / "fifo.npy").c_str(), 0600), 0);
  for (const fs::path& bad : {dir.root / "fifo.npy", fs::path("/dev/zero"), dir.root}) {
    const auto t0 = std::chrono::steady_clock::now();
    e = run_cli(dir.root, "run --a '" + bad.string() + "'" + tail);
    EXPECT_EQ(e.code, 1) << bad;
    EXPECT_NE(e.err.find(bad.string()), std::string::npos) << e.err;  // D21: the file is named
    EXPECT_NE(e.err.find("not a regular file"), std::string::npos) << e.err;
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  }
}

// D18: what `cache list` and `show` print from the file is escaped (a cache written before
// imports were checked may hold anything). D21: one "gemmtune: " prefix on cache warnings.
TEST(HostileInput, CacheTextReachesTheTerminalEscaped) {
  TempDir dir("gemmtune_hostile_");
  const fs::path cache = dir.root / "c.sqlite";
  {
    TuneReport r;
    r.problem.m = r.problem.n = r.problem.k = 64;
    CandidateResult w;
    w.backend = "triton";
    w.id = "c1";
    w.name = "n\x1b]0;owned\x07\x1b[31m";
    w.status = CandidateStatus::ok;
    w.rel_err = 0;
    w.median_us = 1;
    w.winner = true;
    r.results.push_back(w);
    TuningCache(cache).store("k1", "env\x1b[2J", r);
  }
  for (const std::string& cmd : {std::string("list"), std::string("show k1")}) {
    const Exec e = run_cli(dir.root, "cache --cache '" + cache.string() + "' " + cmd);
    EXPECT_EQ(e.code, 0) << e.err;
    EXPECT_EQ(e.out.find('\x1b'), std::string::npos) << cmd;
    EXPECT_EQ(e.out.find('\x07'), std::string::npos) << cmd;
    EXPECT_NE(e.out.find("n\\x1b]0;owned\\x07"), std::string::npos) << e.out;
  }
  std::ofstream(dir.root / "g.sqlite") << "garbage garbage garbage";
  const Exec e = run_cli(dir.root, "cache --cache '" + (dir.root / "g.sqlite").string() + "' clear");
  EXPECT_EQ(e.code, 0) << e.err;
  EXPECT_NE(e.err.find("gemmtune: warning: tuning cache"), std::string::npos) << e.err;
  EXPECT_EQ(e.err.find("gemmtune: gemmtune:"), std::string::npos) << e.err;
}

// D14 + D15 through the CLI: `list` never renames another program's database; `export` never
// overwrites the cache and writes atomically.
TEST(HostileInput, CacheCommandsKeepTheirPromises) {
  TempDir dir("gemmtune_hostile_");
  // Another program's database: `list` refuses it and leaves it exactly as it was.
  const fs::path app = dir.root / "app.db";
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(app.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('x');", nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  const std::string before = text_of(app);
  Exec e = run_cli(dir.root, "cache --cache '" + app.string() + "' list");
  EXPECT_EQ(e.code, 1);
  EXPECT_NE(e.err.find("another program's SQLite database"), std::string::npos) << e.err;
  EXPECT_EQ(text_of(app), before);
  for (const auto& f : fs::directory_iterator(dir.root))
    EXPECT_EQ(f.path().filename().string().find(".bad-"), std::string::npos) << f.path();
  // Export onto the cache itself: refused, the cache intact.
  e = run_cli(dir.root, "cache --cache '" + (dir.root / "x.sqlite").string() + "' clear");
  ASSERT_EQ(e.code, 0) << e.err;
  e = run_cli(dir.root, "cache --cache '" + (dir.root / "x.sqlite").string() + "' export '" +
                            (dir.root / "x.sqlite").string() + "'");
  EXPECT_EQ(e.code, 1);
  EXPECT_NE(e.err.find("is the tuning cache"), std::string::npos) << e.err;
  EXPECT_EQ(text_of(dir.root / "x.sqlite").rfind("SQLite format 3", 0), 0u);
  e = run_cli(dir.root, "cache --cache '" + (dir.root / "x.sqlite").string() + "' list");
  EXPECT_EQ(e.code, 0) << e.err;
  // Atomic: a failed export leaves the old file whole and no temporary behind.
  std::ofstream(dir.root / "old.json") << "previous export";
  e = run_cli(dir.root, "cache --cache '" + (dir.root / "x.sqlite").string() + "' export '" +
                            (dir.root / "old.json").string() + "'");
  EXPECT_EQ(e.code, 0) << e.err;
  EXPECT_NE(text_of(dir.root / "old.json").find("gemmtune-cache"), std::string::npos);
  for (const auto& f : fs::directory_iterator(dir.root))
    EXPECT_EQ(f.path().filename().string().find(".tmp-"), std::string::npos) << f.path();
  // `list`, `show`, `export` of a missing cache create nothing.
  const fs::path none = dir.root / "none" / "c.sqlite";
  for (const char* cmd : {" list", " export -"}) {
    e = run_cli(dir.root, "cache --cache '" + none.string() + "'" + cmd);
    EXPECT_EQ(e.code, 0) << e.err;
  }
  EXPECT_FALSE(fs::exists(none.parent_path()));
}

}  // namespace
}  // namespace gemmtune
