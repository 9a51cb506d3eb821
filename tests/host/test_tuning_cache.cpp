// The tuning cache: store / lookup / results / list / clear, JSON export and import, files that
// are not a gemmtune cache, and several processes writing one cache at once.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gemmtune/error.hpp"
#include "gemmtune/tuning_cache.hpp"

namespace gemmtune {
namespace {

namespace fs = std::filesystem;

CandidateResult make_result(std::string id, CandidateStatus status, double median_us, bool winner = false) {
  CandidateResult r;
  r.backend = "cublaslt";
  r.id = std::move(id);
  r.name = "config " + r.id;
  r.status = status;
  r.reason = status == CandidateStatus::ok ? "" : "because " + r.id;
  r.rel_err = status == CandidateStatus::failed ? -1 : 1e-3;
  r.median_us = median_us;
  r.p20_us = median_us * 0.9;
  r.p80_us = median_us * 1.1;
  r.samples = status == CandidateStatus::failed ? 0 : 25;
  r.compile_s = 0.25;
  r.winner = winner;
  return r;
}

TuneReport make_report(int64_t m, std::vector<CandidateResult> results) {
  TuneReport report;
  report.problem.m = m;
  report.problem.n = 256;
  report.problem.k = 512;
  report.results = std::move(results);
  return report;
}

// A report whose winner is `winner_id` at `median_us`, plus one slower ok candidate.
TuneReport simple_report(int64_t m, const std::string& winner_id, double median_us) {
  return make_report(m, {make_result(winner_id, CandidateStatus::ok, median_us, true),
                         make_result(winner_id + "-slow", CandidateStatus::ok, median_us * 2)});
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out << bytes;
}

// Runs SQL on a raw SQLite file (to build foreign / newer databases).
void raw_sql(const fs::path& p, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(p.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  const std::string msg = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << msg;
}

std::string raw_scalar(const fs::path& p, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open(p.c_str(), &db);
  sqlite3_stmt* s = nullptr;
  std::string out = "<error>";
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
    out = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
  sqlite3_finalize(s);
  sqlite3_close(db);
  return out;
}

// Files in `dir` whose name starts with `prefix`.
std::vector<fs::path> files_starting(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Waits for child `pid`; true when it exited 0.
bool child_succeeded(pid_t pid) {
  int status = 0;
  return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

class TuningCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(::testing::TempDir()) / "gemmtune-cache-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = dir_ / "tuning.sqlite";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  TuningCache::Log capture() {
    return [this](const std::string& m) { logs_.push_back(m); };
  }
  // The cache file must have been renamed aside with `original` bytes, a warning logged, and
  // a working fresh cache put in its place.
  void expect_moved_aside(const std::string& original) {
    std::optional<TuningCache> cache;
    ASSERT_NO_THROW(cache.emplace(path_, capture()));
    const auto aside = files_starting(dir_, "tuning.sqlite.bad-");
    ASSERT_EQ(aside.size(), 1u);
    EXPECT_EQ(read_bytes(aside[0]), original);
    ASSERT_EQ(logs_.size(), 1u);
    EXPECT_NE(logs_[0].find(aside[0].string()), std::string::npos) << logs_[0];
    EXPECT_TRUE(cache->list().empty());
    cache->store("k", "env", simple_report(64, "a", 10));
    EXPECT_TRUE(cache->lookup("k").has_value());
  }

  fs::path dir_, path_;
  std::vector<std::string> logs_;
};

TEST_F(TuningCacheTest, StoreThenLookup) {
  TuningCache cache(path_);
  EXPECT_EQ(cache.path(), path_);
  EXPECT_FALSE(cache.lookup("missing").has_value());

  const TuneReport report = simple_report(128, "algo-7", 42.5);
  const double before = static_cast<double>(std::time(nullptr));
  cache.store("key1", "sm_90a cuda 13.0", report);
  const auto got = cache.lookup("key1");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->key, "key1");
  EXPECT_EQ(got->environment, "sm_90a cuda 13.0");
  EXPECT_EQ(got->problem, report.problem.canonical());
  EXPECT_EQ(got->backend, "cublaslt");
  EXPECT_EQ(got->candidate_id, "algo-7");
  EXPECT_EQ(got->candidate_name, "config algo-7");
  EXPECT_DOUBLE_EQ(got->median_us, 42.5);
  EXPECT_GE(got->tuned_at, before - 1);
  EXPECT_LE(got->tuned_at, static_cast<double>(std::time(nullptr)) + 1);
  EXPECT_FALSE(cache.lookup("key2").has_value());
}

TEST_F(TuningCacheTest, PersistsAcrossReopenAsWalWithApplicationId) {
  { TuningCache(path_).store("key1", "env", simple_report(128, "a", 10)); }
  TuningCache cache(path_);
  ASSERT_TRUE(cache.lookup("key1").has_value());
  EXPECT_EQ(cache.results("key1").size(), 2u);
  EXPECT_EQ(raw_scalar(path_, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(raw_scalar(path_, "PRAGMA application_id"), std::to_string(0x474d5455));
  EXPECT_EQ(raw_scalar(path_, "SELECT value FROM meta WHERE name = 'schema_version'"), "1");
}

TEST_F(TuningCacheTest, CreatesParentDirectories) {
  const fs::path deep = dir_ / "a" / "b" / "c" / "cache.sqlite";
  TuningCache cache(deep);
  cache.store("k", "env", simple_report(8, "x", 1));
  EXPECT_TRUE(fs::exists(deep));
}

TEST_F(TuningCacheTest, StoreReplacesEverythingUnderTheKey) {
  TuningCache cache(path_);
  cache.store(
      "k", "env1",
      make_report(64, {make_result("a", CandidateStatus::ok, 10, true), make_result("b", CandidateStatus::ok, 20),
                       make_result("c", CandidateStatus::wrong, 5)}));
  cache.store("other", "env1", simple_report(32, "z", 3));
  cache.store(
      "k", "env2",
      make_report(64, {make_result("d", CandidateStatus::ok, 8, true), make_result("a", CandidateStatus::pruned, 30)}));
  const auto got = cache.lookup("k");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->candidate_id, "d");
  EXPECT_EQ(got->environment, "env2");
  const auto results = cache.results("k");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].id, "d");
  EXPECT_EQ(results[1].id, "a");
  EXPECT_EQ(results[1].status, CandidateStatus::pruned);
  EXPECT_EQ(cache.results("other").size(), 2u);  // other keys untouched
}

TEST_F(TuningCacheTest, StoreWithoutWinnerThrowsAndKeepsOldEntry) {
  TuningCache cache(path_);
  cache.store("k", "env", simple_report(64, "a", 10));
  const TuneReport no_winner = make_report(64, {make_result("b", CandidateStatus::failed, 0)});
  EXPECT_THROW(cache.store("k", "env", no_winner), Error);
  EXPECT_EQ(cache.lookup("k")->candidate_id, "a");
  EXPECT_EQ(cache.results("k").size(), 2u);
}

TEST_F(TuningCacheTest, FailedStoreRollsBack) {
  TuningCache cache(path_);
  cache.store("k", "env", simple_report(64, "a", 10));
  // Two results with the same (backend, id) violate the primary key half-way through.
  const TuneReport dup =
      make_report(64, {make_result("b", CandidateStatus::ok, 5, true), make_result("b", CandidateStatus::ok, 6)});
  try {
    cache.store("k", "env", dup);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find(path_.string()), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("UNIQUE"), std::string::npos) << e.message();  // SQLite's own text
  }
  EXPECT_EQ(cache.lookup("k")->candidate_id, "a");
  EXPECT_EQ(cache.results("k").size(), 2u);
}

TEST_F(TuningCacheTest, ResultsBestFirstWithAllFields) {
  TuningCache cache(path_);
  CandidateResult nan_err = make_result("nan", CandidateStatus::wrong, 4);
  nan_err.rel_err = std::nan("");
  CandidateResult dflt = make_result("ok-slow", CandidateStatus::ok, 30);
  dflt.is_default = true;
  cache.store(
      "k", "env",
      make_report(
          64, {make_result("failed", CandidateStatus::failed, 0), dflt, make_result("wrong", CandidateStatus::wrong, 1),
               nan_err, make_result("pruned", CandidateStatus::pruned, 50),
               make_result("ok-fast", CandidateStatus::ok, 20), make_result("winner", CandidateStatus::ok, 21, true)}));
  const auto results = cache.results("k");
  std::vector<std::string> ids;
  for (const auto& r : results) ids.push_back(r.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"winner", "ok-fast", "ok-slow", "pruned", "wrong", "nan", "failed"}));

  const CandidateResult& slow = results[2];
  EXPECT_EQ(slow.backend, "cublaslt");
  EXPECT_EQ(slow.name, "config ok-slow");
  EXPECT_EQ(slow.status, CandidateStatus::ok);
  EXPECT_EQ(slow.reason, "");
  EXPECT_DOUBLE_EQ(slow.rel_err, 1e-3);
  EXPECT_DOUBLE_EQ(slow.median_us, 30);
  EXPECT_DOUBLE_EQ(slow.p20_us, 27);
  EXPECT_DOUBLE_EQ(slow.p80_us, 33);
  EXPECT_EQ(slow.samples, 25);
  EXPECT_DOUBLE_EQ(slow.compile_s, 0.25);
  EXPECT_TRUE(slow.is_default);
  EXPECT_FALSE(slow.winner);
  EXPECT_TRUE(results[0].winner);
  EXPECT_EQ(results[4].reason, "because wrong");
  EXPECT_TRUE(std::isnan(results[5].rel_err));  // NaN survives (stored as NULL)
  EXPECT_DOUBLE_EQ(results[6].rel_err, -1);
  EXPECT_TRUE(cache.results("missing").empty());
}

TEST_F(TuningCacheTest, ListAndClear) {
  TuningCache cache(path_);
  cache.store("b", "env", simple_report(2, "x", 1));
  cache.store("a", "env", simple_report(1, "y", 2));
  cache.store("c", "env", simple_report(3, "z", 3));
  const auto all = cache.list();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].key, "a");
  EXPECT_EQ(all[0].candidate_id, "y");
  EXPECT_EQ(all[2].key, "c");
  EXPECT_EQ(cache.clear(), 3);
  EXPECT_TRUE(cache.list().empty());
  EXPECT_FALSE(cache.lookup("a").has_value());
  EXPECT_TRUE(cache.results("a").empty());
  EXPECT_EQ(cache.clear(), 0);
}

TEST_F(TuningCacheTest, ExportImportRoundTrip) {
  CandidateResult nan_err = make_result("nan", CandidateStatus::wrong, 4);
  nan_err.rel_err = std::nan("");
  std::string exported;
  {
    TuningCache src(dir_ / "src.sqlite");
    src.store("k1", "env1",
              make_report(64, {make_result("w", CandidateStatus::ok, 10, true), nan_err,
                               make_result("f", CandidateStatus::failed, 0)}));
    src.store("k2", "env2", simple_report(32, "v", 7));
    exported = src.export_json();
  }
  const auto doc = nlohmann::json::parse(exported);
  EXPECT_EQ(doc["format"], "gemmtune-cache");
  EXPECT_EQ(doc["version"], 2);
  ASSERT_EQ(doc["entries"].size(), 2u);
  EXPECT_EQ(doc["entries"][0]["key"], "k1");
  ASSERT_EQ(doc["entries"][0]["results"].size(), 3u);
  // Results in the one encoding of a candidate result (to_json): "id", "name", rel_err null when
  // not measured (the failed one) and for a NaN.
  const auto& failed = doc["entries"][0]["results"][2];
  EXPECT_EQ(failed["id"], "f");
  EXPECT_EQ(failed["name"], "config f");
  EXPECT_TRUE(failed["rel_err"].is_null()) << failed.dump();
  EXPECT_FALSE(failed.contains("candidate_id")) << failed.dump();
  EXPECT_TRUE(doc["entries"][0]["results"][1]["rel_err"].is_null());

  TuningCache dst(path_);
  dst.store("k2", "old", simple_report(32, "old", 99));   // replaced by the import
  dst.store("k3", "keep", simple_report(16, "keep", 5));  // kept: import merges
  EXPECT_EQ(dst.import_json(exported), 2);
  const auto list = dst.list();
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(dst.lookup("k2")->candidate_id, "v");
  EXPECT_EQ(dst.lookup("k2")->environment, "env2");
  EXPECT_EQ(dst.lookup("k3")->candidate_id, "keep");
  const auto k1 = dst.results("k1");
  ASSERT_EQ(k1.size(), 3u);
  EXPECT_EQ(k1[0].id, "w");
  EXPECT_TRUE(std::isnan(k1[1].rel_err));  // wrong: always measured, so its null is a NaN
  EXPECT_EQ(k1[2].status, CandidateStatus::failed);
  EXPECT_EQ(k1[2].rel_err, -1);  // failed: null is "not measured"
  EXPECT_DOUBLE_EQ(k1[0].rel_err, 1e-3);
  EXPECT_EQ(dst.results("k2").size(), 2u);

  // Exporting the merged cache and importing it elsewhere gives the same choices.
  TuningCache again(dir_ / "again.sqlite");
  EXPECT_EQ(again.import_json(dst.export_json()), 3);
  const auto list2 = again.list();
  ASSERT_EQ(list2.size(), list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    EXPECT_EQ(list2[i].key, list[i].key);
    EXPECT_EQ(list2[i].problem, list[i].problem);
    EXPECT_EQ(list2[i].candidate_name, list[i].candidate_name);
    EXPECT_DOUBLE_EQ(list2[i].median_us, list[i].median_us);
    EXPECT_DOUBLE_EQ(list2[i].tuned_at, list[i].tuned_at);
  }
}

// Exports written before the one candidate encoding (version 1: "candidate_id",
// "candidate_name", rel_err -1 when not measured) still import.
TEST_F(TuningCacheTest, ImportsVersionOneExports) {
  const auto v1 = nlohmann::json::parse(R"({"format": "gemmtune-cache", "version": 1, "entries": [
    {"key": "k1", "environment": "env", "problem": "gemm1;m=64", "backend": "cublaslt", "candidate_id": "w",
     "candidate_name": "config w", "median_us": 10, "tuned_at": 1700000000, "results": [
      {"backend": "cublaslt", "candidate_id": "w", "candidate_name": "config w", "status": "ok", "reason": "",
       "rel_err": 0.001, "median_us": 10, "p20_us": 9, "p80_us": 11, "samples": 25, "compile_s": 0.25,
       "is_default": true, "winner": true},
      {"backend": "cublaslt", "candidate_id": "f", "candidate_name": "config f", "status": "failed",
       "reason": "because f", "rel_err": -1, "median_us": 0, "p20_us": 0, "p80_us": 0, "samples": 0,
       "compile_s": 0.25, "is_default": false, "winner": false}]}]})");
  TuningCache cache(path_);
  EXPECT_EQ(cache.import_json(v1.dump()), 1);
  EXPECT_EQ(cache.lookup("k1")->candidate_id, "w");
  const auto rs = cache.results("k1");
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].id, "w");
  EXPECT_EQ(rs[0].name, "config w");
  EXPECT_DOUBLE_EQ(rs[0].rel_err, 0.001);
  EXPECT_TRUE(rs[0].is_default);
  EXPECT_EQ(rs[1].id, "f");
  EXPECT_EQ(rs[1].rel_err, -1);
  // Re-exported, it is version 2: the failed result's rel_err is null.
  const auto v2 = nlohmann::json::parse(cache.export_json());
  EXPECT_EQ(v2["version"], 2);
  EXPECT_TRUE(v2["entries"][0]["results"][1]["rel_err"].is_null());
  // A version-1 document is read with version 1's names: "id" there is not enough.
  auto renamed = v1;
  renamed["entries"][0]["results"][0].erase("candidate_id");
  renamed["entries"][0]["results"][0]["id"] = "w";
  try {
    cache.import_json(renamed.dump());
    ADD_FAILURE() << "no Error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("entries[0].results[0].candidate_id: missing"), std::string::npos) << e.message();
  }
}

// import_json must throw an Error whose message contains `needle`, and change nothing.
void expect_import_error(TuningCache& cache, const std::string& json, const std::string& needle) {
  try {
    cache.import_json(json);
    ADD_FAILURE() << "no Error for: " << json;
  } catch (const Error& e) {
    EXPECT_NE(e.message().find(needle), std::string::npos) << "message: " << e.message();
  }
  EXPECT_EQ(cache.list().size(), 1u);
  EXPECT_EQ(cache.lookup("keep")->candidate_id, "keep");
}

TEST_F(TuningCacheTest, ImportRejectsMalformedInputNamingTheField) {
  TuningCache cache(path_);
  cache.store("keep", "env", simple_report(16, "keep", 5));
  auto good = nlohmann::json::parse(cache.export_json());
  good["entries"][0]["key"] = "new";
  good["entries"].push_back(good["entries"][0]);
  good["entries"][1]["key"] = "new2";

  expect_import_error(cache, "{not json", "tuning cache import: invalid JSON");
  // D10: number overflow was nlohmann's raw out_of_range text; D1: nesting is capped while parsing.
  expect_import_error(cache, R"({"format": "gemmtune-cache", "version": 1e400})", "tuning cache import.version: number out of range");
  expect_import_error(cache, R"({"entries": )" + std::string(100000, '[') + std::string(100000, ']') + "}",
                      "tuning cache import.entries: nested deeper than 32 levels");
  expect_import_error(cache, "[1, 2]", "document: must be an object");
  {
    auto j = good;
    j["format"] = "something-else";
    expect_import_error(cache, j.dump(), "format");
  }
  {
    auto j = good;
    j["version"] = 3;
    expect_import_error(cache, j.dump(), "version: 3 is not supported");
  }
  {
    auto j = good;
    j.erase("entries");
    expect_import_error(cache, j.dump(), "entries: missing");
  }
  {
    auto j = good;  // entry 0 is fine; the bad entry 1 must keep entry 0 out too
    j["entries"][1].erase("candidate_id");
    expect_import_error(cache, j.dump(), "entries[1].candidate_id: missing");
  }
  {
    auto j = good;
    j["entries"][1]["median_us"] = "fast";
    expect_import_error(cache, j.dump(), "entries[1].median_us: must be a number");
  }
  {
    auto j = good;
    j["entries"][1]["results"][1]["status"] = "great";
    expect_import_error(cache, j.dump(), "entries[1].results[1].status: 'great' is not a status");
  }
  {
    auto j = good;
    j["entries"][0]["results"] = 3;
    expect_import_error(cache, j.dump(), "entries[0].results: must be an array");
  }
  {
    auto j = good;
    j["entries"][0]["results"][0]["winner"] = 1;
    expect_import_error(cache, j.dump(), "entries[0].results[0].winner: must be true or false");
  }
  EXPECT_EQ(cache.import_json(good.dump()), 2);
  EXPECT_EQ(cache.list().size(), 3u);
}

TEST_F(TuningCacheTest, GarbageFileIsMovedAside) {
  std::string garbage = "this is not a database\n";
  for (int i = 0; i < 5000; ++i) garbage.push_back(static_cast<char>((i * 131 + 7) & 0xff));
  write_bytes(path_, garbage);
  expect_moved_aside(garbage);
}

TEST_F(TuningCacheTest, ShortGarbageFileIsMovedAside) {
  write_bytes(path_, "hello");
  expect_moved_aside("hello");
}

// Another program's database is refused and left exactly as it is, by every access (reliability
// audit D14: `cache list` renamed it and put an empty cache in its place).
TEST_F(TuningCacheTest, ForeignDatabaseIsRefusedAndLeftAsItIs) {
  raw_sql(path_, "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes VALUES (1, 'keep me');");
  const std::string original = read_bytes(path_);
  for (auto access : {TuningCache::Access::read_write, TuningCache::Access::read_only}) {
    try {
      TuningCache cache(path_, capture(), access);
      ADD_FAILURE() << "a foreign database was adopted";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find("another program's SQLite database"), std::string::npos) << e.message();
      EXPECT_EQ(e.message().find("application_id 0"), std::string::npos) << e.message();  // D21
      EXPECT_NE(e.message().find("left as it is"), std::string::npos) << e.message();
    }
  }
  EXPECT_EQ(read_bytes(path_), original);
  EXPECT_TRUE(files_starting(dir_, "tuning.sqlite.bad-").empty());
  EXPECT_EQ(raw_scalar(path_, "SELECT body FROM notes"), "keep me");
}

TEST_F(TuningCacheTest, ForeignWalDatabaseIsLeftWithItsWal) {
  // Committed rows that live only in the WAL stay there, with the database.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "PRAGMA journal_mode = WAL; CREATE TABLE notes (body TEXT);"
                         "INSERT INTO notes VALUES ('only in the wal');",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  sqlite3_close(db);
  const fs::path wal = path_.string() + "-wal";
  ASSERT_GT(fs::file_size(wal), 0u);
  EXPECT_THROW(TuningCache(path_, capture()), Error);
  EXPECT_GT(fs::file_size(wal), 0u);
  EXPECT_TRUE(files_starting(dir_, "tuning.sqlite.bad-").empty());
  EXPECT_EQ(raw_scalar(path_, "SELECT body FROM notes"), "only in the wal");
}

TEST_F(TuningCacheTest, WrongApplicationIdIsRefused) {
  raw_sql(path_, "PRAGMA application_id = 12345; CREATE TABLE choices (key TEXT PRIMARY KEY);");
  const std::string original = read_bytes(path_);
  try {
    TuningCache cache(path_, capture());
    ADD_FAILURE() << "adopted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("12345"), std::string::npos) << e.message();
  }
  EXPECT_EQ(read_bytes(path_), original);
}

TEST_F(TuningCacheTest, NewerSchemaIsMovedAside) {
  { TuningCache(path_).store("old", "env", simple_report(64, "a", 10)); }
  raw_sql(path_, "UPDATE meta SET value = 2 WHERE name = 'schema_version';");
  expect_moved_aside(read_bytes(path_));
  EXPECT_NE(logs_.at(0).find("newer"), std::string::npos) << logs_[0];
  EXPECT_FALSE(TuningCache(path_).lookup("old").has_value());
}

TEST_F(TuningCacheTest, MovedAsideNameGetsCounterWhenTaken) {
  // Occupy ".bad-<t>" for every second the open might see.
  const long long now = std::time(nullptr);
  for (long long t = now; t < now + 30; ++t) write_bytes(path_.string() + ".bad-" + std::to_string(t), "placeholder");
  write_bytes(path_, "garbage garbage garbage");
  TuningCache cache(path_, capture());
  const auto counted = files_starting(dir_, "tuning.sqlite.bad-");
  std::vector<fs::path> with_counter;
  for (const auto& p : counted) {
    if (read_bytes(p) == "garbage garbage garbage") {
      with_counter.push_back(p);
    } else {
      EXPECT_EQ(read_bytes(p), "placeholder");
    }
  }
  ASSERT_EQ(with_counter.size(), 1u);
  EXPECT_EQ(with_counter[0].string().substr(with_counter[0].string().size() - 2), "-1");
}

TEST_F(TuningCacheTest, UnopenablePathThrowsNamingIt) {
  fs::create_directories(path_);  // a directory where the file should be
  try {
    TuningCache cache(path_);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find(path_.string()), std::string::npos) << e.message();
  }
  EXPECT_TRUE(fs::is_directory(path_));  // not moved aside: it is not a damaged cache
}

TEST_F(TuningCacheTest, DefaultCachePathFollowsEnvironment) {
  struct Saved {
    const char* name;
    std::optional<std::string> value;
  };
  std::vector<Saved> saved;
  for (const char* name : {"GEMMTUNE_CACHE", "XDG_CACHE_HOME", "HOME"}) {
    const char* v = std::getenv(name);
    saved.push_back({name, v ? std::optional<std::string>(v) : std::nullopt});
  }
  setenv("GEMMTUNE_CACHE", "/x/explicit.sqlite", 1);
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(default_cache_path(), fs::path("/x/explicit.sqlite"));
  unsetenv("GEMMTUNE_CACHE");
  EXPECT_EQ(default_cache_path(), fs::path("/xdg/gemmtune/tuning.sqlite"));
  setenv("XDG_CACHE_HOME", "", 1);
  EXPECT_EQ(default_cache_path(), fs::path("/home/someone/.cache/gemmtune/tuning.sqlite"));
  setenv("XDG_CACHE_HOME", "relative/dir", 1);  // ignored, as the XDG spec says
  EXPECT_EQ(default_cache_path(), fs::path("/home/someone/.cache/gemmtune/tuning.sqlite"));
  for (const auto& s : saved)
    if (s.value)
      setenv(s.name, s.value->c_str(), 1);
    else
      unsetenv(s.name);
}

// Each child opens the (not yet existing) cache at the same moment, stores its own keys and
// reads them back; exits 0 on success.
int concurrent_child(const fs::path& path, int child, int keys, int start_fd) {
  char go = 0;
  if (read(start_fd, &go, 1) < 0) return 2;
  try {
    TuningCache cache(path);
    for (int i = 0; i < keys; ++i) {
      const std::string key = "child" + std::to_string(child) + "-key" + std::to_string(i);
      cache.store(key, "env", simple_report(i + 1, "c" + std::to_string(child), i + 1.0));
      if (!cache.lookup(key)) return 3;
      if (i % 10 == 0) (void)cache.list();
    }
    return 0;
  } catch (const std::exception& e) {
    fprintf(stderr, "child %d: %s\n", child, e.what());
    return 1;
  }
}

TEST_F(TuningCacheTest, ConcurrentWritersLoseNothing) {
  constexpr int kChildren = 4, kKeys = 50;
  int start[2];
  ASSERT_EQ(pipe(start), 0);
  std::vector<pid_t> pids;
  for (int c = 0; c < kChildren; ++c) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(start[1]);
      _exit(concurrent_child(path_, c, kKeys, start[0]));
    }
    pids.push_back(pid);
  }
  close(start[0]);
  close(start[1]);  // EOF releases every child at once
  for (pid_t pid : pids) EXPECT_TRUE(child_succeeded(pid));

  TuningCache cache(path_);
  EXPECT_EQ(cache.list().size(), static_cast<size_t>(kChildren * kKeys));
  for (int c = 0; c < kChildren; ++c)
    for (int i = 0; i < kKeys; ++i) {
      const std::string key = "child" + std::to_string(c) + "-key" + std::to_string(i);
      const auto got = cache.lookup(key);
      ASSERT_TRUE(got.has_value()) << key;
      EXPECT_EQ(got->candidate_id, "c" + std::to_string(c));
      EXPECT_EQ(cache.results(key).size(), 2u);
    }
}

TEST_F(TuningCacheTest, LookupFromAnotherProcessIsFast) {
  {
    TuningCache cache(path_);
    for (int i = 0; i < 200; ++i) cache.store("key" + std::to_string(i), "env", simple_report(i + 1, "a", 1));
  }
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Median of 1000 lookups by a process that did not write the cache, in nanoseconds.
    long long median_ns = -1;
    try {
      TuningCache cache(path_);
      std::vector<long long> ns;
      for (int i = 0; i < 1000; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        const bool found = cache.lookup("key" + std::to_string(i % 200)).has_value();
        const auto t1 = std::chrono::steady_clock::now();
        if (!found) _exit(1);
        ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
      }
      std::nth_element(ns.begin(), ns.begin() + 500, ns.end());
      median_ns = ns[500];
    } catch (...) {
      _exit(2);
    }
    _exit(write(report[1], &median_ns, sizeof median_ns) == sizeof median_ns ? 0 : 3);
  }
  close(report[1]);
  long long median_ns = -1;
  EXPECT_EQ(read(report[0], &median_ns, sizeof median_ns), static_cast<ssize_t>(sizeof median_ns));
  close(report[0]);
  EXPECT_TRUE(child_succeeded(pid));
  EXPECT_GE(median_ns, 0);
  EXPECT_LT(median_ns, 1'000'000) << "median lookup " << median_ns << " ns";
  std::printf("[ info     ] median lookup in a second process: %.1f us\n", median_ns / 1e3);
}

// ---- reliability audit 2026-12-01: D5, D8, D13, D14 -----------------------------------------

// A cache of `n` entries whose pages from a quarter of the file on are damaged (the first 64
// bytes of each): beyond what opening reads, as in the audit's D5 reproduction, and across both
// tables' leaves.
void make_deeply_corrupt_cache(const fs::path& path, int n) {
  {
    TuningCache cache(path);
    for (int i = 0; i < n; ++i) cache.store("key" + std::to_string(i), "env", simple_report(i + 1, "a", 1));
  }
  std::string bytes = read_bytes(path);
  const size_t pages = bytes.size() / 4096;
  for (size_t pg = pages / 4; pg < pages; ++pg)
    for (size_t i = 0; i < 64; ++i) bytes[pg * 4096 + i] ^= char(0xa5);
  write_bytes(path, bytes);
}

// D5: corruption found by any later read or write (not only at open) sets the file aside and
// the operation goes on with a fresh cache; `clear` recovers such a cache instead of failing.
TEST_F(TuningCacheTest, CorruptionFoundAfterOpenIsSetAsideAndTheCacheGoesOn) {
  const std::string ops[] = {"list", "clear", "store", "export"};
  for (const std::string& op : ops) {
    SCOPED_TRACE(op);
    for (const auto& p : fs::directory_iterator(dir_)) fs::remove(p.path());
    logs_.clear();
    make_deeply_corrupt_cache(path_, 1000);
    TuningCache cache(path_, capture());
    if (op == "list") EXPECT_TRUE(cache.list().empty());
    if (op == "clear") EXPECT_EQ(cache.clear(), 0);
    if (op == "export") EXPECT_NE(cache.export_json().find("\"entries\": []"), std::string::npos);
    if (op == "store") {
      cache.store("new", "env", simple_report(9, "n", 1));
      EXPECT_TRUE(cache.lookup("new").has_value());
    }
    const auto aside = files_starting(dir_, "tuning.sqlite.bad-");
    EXPECT_FALSE(aside.empty());
    ASSERT_FALSE(logs_.empty());
    EXPECT_NE(logs_.back().find("is corrupt"), std::string::npos) << logs_.back();
    EXPECT_NE(logs_.back().find("started a fresh cache"), std::string::npos) << logs_.back();
    // The fresh cache works, in this object and in a new one.
    cache.store("after", "env", simple_report(8, "b", 2));
    EXPECT_TRUE(TuningCache(path_).lookup("after").has_value());
  }
}

// D14: read-only access (`cache list`, `show`, `export`) never creates, moves or writes a file:
// damage is an Error that says what to do; a good cache reads with the directory unchanged.
TEST_F(TuningCacheTest, ReadOnlyAccessNeverCreatesOrMovesFiles) {
  auto listing = [&] {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  };
  using A = TuningCache::Access;
  // Absent: an Error, and no file made.
  EXPECT_THROW(TuningCache(path_, capture(), A::read_only), Error);
  EXPECT_TRUE(listing().empty());
  // Garbage and deep corruption: an Error naming `cache clear`, the file untouched.
  write_bytes(path_, "this is not a database, and must stay so");
  try {
    TuningCache cache(path_, capture(), A::read_only);
    ADD_FAILURE() << "garbage adopted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("gemmtune cache clear"), std::string::npos) << e.message();
  }
  EXPECT_EQ(read_bytes(path_), "this is not a database, and must stay so");
  EXPECT_EQ(listing(), std::vector<std::string>{"tuning.sqlite"});
  fs::remove(path_);
  make_deeply_corrupt_cache(path_, 1000);
  const std::string corrupt = read_bytes(path_);
  {
    TuningCache cache(path_, capture(), A::read_only);
    try {
      cache.list();
      ADD_FAILURE() << "a corrupt list succeeded";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find("gemmtune cache clear"), std::string::npos) << e.message();
    }
    EXPECT_THROW(cache.store("k", "env", simple_report(1, "a", 1)), Error);
    EXPECT_THROW(cache.clear(), Error);
  }
  EXPECT_EQ(read_bytes(path_), corrupt);
  EXPECT_EQ(listing(), std::vector<std::string>{"tuning.sqlite"});
  // A good cache (no WAL left): read, nothing created beside it.
  fs::remove(path_);
  { TuningCache(path_).store("k", "env", simple_report(4, "a", 1)); }
  const auto before = listing();
  {
    TuningCache cache(path_, capture(), A::read_only);
    EXPECT_EQ(cache.list().size(), 1u);
    EXPECT_TRUE(cache.lookup("k").has_value());
    EXPECT_EQ(cache.results("k").size(), 2u);
  }
  EXPECT_EQ(listing(), before);
  // An empty file reads as an empty cache and stays empty.
  write_bytes(path_, "");
  EXPECT_TRUE(TuningCache(path_, capture(), A::read_only).list().empty());
  EXPECT_EQ(fs::file_size(path_), 0u);
  EXPECT_TRUE(logs_.empty());
}

// D13: a valid cache in a directory this user cannot write is read by `cache list`, as another
// user (root passes every permission check: the CLI then runs as nobody).
TEST_F(TuningCacheTest, CacheInAReadOnlyDirectoryCanBeListed) {
  const bool root = geteuid() == 0;
  if (root && std::system("command -v setpriv >/dev/null 2>&1") != 0) GTEST_SKIP() << "root without setpriv";
  const fs::path ro = dir_ / "ro", cache = ro / "g.sqlite";
  fs::create_directory(ro);
  { TuningCache(cache).store("k", "env", simple_report(4, "a", 1)); }
  chmod(dir_.c_str(), 0755);
  chmod(cache.c_str(), 0666);
  chmod(ro.c_str(), 0555);
  const std::string as = root ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
  const fs::path out = dir_ / "out.txt";
  const std::string cmd = as + "'" + std::string(GEMMTUNE_CLI) + "' cache --cache '" + cache.string() + "' list >'" +
                          out.string() + "' 2>&1";
  chmod(dir_.c_str(), 0777);  // the output file, written by the other user
  const int status = std::system(cmd.c_str());
  chmod(dir_.c_str(), 0700);
  const std::string text = read_bytes(out);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << text;
  EXPECT_NE(text.find("1 entry in"), std::string::npos) << text;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(ro)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"g.sqlite"});
  chmod(ro.c_str(), 0700);
}

// D8: an import is checked entry by entry before anything is written: exactly one winner, which
// is ok, timed, checked and the entry's choice; finite numbers; printable text; no duplicates.
TEST_F(TuningCacheTest, ImportChecksEveryEntry) {
  TuningCache cache(path_, capture());
  cache.store("seed", "env", simple_report(64, "a", 10));
  const nlohmann::json good = nlohmann::json::parse(cache.export_json());
  auto with = [&](const std::function<void(nlohmann::json&)>& change) {
    nlohmann::json doc = good;
    doc["entries"][0]["key"] = "imported";
    change(doc["entries"][0]);
    return doc.dump();
  };
  struct Case {
    const char* what;
    std::function<void(nlohmann::json&)> change;
    const char* needle;
  };
  const Case cases[] = {
      {"no winner", [](nlohmann::json& e) { e["results"][0]["winner"] = false; }, "has no winner"},
      {"two winners", [](nlohmann::json& e) { e["results"][1]["winner"] = true; }, "more than one winner"},
      {"wrong winner", [](nlohmann::json& e) { e["results"][0]["status"] = "wrong"; }, "has status wrong, not ok"},
      {"failed winner", [](nlohmann::json& e) { e["results"][0]["status"] = "failed"; }, "has status failed, not ok"},
      {"winner is not the choice", [](nlohmann::json& e) { e["candidate_id"] = "other"; }, "is not the entry's choice"},
      {"no results", [](nlohmann::json& e) { e["results"] = nlohmann::json::array(); }, "results: must not be empty"},
      {"negative median", [](nlohmann::json& e) { e["results"][1]["median_us"] = -1.0; }, "results[1].median_us: must be >= 0"},
      {"choice median", [](nlohmann::json& e) { e["median_us"] = -1.0; }, "median_us: must be > 0"},
      {"unmeasured winner", [](nlohmann::json& e) { e["results"][0]["rel_err"] = nullptr; }, "measured rel_err"},
      {"samples 2^64-1", [](nlohmann::json& e) { e["results"][0]["samples"] = 18446744073709551615ull; }, "samples"},
      {"negative samples", [](nlohmann::json& e) { e["results"][0]["samples"] = -1; }, "samples: must be >= 0"},
      {"tuned_at 1e300", [](nlohmann::json& e) { e["tuned_at"] = 1e300; }, "tuned_at: must be unix seconds"},
      {"tuned_at negative", [](nlohmann::json& e) { e["tuned_at"] = -1e18; }, "tuned_at: must be unix seconds"},
      {"terminal title", [](nlohmann::json& e) { e["candidate_name"] = "n\x1b]0;owned\x07"; }, "candidate_name: holds control characters"},
      {"colour in a key", [](nlohmann::json& e) { e["key"] = "k\x1b[31m"; }, "key: holds control characters"},
      {"control in a result name", [](nlohmann::json& e) { e["results"][1]["name"] = std::string("a\0b", 3); }, "name: holds control characters"},
      {"duplicate result", [](nlohmann::json& e) { e["results"].push_back(e["results"][1]); }, "a second result"},
      {"huge problem text", [](nlohmann::json& e) { e["problem"] = std::string(5000, 'p'); }, "problem: longer than"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    try {
      cache.import_json(with(c.change));
      ADD_FAILURE() << "imported";
    } catch (const Error& err) {
      EXPECT_NE(err.message().find(c.needle), std::string::npos) << err.message();
      EXPECT_EQ(err.message().find('\x1b'), std::string::npos) << "the message echoes an ESC";
    }
    EXPECT_FALSE(cache.lookup("imported").has_value());
  }
  // A reason may span lines; the entry as exported imports.
  EXPECT_EQ(cache.import_json(with([](nlohmann::json& e) { e["results"][1]["reason"] = "line 1\n\tline 2"; })), 1);
  EXPECT_TRUE(cache.lookup("imported").has_value());
  // tuned_at null: not recorded (an export rebuilt from bench rows) imports.
  EXPECT_EQ(cache.import_json(with([](nlohmann::json& e) { e["tuned_at"] = nullptr; })), 1);
}

}  // namespace
}  // namespace gemmtune
