// `gemmtune cache list|show KEY|clear|export FILE|import FILE`: the tuning cache, no GPU needed.
#include <filesystem>
#include <iostream>
#include <iterator>

#include <sys/stat.h>

#include "commands.hpp"
#include "core/text.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/tuning_cache.hpp"

namespace gemmtune::cli {

namespace {

// The one choice whose key is `key` or starts with it.
CachedChoice find_choice(const TuningCache& cache, const std::string& key) {
  if (auto exact = cache.lookup(key)) return *exact;
  std::vector<CachedChoice> matches;
  for (auto& c : cache.list())
    if (c.key.rfind(key, 0) == 0) matches.push_back(std::move(c));
  if (matches.empty()) GT_THROW("cache: no entry with key '" + printable(key) + "' in " + cache.path().string());
  if (matches.size() > 1)
    GT_THROW("cache: key prefix '" + printable(key) + "' matches " + std::to_string(matches.size()) + " entries; give more digits");
  return matches[0];
}

int list(const TuningCache& cache) {
  const auto choices = cache.list();
  if (choices.empty()) {
    std::cout << "no entries in " << cache.path().string() << "\n";
    return kOk;
  }
  std::vector<std::vector<std::string>> rows{{"key", "backend", "candidate", "median us", "tuned", "problem"}};
  for (const auto& c : choices)
    rows.push_back({printable(c.key), printable(c.backend), printable(c.candidate_name), fixed(c.median_us, 2),
                    format_time(c.tuned_at), printable(c.problem, 1000)});
  std::cout << format_table(rows, {false, false, false, true, false, false});
  std::cout << choices.size() << " entr" << (choices.size() == 1 ? "y" : "ies") << " in " << cache.path().string()
            << "\n";
  return kOk;
}

int show(const TuningCache& cache, const std::string& key) {
  const CachedChoice c = find_choice(cache, key);
  // Text from the file is shown escaped: an imported cache may hold anything (no terminal escapes).
  std::cout << "key          " << printable(c.key) << "\n"
            << "problem      " << printable(c.problem, 4096) << "\n"
            << "environment  " << printable(c.environment, 4096) << "\n"
            << "choice       " << printable(c.backend) << " " << printable(c.candidate_name) << " ("
            << fixed(c.median_us, 2) << " us)\n"
            << "candidate id " << printable(c.candidate_id) << "\n"
            << "tuned        " << format_time(c.tuned_at) << "\n\n";
  std::vector<std::vector<std::string>> rows{
      {"", "backend", "candidate", "median us", "p20-p80 us", "rel err", "compile s", "samples", "status"}};
  for (const auto& r : cache.results(c.key)) {
    const bool timed = r.median_us > 0;
    rows.push_back({std::string(r.winner ? "*" : "") + (r.is_default ? "d" : ""), printable(r.backend), printable(r.name),
                    timed ? fixed(r.median_us, 2) : "-", timed ? fixed(r.p20_us, 2) + "-" + fixed(r.p80_us, 2) : "-",
                    sci(r.rel_err), fixed(r.compile_s, 2), std::to_string(r.samples), status_text(r)});
  }
  std::cout << format_table(rows, {false, false, false, true, true, true, true, true, false});
  std::cout << "(* chosen, d cuBLASLt's default pick)\n";
  return kOk;
}

}  // namespace

int cmd_cache(const CacheArgs& args) {
  const std::filesystem::path path = args.cache.empty() ? default_cache_path() : std::filesystem::path(args.cache);
  // Looking (list, show, export) never creates, moves or writes a file.
  const bool looking = args.action == "list" || args.action == "show" || args.action == "export";
  std::error_code ec;
  if ((args.action == "list" || args.action == "show") && !std::filesystem::exists(path, ec)) {
    if (args.action == "show") GT_THROW("cache: no entry with key '" + printable(args.arg) + "': no cache at " + path.string());
    std::cout << "no entries (no cache at " << path.string() << ")\n";
    return kOk;
  }
  if (args.action == "export" && args.arg != "-") {
    // Never over the cache itself (or its side files): the export would replace the database.
    struct stat out_st, cache_st;
    for (const char* side : {"", "-wal", "-shm", "-journal", ".lock"}) {
      const std::string p = path.string() + side;
      if (::stat(args.arg.c_str(), &out_st) == 0 && ::stat(p.c_str(), &cache_st) == 0 &&
          out_st.st_dev == cache_st.st_dev && out_st.st_ino == cache_st.st_ino)
        GT_THROW("cache export: " + args.arg + " is the tuning cache " + p + " itself; export to another file");
    }
  }
  if (args.action == "export" && !std::filesystem::exists(path, ec)) {
    write_output(args.arg, TuningCache::empty_export());
    if (args.arg != "-") std::cout << "exported 0 entries to " << args.arg << " (no cache at " << path.string() << ")\n";
    return kOk;
  }
  TuningCache cache(path, log_stderr, looking ? TuningCache::Access::read_only : TuningCache::Access::read_write);
  if (args.action == "list") return list(cache);
  if (args.action == "show") return show(cache, args.arg);
  if (args.action == "clear") {
    const int n = cache.clear();
    std::cout << "removed " << n << " entr" << (n == 1 ? "y" : "ies") << " from " << path.string() << "\n";
    return kOk;
  }
  if (args.action == "export") {
    size_t n = 0;
    write_output(args.arg, cache.export_json(&n));
    if (args.arg != "-") std::cout << "exported " << n << " entr" << (n == 1 ? "y" : "ies") << " to " << args.arg << "\n";
    return kOk;
  }
  if (args.action == "import") {
    const std::string text = args.arg == "-" ? std::string(std::istreambuf_iterator<char>(std::cin), {})
                                             : read_text_file(args.arg);
    const int n = cache.import_json(text);
    std::cout << "imported " << n << " entr" << (n == 1 ? "y" : "ies") << " into " << path.string() << "\n";
    return kOk;
  }
  GT_THROW("cache: unknown action '" + printable(args.action) + "'");
}

}  // namespace gemmtune::cli
