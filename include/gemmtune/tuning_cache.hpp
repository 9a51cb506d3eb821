// gemmtune: the tuning cache. Every timing of every candidate, per (environment, problem).
//
// Embedded SQLite (WAL, busy timeout) so that several processes tuning at once lose nothing.
// A gemmtune cache found damaged (not a database, corrupt pages found at open or by any later
// read or write, a newer schema, missing tables) is renamed aside to "<path>.bad-<unix time>"
// with a warning through `log`, and a fresh cache takes its place; the operation then goes on
// (a lookup misses, a store is written to the fresh cache). Another program's SQLite database
// is never renamed: it is refused (Error). Read-only access never creates, moves or writes a
// file: damage is then an Error that says to run `gemmtune cache clear`.
// Directories are created 0700 and the cache file 0600.
#pragma once

#include <filesystem>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gemmtune/report.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace gemmtune {

// The cached choice for one key.
struct CachedChoice {
  std::string key;
  std::string environment;  // Engine::environment() text it was tuned in
  std::string problem;      // GemmProblem::canonical()
  std::string backend;
  std::string candidate_id;
  std::string candidate_name;
  double median_us = 0;
  double tuned_at = 0;      // unix seconds
};

// A candidate never to be tried again in one environment (docs/isolation.md): one that crashed
// or hung the tuning helper (scope "": every problem), or that computed a wrong result (scope:
// the problem's cache key).
struct Quarantined {
  std::string environment;  // the op's Engine::environment() text
  std::string scope;        // "" (every problem) or a cache key
  std::string backend;
  std::string candidate_id;
  std::string candidate_name;
  CandidateStatus status = CandidateStatus::failed;  // failed (fault, hang) or wrong
  std::string reason;
  double at = 0;            // unix seconds
};

class TuningCache {
 public:
  using Log = std::function<void(const std::string&)>;

  enum class Access {
    read_write,  // creates the file and its directories; sets a damaged cache aside
    read_only,   // the file must exist; nothing is created, moved or written
  };
  // Opens (read_write: or creates) the cache. Throws Error when the file cannot be opened, is
  // another program's database, or (read_only) is damaged.
  explicit TuningCache(std::filesystem::path path, Log log = {}, Access access = Access::read_write);
  ~TuningCache();
  TuningCache(const TuningCache&) = delete;
  TuningCache& operator=(const TuningCache&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // The choice stored under `key`, if any. Fast (one indexed read).
  std::optional<CachedChoice> lookup(const std::string& key) const;

  // Stores every result of `report` and its winner under `key`, replacing what the key had,
  // in one transaction. Throws Error when report has no winner.
  void store(const std::string& key, const std::string& environment, const TuneReport& report);

  // All timings stored under `key` (status, medians, errors...), best first.
  std::vector<CandidateResult> results(const std::string& key) const;
  std::vector<CachedChoice> list() const;
  // Quarantine (table `quarantine`, created by the first write; a cache without it has none):
  // records q (at: now), replacing an earlier record of the same candidate and scope.
  void quarantine(const Quarantined& q);
  // The candidates quarantined in `environment` for every problem or for the problem `key`.
  std::vector<Quarantined> quarantined(const std::string& environment, const std::string& key) const;
  // Removes everything (choices, results, quarantine); returns the number of choices removed.
  int clear();
  // JSON document {"format": "gemmtune-cache", "version": 2, "entries": [...]} holding
  // choices and all results, each result in the C API's encoding of a candidate result ("id",
  // "name", "rel_err" null when not measured). Import reads versions 2 and 1 (results with
  // "candidate_id", "candidate_name", rel_err -1) and merges: an imported key replaces the same
  // key here.
  // `entries` (may be null) receives the number of entries exported.
  std::string export_json(size_t* entries = nullptr) const;
  static std::string empty_export();  // the export of a cache with no entries
  int import_json(const std::string& json);  // returns entries imported; Error on bad input
  // An export document (as export_json) holding only key's entry; nullopt when key has none.
  std::optional<std::string> export_entry(const std::string& key) const;

 private:
  // A prepared statement, finalized on destruction (deleter: sqlite3_finalize).
  using Statement = std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)>;

  void open_or_reset();
  bool adopt(std::string& why_not) const;
  void connect(bool immutable = false) const;
  void close() const noexcept;
  void warn(const std::string& message) const;
  // Runs `op` (mutex_ held); when it fails because the file is corrupt, sets the file aside
  // (read_write) and runs `op` once more on the fresh cache, or throws saying what to do.
  template <class Op>
  auto recovering(const char* what, Op&& op) const -> decltype(op());
  void reset_after_corruption(const char* what) const;
  bool adopt_locked(std::string& why_not);

  std::filesystem::path path_;
  Log log_;
  Access access_ = Access::read_write;
  mutable bool empty_ = false;           // read_only: an empty file (no tables) reads as an empty cache
  bool adopt_immutable_ = false;         // read_only: opened as immutable (a read-only directory)
  // The connection and its hot statement; replaced when a corrupt file is set aside.
  mutable sqlite3* db_ = nullptr;
  mutable Statement lookup_{nullptr, nullptr};  // prepared once: lookup() is on the hot path
  mutable uint64_t inode_ = 0;                  // of the file this connection opened
  mutable std::string stamp_;                   // immutable connection: the file as it was opened
  // One connection per object; the mutex makes an object safe to share between threads.
  mutable std::mutex mutex_;
};

// The default cache path: $GEMMTUNE_CACHE, else $XDG_CACHE_HOME/gemmtune/tuning.sqlite, else
// $HOME/.cache/gemmtune/tuning.sqlite.
std::filesystem::path default_cache_path();

}  // namespace gemmtune
