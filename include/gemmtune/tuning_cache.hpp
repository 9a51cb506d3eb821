// gemmtune: the tuning cache. Every timing of every candidate, per (environment, problem).
//
// Embedded SQLite (WAL, busy timeout) so that several processes tuning at once lose nothing.
// A file that is not a gemmtune cache (corrupt, foreign, newer schema) is renamed aside to
// "<path>.bad-<unix time>" with a warning through `log`, and a fresh cache is created.
#pragma once

#include <filesystem>
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

class TuningCache {
 public:
  using Log = std::function<void(const std::string&)>;

  // Opens or creates the cache (and its parent directories).
  explicit TuningCache(std::filesystem::path path, Log log = {});
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
  // Removes everything; returns the number of choices removed.
  int clear();
  // JSON document {"format": "gemmtune-cache", "version": 2, "entries": [...]} holding
  // choices and all results, each result in the C API's encoding of a candidate result ("id",
  // "name", "rel_err" null when not measured). Import reads versions 2 and 1 (results with
  // "candidate_id", "candidate_name", rel_err -1) and merges: an imported key replaces the same
  // key here.
  std::string export_json() const;
  int import_json(const std::string& json);  // returns entries imported; Error on bad input
  // An export document (as export_json) holding only key's entry; nullopt when key has none.
  std::optional<std::string> export_entry(const std::string& key) const;

 private:
  // A prepared statement, finalized on destruction (deleter: sqlite3_finalize).
  using Statement = std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)>;

  void open_or_reset();
  bool adopt(std::string& why_not);
  void connect();
  void close() noexcept;
  void warn(const std::string& message) const;

  std::filesystem::path path_;
  Log log_;
  sqlite3* db_ = nullptr;
  Statement lookup_{nullptr, nullptr};  // prepared once: lookup() is on the hot path
  // One connection per object; the mutex makes an object safe to share between threads.
  mutable std::mutex mutex_;
};

// The default cache path: $GEMMTUNE_CACHE, else $XDG_CACHE_HOME/gemmtune/tuning.sqlite, else
// $HOME/.cache/gemmtune/tuning.sqlite.
std::filesystem::path default_cache_path();

}  // namespace gemmtune
