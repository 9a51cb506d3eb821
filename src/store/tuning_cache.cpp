// gemmtune: the tuning cache on SQLite.
//
// Tables: `meta` (schema_version), `choices` (the winner per key) and `results` (every
// candidate timed for a key); PRAGMA application_id marks the file as gemmtune's. `quarantine`
// (candidates never to be tried again, docs/isolation.md) is created by its first write, so
// that caches of earlier builds stay valid without a schema change (they simply hold none).
// Concurrency: WAL lets readers run beside a writer, and every write is one BEGIN IMMEDIATE
// transaction: a writer takes the write lock up front, so two writers never deadlock upgrading
// read locks (a SQLITE_BUSY the busy handler cannot resolve).
// Numbers: SQLite stores a NaN as NULL, so NULL reads back as NaN; JSON export writes NaN and
// infinities as null, and import reads null as NaN (except a result's rel_err: result_from_json).
#include "gemmtune/tuning_cache.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <set>
#include <nlohmann/json.hpp>
#include <source_location>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>

#include "core/json_input.hpp"
#include "core/report_json.hpp"
#include "core/settings.hpp"
#include "core/text.hpp"
#include "gemmtune/error.hpp"
#include "store/secure_fs.hpp"

#ifndef GEMMTUNE_VERSION
#define GEMMTUNE_VERSION "unknown"
#endif

namespace gemmtune {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kApplicationId = 0x474d5455;  // "GMTU" in the SQLite header
constexpr int kSchemaVersion = 1;
constexpr int kBusyTimeoutMs = 10'000;
constexpr const char* kFormat = "gemmtune-cache";
// Export format 2: results in to_json's encoding (core/report_json.hpp). 1: results with
// "candidate_id", "candidate_name" and rel_err -1 when not measured; still imported.
constexpr int kFormatVersion = 2;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

constexpr const char* kChoiceColumns =
    "key, environment, problem, backend, candidate_id, candidate_name, median_us, tuned_at";
constexpr const char* kResultColumns =
    "backend, candidate_id, candidate_name, status, reason, rel_err, median_us, p20_us, p80_us, "
    "samples, compile_s, is_default, winner";

using Statement = std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)>;

// Throws Error located at the caller (not at this helper).
[[noreturn]] void raise(const std::string& message, std::source_location at = std::source_location::current()) {
  throw Error(message, at.file_name(), static_cast<int>(at.line()));
}

// The SQLite result code of the last failure Sql::fail reported on this thread: lets a caller
// tell corruption (SQLITE_CORRUPT, SQLITE_NOTADB) from other failures after the statement and
// the transaction that saw it are gone (a ROLLBACK resets the connection's own error code).
thread_local int t_last_sqlite = SQLITE_OK;
thread_local std::string t_last_sqlite_message;

bool is_corruption(int rc) { return rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB; }

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

// A connection and its path: every failure names the file and carries SQLite's own message.
struct Sql {
  sqlite3* db;
  const fs::path& path;

  [[noreturn]] void fail(const std::string& what, std::source_location at = std::source_location::current()) const {
    t_last_sqlite = sqlite3_errcode(db) & 0xff;
    t_last_sqlite_message = sqlite3_errmsg(db);
    raise("tuning cache " + path.string() + ": " + what + ": " + sqlite3_errmsg(db), at);
  }
  void exec(const char* sql, const char* what) const {
    if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) fail(what);
  }
  Statement prepare(const std::string& sql, unsigned flags = 0) const {
    sqlite3_stmt* raw = nullptr;
    if (sqlite3_prepare_v3(db, sql.c_str(), -1, flags, &raw, nullptr) != SQLITE_OK) fail("prepare '" + sql + "'");
    return Statement(raw, &sqlite3_finalize);
  }
};

int bind_one(sqlite3_stmt* s, int i, const std::string& v) {
  return sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
}
int bind_one(sqlite3_stmt* s, int i, double v) {
  return std::isnan(v) ? sqlite3_bind_null(s, i) : sqlite3_bind_double(s, i, v);
}
int bind_one(sqlite3_stmt* s, int i, int v) { return sqlite3_bind_int(s, i, v); }
int bind_one(sqlite3_stmt* s, int i, bool v) { return sqlite3_bind_int(s, i, v ? 1 : 0); }

// Binds args to ?1, ?2, ... in order.
template <class... Args>
void bind_all(const Sql& sql, sqlite3_stmt* s, const Args&... args) {
  int i = 0, rc = SQLITE_OK;
  ((rc = rc == SQLITE_OK ? bind_one(s, ++i, args) : rc), ...);
  if (rc != SQLITE_OK) sql.fail("bind");
}

// One step: true on a row, false when done; throws on error.
bool step(const Sql& sql, sqlite3_stmt* s, const std::string& what) {
  const int rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  sql.fail(what);
}

std::string text(sqlite3_stmt* s, int i) {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
  return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(s, i))) : std::string();
}
double real(sqlite3_stmt* s, int i) {
  return sqlite3_column_type(s, i) == SQLITE_NULL ? kNaN : sqlite3_column_double(s, i);
}

// Resets a reused statement on scope exit: an unreset statement keeps its read transaction
// open, which pins an old WAL snapshot (stale reads, no checkpoints).
struct ResetOnExit {
  sqlite3_stmt* s;
  ~ResetOnExit() {
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
  }
};

// Repeats `attempt` (which returns an SQLite code) while it reports BUSY or LOCKED, for up to
// kBusyTimeoutMs: some lock paths (a journal-mode change, for one) return BUSY at once instead
// of waiting in the busy handler.
template <class Attempt>
int retry_busy(Attempt&& attempt) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  for (int n = 0;; ++n) {
    const int rc = attempt();
    if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || std::chrono::steady_clock::now() >= deadline) return rc;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(1 << std::min(n, 7), 100)) +
                                std::chrono::microseconds(getpid() % 1000));  // de-synchronize processes
  }
}

// BEGIN ... COMMIT; rolled back unless committed. Writers begin IMMEDIATE (see the top).
class Transaction {
 public:
  enum Kind { read, write };
  Transaction(const Sql& sql, Kind kind) : sql_(sql) {
    const char* begin = kind == write ? "BEGIN IMMEDIATE" : "BEGIN";
    if (retry_busy([&] { return sqlite3_exec(sql.db, begin, nullptr, nullptr, nullptr); }) != SQLITE_OK)
      sql.fail(begin);
  }
  ~Transaction() {
    if (open_) sqlite3_exec(sql_.db, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit() {
    sql_.exec("COMMIT", "COMMIT");
    open_ = false;
  }

 private:
  const Sql& sql_;
  bool open_ = true;
};

// ---- status text --------------------------------------------------------------------------

constexpr CandidateStatus kStatuses[] = {CandidateStatus::ok, CandidateStatus::wrong, CandidateStatus::failed,
                                         CandidateStatus::pruned};

// Inverse of to_string(CandidateStatus); throws Error naming `field`.
CandidateStatus status_from_string(const std::string& s, const std::string& field) {
  std::string known;
  for (CandidateStatus st : kStatuses) {
    if (s == to_string(st)) return st;
    known += (known.empty() ? "" : ", ") + std::string(to_string(st));
  }
  raise(field + ": '" + s + "' is not a status (" + known + ")");
}

// ---- rows ---------------------------------------------------------------------------------

CachedChoice choice_from_row(sqlite3_stmt* s) {
  return CachedChoice{text(s, 0), text(s, 1), text(s, 2), text(s, 3), text(s, 4), text(s, 5), real(s, 6), real(s, 7)};
}

CandidateResult result_from_row(const Sql& sql, sqlite3_stmt* s) {
  CandidateResult r;
  r.backend = text(s, 0);
  r.id = text(s, 1);
  r.name = text(s, 2);
  r.status = status_from_string(text(s, 3), "tuning cache " + sql.path.string() + ": results.status");
  r.reason = text(s, 4);
  r.rel_err = real(s, 5);
  r.median_us = real(s, 6);
  r.p20_us = real(s, 7);
  r.p80_us = real(s, 8);
  r.samples = sqlite3_column_int(s, 9);
  r.compile_s = real(s, 10);
  r.is_default = sqlite3_column_int(s, 11) != 0;
  r.winner = sqlite3_column_int(s, 12) != 0;
  return r;
}

std::vector<CachedChoice> read_choices(const Sql& sql) {
  Statement s = sql.prepare(std::string("SELECT ") + kChoiceColumns + " FROM choices ORDER BY key");
  std::vector<CachedChoice> out;
  while (step(sql, s.get(), "list")) out.push_back(choice_from_row(s.get()));
  return out;
}

std::vector<CandidateResult> read_results(const Sql& sql, const std::string& key) {
  Statement s = sql.prepare(std::string("SELECT ") + kResultColumns + " FROM results WHERE key = ?1");
  bind_all(sql, s.get(), key);
  std::vector<CandidateResult> out;
  while (step(sql, s.get(), "results")) out.push_back(result_from_row(sql, s.get()));
  std::sort(out.begin(), out.end(), best_first);
  return out;
}

// Replaces everything stored under c.key. The caller holds a write transaction.
void write_entry(const Sql& sql, const CachedChoice& c, const std::vector<CandidateResult>& results,
                 const std::string& what) {
  Statement del = sql.prepare("DELETE FROM results WHERE key = ?1");
  bind_all(sql, del.get(), c.key);
  step(sql, del.get(), what);

  Statement choice = sql.prepare(std::string("INSERT OR REPLACE INTO choices (") + kChoiceColumns +
                                 ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
  bind_all(sql, choice.get(), c.key, c.environment, c.problem, c.backend, c.candidate_id, c.candidate_name, c.median_us,
           c.tuned_at);
  step(sql, choice.get(), what);

  Statement row = sql.prepare(std::string("INSERT INTO results (key, ") + kResultColumns +
                              ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)");
  for (const CandidateResult& r : results) {
    bind_all(sql, row.get(), c.key, r.backend, r.id, r.name, std::string(to_string(r.status)), r.reason, r.rel_err,
             r.median_us, r.p20_us, r.p80_us, r.samples, r.compile_s, r.is_default, r.winner);
    step(sql, row.get(), what + " (" + r.backend + " " + r.id + ")");
    sqlite3_reset(row.get());
  }
}

// ---- opening: what is at the path ---------------------------------------------------------

enum class Health { fresh, ours, bad, foreign };
struct Verdict {
  Health health = Health::bad;
  std::string why;  // for bad: completes "tuning cache <path> ..."
};

// The single integer `query` returns, or `none` when it returns no row.
int64_t scalar(const Sql& sql, const char* query, int64_t none) {
  Statement s = sql.prepare(query);
  return step(sql, s.get(), query) ? sqlite3_column_int64(s.get(), 0) : none;
}

Verdict inspect_schema(const Sql& sql) {
  const int64_t app = scalar(sql, "PRAGMA application_id", 0);
  const int64_t objects = scalar(sql, "SELECT count(*) FROM sqlite_master", 0);
  if (app == 0 && objects == 0) return {Health::fresh, {}};
  if (app == 0)
    return {Health::foreign, "is another program's SQLite database (it has " + std::to_string(objects) +
                                 " schema objects and no gemmtune application_id)"};
  if (app != kApplicationId)
    return {Health::foreign, "is another program's SQLite database (application_id " + std::to_string(app) + ")"};
  const int64_t tables = scalar(
      sql, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('meta', 'choices', 'results')", 0);
  if (tables != 3) return {Health::bad, "lacks gemmtune's tables"};
  const int64_t version = scalar(sql, "SELECT CAST(value AS INTEGER) FROM meta WHERE name = 'schema_version'", -1);
  if (version > kSchemaVersion)
    return {Health::bad, "has schema version " + std::to_string(version) + ", newer than this build's " +
                             std::to_string(kSchemaVersion)};
  if (version != kSchemaVersion) return {Health::bad, "has an unknown schema version " + std::to_string(version)};
  return {Health::ours, {}};
}

// Damage (not a database, corrupt) is a verdict; any other failure (I/O, permissions, a lock
// held past the busy timeout) throws, since the file may be fine. The caller holds a transaction,
// so that every query sees the same snapshot (not half of another process's initialization).
Verdict inspect(const Sql& sql) {
  try {
    return inspect_schema(sql);
  } catch (const Error&) {
    const int rc = sqlite3_errcode(sql.db);
    if (rc != SQLITE_NOTADB && rc != SQLITE_CORRUPT) throw;
    return {Health::bad, std::string("is not a readable SQLite database (") + sqlite3_errmsg(sql.db) + ")"};
  }
}

std::string schema_sql() {
  return std::string(
             "CREATE TABLE meta (name TEXT PRIMARY KEY, value NOT NULL) WITHOUT ROWID;"
             "CREATE TABLE choices (key TEXT PRIMARY KEY, environment TEXT NOT NULL, problem TEXT NOT NULL,"
             " backend TEXT NOT NULL, candidate_id TEXT NOT NULL, candidate_name TEXT NOT NULL,"
             " median_us REAL, tuned_at REAL) WITHOUT ROWID;"
             "CREATE TABLE results (key TEXT NOT NULL, backend TEXT NOT NULL, candidate_id TEXT NOT NULL,"
             " candidate_name TEXT NOT NULL, status TEXT NOT NULL, reason TEXT NOT NULL, rel_err REAL,"
             " median_us REAL, p20_us REAL, p80_us REAL, samples INTEGER NOT NULL, compile_s REAL,"
             " is_default INTEGER NOT NULL, winner INTEGER NOT NULL,"
             " PRIMARY KEY (key, backend, candidate_id)) WITHOUT ROWID;"
             "INSERT INTO meta VALUES ('schema_version', ") +
         std::to_string(kSchemaVersion) + "), ('created_by', 'gemmtune " GEMMTUNE_VERSION "');" +
         "PRAGMA application_id = " + std::to_string(kApplicationId) + ";";
}

// Creates the schema in an empty database. Re-inspects under the write lock: another process
// may have initialized (or replaced) the file since our first look.
Verdict initialize(const Sql& sql, const std::function<void(const std::string&)>& warn) {
  // The journal mode persists in the file and cannot change inside a transaction.
  Statement mode = sql.prepare("PRAGMA journal_mode = WAL");
  const int rc = retry_busy([&] {
    sqlite3_reset(mode.get());
    return sqlite3_step(mode.get());
  });
  if (rc != SQLITE_ROW) sql.fail("PRAGMA journal_mode = WAL");
  if (const std::string got = text(mode.get(), 0); got != "wal")
    warn("warning: tuning cache " + sql.path.string() + ": WAL journal unavailable (journal mode '" + got +
         "'); concurrent tuners will wait on each other");
  mode.reset();
  Transaction tx(sql, Transaction::write);
  Verdict v = inspect(sql);
  if (v.health != Health::fresh) return v;
  sql.exec(schema_sql().c_str(), "create the schema");
  tx.commit();
  return {Health::ours, {}};
}

// An exclusive flock() on "<cache>.lock", released when destroyed (or when the process dies).
class LockFile {
 public:
  explicit LockFile(const fs::path& path) : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) {
    if (fd_ < 0) raise("tuning cache: cannot create the lock file " + path.string() + ": " + std::strerror(errno));
    while (::flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) {
        const int err = errno;
        ::close(fd_);
        raise("tuning cache: cannot lock " + path.string() + ": " + std::strerror(err));
      }
  }
  ~LockFile() { ::close(fd_); }
  LockFile(const LockFile&) = delete;
  LockFile& operator=(const LockFile&) = delete;

 private:
  int fd_;
};

// rename() that never replaces `to`; false with errno set on failure (EEXIST if `to` exists).
bool rename_noreplace(const fs::path& from, const fs::path& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return true;
  if (errno != EINVAL && errno != ENOSYS) return false;
  // Filesystem without RENAME_NOREPLACE: check, then rename (racy only against another mover).
  if (::access(to.c_str(), F_OK) == 0) {
    errno = EEXIST;
    return false;
  }
  return ::rename(from.c_str(), to.c_str()) == 0;
}

// Moves SQLite's side files of `from` to the same names for `to`: a WAL or rollback journal left
// behind would be replayed into the fresh cache. An empty WAL and the shared-memory index (which
// SQLite rebuilds from the WAL) hold no data: those are removed instead.
void move_side_files(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  const fs::path wal = from.string() + "-wal";
  const auto wal_size = fs::file_size(wal, ec);
  const bool wal_holds_data = !ec && wal_size > 0;
  for (const char* side : {"-wal", "-shm", "-journal"}) {
    const fs::path file = from.string() + side;
    const bool drop = !wal_holds_data && std::strcmp(side, "-journal") != 0;
    const bool done = drop ? ::unlink(file.c_str()) == 0 : rename_noreplace(file, to.string() + side);
    if (!done && errno != ENOENT)
      raise("tuning cache " + from.string() + ": cannot move " + file.string() + " aside: " + std::strerror(errno));
  }
}

// Moves `path` to "<path>.bad-<unix time>[-N]" with its side files; nullopt if it does not exist.
std::optional<fs::path> move_aside(const fs::path& path) {
  const std::string base = path.string() + ".bad-" + std::to_string(static_cast<long long>(unix_now()));
  for (int n = 0;; ++n) {
    const fs::path target = n == 0 ? base : base + "-" + std::to_string(n);
    if (rename_noreplace(path, target)) {
      move_side_files(path, target);
      return target;
    }
    if (errno == ENOENT) return std::nullopt;
    if (errno != EEXIST)
      raise("tuning cache " + path.string() + ": unusable, and cannot move it to " + target.string() + ": " +
            std::strerror(errno));
  }
}

// ---- JSON ---------------------------------------------------------------------------------

struct Entry {
  CachedChoice choice;
  std::vector<CandidateResult> results;
};

// An entry of the export: its choice, then its results in the one encoding of a candidate result
// (core/report_json.hpp: "id", "name", rel_err null when not measured).
nlohmann::ordered_json entry_json(const CachedChoice& c, const std::vector<CandidateResult>& results) {
  nlohmann::ordered_json rs = nlohmann::ordered_json::array();
  for (const CandidateResult& r : results) rs.push_back(nlohmann::ordered_json(to_json(r)));
  return {{"key", c.key},
          {"environment", c.environment},
          {"problem", c.problem},
          {"backend", c.backend},
          {"candidate_id", c.candidate_id},
          {"candidate_name", c.candidate_name},
          {"median_us", c.median_us},
          {"tuned_at", c.tuned_at},
          {"results", std::move(rs)}};
}

// Typed access to one JSON object; every error names the field by its path in the document.
class Fields {
 public:
  Fields(const json& obj, std::string where) : obj_(obj), where_(std::move(where)) {
    if (!obj_.is_object())
      raise("tuning cache import: " + (where_.empty() ? "document" : where_) + ": must be an object");
  }
  std::string path(const char* name) const { return where_.empty() ? name : where_ + "." + name; }
  std::string string(const char* name) const {
    const json& v = get(name);
    if (!v.is_string()) fail(name, "must be a string");
    return v.get<std::string>();
  }
  double number(const char* name) const {  // null is NaN
    const json& v = get(name);
    if (v.is_null()) return kNaN;
    if (!v.is_number()) fail(name, "must be a number");
    return v.get<double>();
  }
  int integer(const char* name) const {
    const json& v = get(name);
    if (!v.is_number_integer()) fail(name, "must be an integer");
    const auto i = v.get<int64_t>();
    if (i < INT_MIN || i > INT_MAX) fail(name, "out of range");
    return static_cast<int>(i);
  }
  bool boolean(const char* name) const {
    const json& v = get(name);
    if (!v.is_boolean()) fail(name, "must be true or false");
    return v.get<bool>();
  }
  const json& array(const char* name) const {
    const json& v = get(name);
    if (!v.is_array()) fail(name, "must be an array");
    return v;
  }
  [[noreturn]] void fail(const char* name, const std::string& why) const {
    raise("tuning cache import: " + path(name) + ": " + why);
  }

 private:
  const json& get(const char* name) const {
    const auto it = obj_.find(name);
    if (it == obj_.end()) fail(name, "missing");
    return *it;
  }
  const json& obj_;
  std::string where_;
};

// A result of a version-2 export (to_json's fields), or of a version-1 one ("candidate_id",
// "candidate_name"; rel_err -1 when not measured).
CandidateResult result_from_json(const json& j, const std::string& where, int version) {
  const Fields f(j, where);
  CandidateResult r;
  r.backend = f.string("backend");
  r.id = f.string(version == 1 ? "candidate_id" : "id");
  r.name = f.string(version == 1 ? "candidate_name" : "name");
  r.status = status_from_string(f.string("status"), "tuning cache import: " + f.path("status"));
  r.reason = f.string("reason");
  r.rel_err = f.number("rel_err");
  // Version 2 writes null both for "not measured" and for a NaN (JSON has none). Every candidate
  // that ran was measured, a wrong one always: its null is NaN; any other null is not measured.
  if (version >= 2 && std::isnan(r.rel_err) && r.status != CandidateStatus::wrong) r.rel_err = -1;
  r.median_us = f.number("median_us");
  r.p20_us = f.number("p20_us");
  r.p80_us = f.number("p80_us");
  r.samples = f.integer("samples");
  r.compile_s = f.number("compile_s");
  r.is_default = f.boolean("is_default");
  r.winner = f.boolean("winner");
  return r;
}

// Text an engine could have stored: no control characters (a reason may hold tabs and
// newlines), at most kMaxText bytes (a reason kMaxReason).
constexpr size_t kMaxText = 4096, kMaxReason = 65536;
void check_text(const Fields& f, const char* name, const std::string& v, bool reason = false) {
  if (v.size() > (reason ? kMaxReason : kMaxText))
    f.fail(name, "longer than " + std::to_string(reason ? kMaxReason : kMaxText) + " bytes");
  if (!is_printable_text(v, reason ? std::string_view("\t\n") : std::string_view()))
    f.fail(name, "holds control characters: \"" + printable(v) + "\"");
}

// A number that is unset (NaN: null in the export) or finite and >= 0.
void check_unset_or_nonnegative(const Fields& f, const char* name, double v) {
  if (!std::isnan(v) && !(v >= 0 && std::isfinite(v))) f.fail(name, "must be >= 0 and finite, or null");
}

// A result as a tune stores it: printable text, no negative or infinite timing.
void check_result(const CandidateResult& r, const json& j, const std::string& where, int version) {
  const Fields f(j, where);
  check_text(f, "backend", r.backend);
  check_text(f, version == 1 ? "candidate_id" : "id", r.id);
  check_text(f, version == 1 ? "candidate_name" : "name", r.name);
  check_text(f, "reason", r.reason, true);
  if (!std::isnan(r.rel_err) && r.rel_err != -1 && !(r.rel_err >= 0 && std::isfinite(r.rel_err)))
    f.fail("rel_err", "must be >= 0 and finite, or not measured");
  check_unset_or_nonnegative(f, "median_us", r.median_us);
  check_unset_or_nonnegative(f, "p20_us", r.p20_us);
  check_unset_or_nonnegative(f, "p80_us", r.p80_us);
  check_unset_or_nonnegative(f, "compile_s", r.compile_s);
  if (r.samples < 0) f.fail("samples", "must be >= 0");
}

Entry entry_from_json(const json& j, const std::string& where, int version) {
  const Fields f(j, where);
  Entry e;
  e.choice =
      CachedChoice{f.string("key"),          f.string("environment"),    f.string("problem"),   f.string("backend"),
                   f.string("candidate_id"), f.string("candidate_name"), f.number("median_us"), f.number("tuned_at")};
  if (e.choice.key.empty()) f.fail("key", "must not be empty");
  check_text(f, "key", e.choice.key);
  check_text(f, "environment", e.choice.environment);
  check_text(f, "problem", e.choice.problem);
  check_text(f, "backend", e.choice.backend);
  check_text(f, "candidate_id", e.choice.candidate_id);
  check_text(f, "candidate_name", e.choice.candidate_name);
  if (!(e.choice.median_us > 0 && std::isfinite(e.choice.median_us))) f.fail("median_us", "must be > 0 and finite");
  // Unix seconds up to the year 9999, or null: not recorded (an export rebuilt from bench rows).
  if (!std::isnan(e.choice.tuned_at) && !(e.choice.tuned_at >= 0 && e.choice.tuned_at <= 253402300799.0))
    f.fail("tuned_at", "must be unix seconds between 1970 and 9999, or null");
  const json& results = f.array("results");
  if (results.empty()) f.fail("results", "must not be empty (the winner is one of them)");
  std::set<std::pair<std::string, std::string>> seen;
  const CandidateResult* winner = nullptr;
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string at = f.path("results") + "[" + std::to_string(i) + "]";
    CandidateResult r = result_from_json(results[i], at, version);
    check_result(r, results[i], at, version);
    if (!seen.emplace(r.backend, r.id).second)
      raise("tuning cache import: " + at + ": a second result for " + printable(r.backend) + " " + printable(r.id));
    e.results.push_back(std::move(r));
  }
  // Exactly one winner: a correct, timed result that is the entry's choice.
  for (const CandidateResult& r : e.results) {
    if (!r.winner) continue;
    if (winner) f.fail("results", "has more than one winner");
    winner = &r;
  }
  if (!winner) f.fail("results", "has no winner");
  if (winner->status != CandidateStatus::ok)
    f.fail("results", "winner " + printable(winner->backend) + " " + printable(winner->id) + " has status " +
                          to_string(winner->status) + ", not ok");
  if (winner->backend != e.choice.backend || winner->id != e.choice.candidate_id)
    f.fail("results", "winner " + printable(winner->backend) + " " + printable(winner->id) +
                          " is not the entry's choice " + printable(e.choice.backend) + " " +
                          printable(e.choice.candidate_id));
  if (!(winner->median_us > 0 && std::isfinite(winner->median_us)) || !(winner->rel_err >= 0 && std::isfinite(winner->rel_err)))
    f.fail("results", "winner " + printable(winner->backend) + " " + printable(winner->id) +
                          " lacks a finite median_us > 0 and a measured rel_err");
  return e;
}

// Parses and validates a whole export before anything is written.
std::vector<Entry> parse_export(const std::string& text) {
  const json doc = parse_json_input(text, "tuning cache import");
  const Fields top(doc, "");
  if (const std::string format = top.string("format"); format != kFormat)
    top.fail("format", "'" + format + "', expected '" + kFormat + "'");
  const int version = top.integer("version");
  if (version < 1 || version > kFormatVersion)
    top.fail("version", std::to_string(version) + " is not supported (this build reads versions 1 to " +
                            std::to_string(kFormatVersion) + ")");
  const json& entries = top.array("entries");
  std::vector<Entry> out;
  for (size_t i = 0; i < entries.size(); ++i)
    out.push_back(entry_from_json(entries[i], "entries[" + std::to_string(i) + "]", version));
  return out;
}


}  // namespace

// ---- TuningCache --------------------------------------------------------------------------

TuningCache::TuningCache(fs::path path, Log log, Access access)
    : path_(std::move(path)), log_(std::move(log)), access_(access) {
  GT_CHECK(!path_.empty(), "tuning cache: empty path");
  try {
    open_or_reset();
  } catch (...) {
    close();
    throw;
  }
}

TuningCache::~TuningCache() { close(); }

namespace {

// "file:<path>?immutable=1": read without locks or side files (a read-only directory).
std::string immutable_uri(const fs::path& path) {
  std::string uri = "file:";
  for (char c : fs::absolute(path).string()) {
    if (c == '%' || c == '?' || c == '#') {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", static_cast<unsigned char>(c));
      uri += hex;
    } else {
      uri += c;
    }
  }
  return uri + "?immutable=1";
}

uint64_t inode_of(const fs::path& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? uint64_t(st.st_ino) : 0;
}

// What changes when anything writes the file: inode, size, mtime in ns ("" when absent).
std::string stamp_of(const fs::path& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "";
  return std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

}  // namespace

void TuningCache::connect(bool immutable) const {
  const bool ro = access_ == Access::read_only;
  int flags = (ro ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX;  // mutex_ serializes
  if (immutable) flags |= SQLITE_OPEN_URI;
  const std::string name = immutable ? immutable_uri(path_) : path_.string();
  const int rc = sqlite3_open_v2(name.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    const std::string why = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    close();
    GT_THROW("tuning cache " + path_.string() + ": cannot open: " + why);
  }
  inode_ = inode_of(path_);
  stamp_ = immutable ? stamp_of(path_) : std::string();
  sqlite3_busy_timeout(db_, kBusyTimeoutMs);
}

void TuningCache::close() const noexcept {
  lookup_.reset();
  if (db_) sqlite3_close_v2(db_);
  db_ = nullptr;
}

void TuningCache::warn(const std::string& message) const {
  if (log_)
    log_(message);
  else
    std::cerr << "gemmtune: " << message << '\n';
}

// Opens the cache. Read-write: a damaged gemmtune cache is moved aside (never deleted) and
// replaced. Moving happens only under "<path>.lock", after a second look: so two processes never
// move the same file, nor a fresh cache that another process has just put in its place. Opening a
// good cache or an empty file takes no lock file. Another program's database is refused as is.
void TuningCache::open_or_reset() {
  std::string why;
  if (access_ == Access::read_only) {
    // Nothing created: the file must be there. Where SQLite cannot open a WAL database read-only
    // (its -shm cannot be created: a read-only directory), read it as immutable.
    struct stat st;
    if (::stat(path_.c_str(), &st) != 0)
      GT_THROW("tuning cache " + path_.string() + ": cannot open: " + std::strerror(errno));
    // No WAL: no connection is open on the file, and a read-only SQLite connection would create
    // the -wal and -shm side files (and could not remove them). Read it as immutable then; a read
    // that a writer overlaps (the file changed meanwhile) is done again through SQLite's locks.
    struct stat wal;
    adopt_immutable_ = ::stat((path_.string() + "-wal").c_str(), &wal) != 0;
    t_last_sqlite = SQLITE_OK;
    try {
      if (adopt(why)) return;
    } catch (const Error&) {
      const int rc = t_last_sqlite;
      if (rc != SQLITE_CANTOPEN && rc != SQLITE_READONLY && rc != SQLITE_IOERR && rc != SQLITE_PERM) throw;
      close();
      adopt_immutable_ = true;
      if (adopt(why)) return;
    }
    GT_THROW("tuning cache " + path_.string() + " " + why +
             "; left as it is (a read-only command): `gemmtune cache clear` sets it aside and starts a fresh cache");
  }
  if (path_.has_parent_path()) {
    try {
      securefs::make_private_dirs(path_.parent_path());
    } catch (const Error& e) {
      GT_THROW("tuning cache " + path_.string() + ": cannot create its directory: " + e.message());
    }
  }
  // A new cache file is private (SQLite's side files take its mode). ":memory:" names no file.
  if (path_ != ":memory:")
    if (const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600); fd >= 0) ::close(fd);
  if (adopt(why)) return;
  const LockFile lock(path_.string() + ".lock");
  if (adopt(why)) return;
  if (const auto moved = move_aside(path_))
    warn("warning: tuning cache " + path_.string() + " " + why + "; moved it to " + moved->string() +
         " and started a fresh cache");
  if (!adopt(why)) GT_THROW("tuning cache " + path_.string() + ": " + why + ", even after moving the old file aside");
}

// Connects and keeps the connection if the file is a gemmtune cache, making one of an empty
// file (read_only: an empty file reads as an empty cache). Otherwise closes and returns false
// with the reason; another program's database throws (it is never moved). Until the file is
// known to be ours, SQLite must not checkpoint or delete WAL side files on close: it deletes them
// by name, and the names may belong to a fresh cache by then.
bool TuningCache::adopt(std::string& why_not) const {
  connect(adopt_immutable_);
  sqlite3_db_config(db_, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  const Sql sql{db_, path_};
  Verdict v;
  {
    Transaction tx(sql, Transaction::read);
    v = inspect(sql);
  }
  if (v.health == Health::foreign) {
    close();
    GT_THROW_CODE(invalid, "tuning cache " + path_.string() + " " + v.why +
                               ": refused and left as it is (give gemmtune a cache path of its own: --cache, "
                               "$GEMMTUNE_CACHE)");
  }
  if (v.health == Health::fresh && access_ == Access::read_only) {
    empty_ = true;
    return true;
  }
  if (v.health == Health::fresh) v = initialize(sql, [this](const std::string& m) { warn(m); });
  if (v.health != Health::ours) {
    close();
    why_not = v.why;
    return false;
  }
  empty_ = false;
  if (access_ == Access::read_write) {
    sqlite3_db_config(db_, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 0, nullptr);
    // WAL + NORMAL: a power loss may drop the last stores, never corrupts the file.
    sql.exec("PRAGMA synchronous = NORMAL", "PRAGMA synchronous");
  }
  lookup_ =
      sql.prepare(std::string("SELECT ") + kChoiceColumns + " FROM choices WHERE key = ?1", SQLITE_PREPARE_PERSISTENT);
  return true;
}

template <class Op>
auto TuningCache::recovering(const char* what, Op&& op) const -> decltype(op()) {
  t_last_sqlite = SQLITE_OK;
  if (!stamp_.empty()) {  // an immutable read: valid only if nothing wrote the file meanwhile
    try {
      if constexpr (std::is_void_v<decltype(op())>) {
        op();
        if (stamp_of(path_) == stamp_) return;
      } else {
        auto out = op();
        if (stamp_of(path_) == stamp_) return out;
      }
    } catch (const Error&) {
      if (stamp_of(path_) == stamp_) {  // nothing wrote the file: the failure is the file's
        if (!is_corruption(t_last_sqlite)) throw;
        reset_after_corruption(what);   // throws for read-only access
      }
    }
    // Read again through SQLite's locks (a writer is there: its side files exist already).
    close();
    std::string why;
    if (!const_cast<TuningCache*>(this)->adopt_locked(why))
      GT_THROW("tuning cache " + path_.string() + " " + why + "; left as it is (a read-only command)");
    t_last_sqlite = SQLITE_OK;
  }
  try {
    return op();
  } catch (const Error&) {
    if (!is_corruption(t_last_sqlite)) throw;
  }
  reset_after_corruption(what);
  return op();
}

// Read-only: the connection through SQLite's locks instead of an immutable one.
bool TuningCache::adopt_locked(std::string& why_not) {
  adopt_immutable_ = false;
  return adopt(why_not);
}

// Corruption found after the open (pages no earlier read touched): the file is set aside as at
// open, under the lock, unless another process has already replaced it (then it is adopted).
void TuningCache::reset_after_corruption(const char* what) const {
  const std::string found = std::string(what) + ": " + t_last_sqlite_message;
  if (access_ == Access::read_only)
    GT_THROW("tuning cache " + path_.string() + " is corrupt (" + found +
             "); left as it is (a read-only command): `gemmtune cache clear` sets it aside and starts a fresh cache");
  const uint64_t corrupt = inode_;
  close();
  const LockFile lock(path_.string() + ".lock");
  if (inode_of(path_) == corrupt && corrupt != 0)
    if (const auto moved = move_aside(path_))
      warn("warning: tuning cache " + path_.string() + " is corrupt (" + found + "); moved it to " + moved->string() +
           " and started a fresh cache");
  std::string why;
  if (!adopt(why)) GT_THROW("tuning cache " + path_.string() + ": " + why + ", even after moving the corrupt file aside");
}

std::optional<CachedChoice> TuningCache::lookup(const std::string& key) const {
  std::lock_guard lock(mutex_);
  if (empty_) return std::nullopt;
  return recovering("lookup", [&]() -> std::optional<CachedChoice> {
    const Sql sql{db_, path_};
    sqlite3_stmt* s = lookup_.get();
    const ResetOnExit reset{s};
    bind_all(sql, s, key);
    if (!step(sql, s, "lookup")) return std::nullopt;
    return choice_from_row(s);
  });
}

void TuningCache::store(const std::string& key, const std::string& environment, const TuneReport& report) {
  GT_CHECK(!key.empty(), "tuning cache store: empty key");
  const CandidateResult* w = report.winner();
  GT_CHECK(w, "tuning cache store: the report for key '" + key + "' has no winner");
  const CachedChoice choice{key,          environment, report.problem_canonical(), w->backend, w->id, w->name,
                            w->median_us, unix_now()};
  std::lock_guard lock(mutex_);
  GT_CHECK(access_ == Access::read_write, "tuning cache " + path_.string() + ": opened read-only");
  recovering("store", [&] {
    const Sql sql{db_, path_};
    Transaction tx(sql, Transaction::write);
    write_entry(sql, choice, report.results, "store '" + key + "'");
    tx.commit();
  });
}

std::vector<CandidateResult> TuningCache::results(const std::string& key) const {
  std::lock_guard lock(mutex_);
  if (empty_) return {};
  return recovering("results", [&] { return read_results(Sql{db_, path_}, key); });
}

std::vector<CachedChoice> TuningCache::list() const {
  std::lock_guard lock(mutex_);
  if (empty_) return {};
  return recovering("list", [&] { return read_choices(Sql{db_, path_}); });
}

namespace {
bool has_quarantine_table(const Sql& sql) {
  return scalar(sql, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'quarantine'", 0) > 0;
}
}  // namespace

void TuningCache::quarantine(const Quarantined& q) {
  GT_CHECK(!q.environment.empty() && !q.backend.empty() && !q.candidate_id.empty(),
           "tuning cache quarantine: environment, backend and candidate id must not be empty");
  std::lock_guard lock(mutex_);
  GT_CHECK(access_ == Access::read_write, "tuning cache " + path_.string() + ": opened read-only");
  recovering("quarantine", [&] {
    const Sql sql{db_, path_};
    Transaction tx(sql, Transaction::write);
    sql.exec("CREATE TABLE IF NOT EXISTS quarantine (environment TEXT NOT NULL, scope TEXT NOT NULL,"
             " backend TEXT NOT NULL, candidate_id TEXT NOT NULL, candidate_name TEXT NOT NULL, status TEXT NOT NULL,"
             " reason TEXT NOT NULL, at REAL, PRIMARY KEY (environment, scope, backend, candidate_id)) WITHOUT ROWID",
             "create the quarantine table");
    Statement s = sql.prepare(
        "INSERT OR REPLACE INTO quarantine (environment, scope, backend, candidate_id, candidate_name, status, reason, at)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    bind_all(sql, s.get(), q.environment, q.scope, q.backend, q.candidate_id, q.candidate_name,
             std::string(to_string(q.status)), q.reason, unix_now());
    step(sql, s.get(), "quarantine " + q.backend + " " + q.candidate_id);
    tx.commit();
  });
}

std::vector<Quarantined> TuningCache::quarantined(const std::string& environment, const std::string& key) const {
  std::lock_guard lock(mutex_);
  if (empty_) return {};
  return recovering("quarantined", [&] {
    const Sql sql{db_, path_};
    Transaction tx(sql, Transaction::read);
    std::vector<Quarantined> out;
    if (!has_quarantine_table(sql)) return out;
    Statement s = sql.prepare(
        "SELECT environment, scope, backend, candidate_id, candidate_name, status, reason, at FROM quarantine"
        " WHERE environment = ?1 AND (scope = '' OR scope = ?2) ORDER BY backend, candidate_id, scope");
    bind_all(sql, s.get(), environment, key);
    while (step(sql, s.get(), "quarantined")) {
      Quarantined q{text(s.get(), 0), text(s.get(), 1), text(s.get(), 2), text(s.get(), 3), text(s.get(), 4),
                    status_from_string(text(s.get(), 5), "tuning cache " + path_.string() + ": quarantine.status"),
                    text(s.get(), 6), real(s.get(), 7)};
      out.push_back(std::move(q));
    }
    return out;
  });
}

// A corrupt file is set aside (the entries it held are in the .bad-* file) and counts 0 here.
int TuningCache::clear() {
  std::lock_guard lock(mutex_);
  GT_CHECK(access_ == Access::read_write, "tuning cache " + path_.string() + ": opened read-only");
  return recovering("clear", [&] {
    const Sql sql{db_, path_};
    Transaction tx(sql, Transaction::write);
    const auto removed = static_cast<int>(scalar(sql, "SELECT count(*) FROM choices", 0));
    sql.exec("DELETE FROM results; DELETE FROM choices;", "clear");
    if (has_quarantine_table(sql)) sql.exec("DELETE FROM quarantine;", "clear the quarantine");
    tx.commit();
    return removed;
  });
}

std::string TuningCache::empty_export() {
  const nlohmann::ordered_json doc = {
      {"format", kFormat}, {"version", kFormatVersion}, {"entries", nlohmann::ordered_json::array()}};
  return doc.dump(2);
}

std::string TuningCache::export_json(size_t* count) const {
  std::lock_guard lock(mutex_);
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  if (!empty_)
    entries = recovering("export", [&] {
      const Sql sql{db_, path_};
      Transaction tx(sql, Transaction::read);  // one snapshot: choices and results agree
      nlohmann::ordered_json out = nlohmann::ordered_json::array();
      for (const CachedChoice& c : read_choices(sql)) out.push_back(entry_json(c, read_results(sql, c.key)));
      tx.commit();
      return out;
    });
  if (count) *count = entries.size();
  const nlohmann::ordered_json doc = {
      {"format", kFormat}, {"version", kFormatVersion}, {"entries", std::move(entries)}};
  return doc.dump(2);
}

std::optional<std::string> TuningCache::export_entry(const std::string& key) const {
  std::lock_guard lock(mutex_);
  if (empty_) return std::nullopt;
  return recovering("export", [&]() -> std::optional<std::string> {
    const Sql sql{db_, path_};
    Transaction tx(sql, Transaction::read);  // one snapshot: the choice and its results agree
    Statement s = sql.prepare(std::string("SELECT ") + kChoiceColumns + " FROM choices WHERE key = ?1");
    bind_all(sql, s.get(), key);
    if (!step(sql, s.get(), "export '" + key + "'")) return std::nullopt;
    nlohmann::ordered_json entries = nlohmann::ordered_json::array();
    entries.push_back(entry_json(choice_from_row(s.get()), read_results(sql, key)));
    s.reset();
    tx.commit();
    const nlohmann::ordered_json doc = {
        {"format", kFormat}, {"version", kFormatVersion}, {"entries", std::move(entries)}};
    return doc.dump();
  });
}

int TuningCache::import_json(const std::string& json_text) {
  const std::vector<Entry> entries = parse_export(json_text);  // all validated before any write
  std::lock_guard lock(mutex_);
  GT_CHECK(access_ == Access::read_write, "tuning cache " + path_.string() + ": opened read-only");
  recovering("import", [&] {
    const Sql sql{db_, path_};
    Transaction tx(sql, Transaction::write);
    for (const Entry& e : entries) write_entry(sql, e.choice, e.results, "import '" + e.choice.key + "'");
    tx.commit();
  });
  return static_cast<int>(entries.size());
}

fs::path default_cache_path() { return user_cache_path("GEMMTUNE_CACHE", "tuning.sqlite"); }

}  // namespace gemmtune
