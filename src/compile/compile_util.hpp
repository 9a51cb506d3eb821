// Small pieces the compile stage shares (the artifact cache, the nvcc and Python-worker toolchains):
// reading a file whole, one-line error summaries, a worker answer's failure, atomic small-file
// writes, a private temporary directory.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace gemmtune {

// The bytes of the file at `path`; nullopt when it cannot be opened.
std::optional<std::string> slurp(const std::filesystem::path& path);

// `text` up to its first newline, cut to `max` characters (then "..." appended).
std::string first_line(const std::string& text, size_t max = 300);

// A compiler's message on one line: its first line and, when different, its last non-empty one
// (Triton's first line is often only "at 45:8:"; the CuTe DSL's errors end with the useful part).
std::string error_summary(const std::string& text);

// A compile worker's answer `r` that is not {"ok": true, ...}: logs its error text (at most 2000
// characters) as "<who>: <what>: <kind> error:\n<text>" when `log` is set, then throws Error
// "<who>: compile failed (<kind>): <error_summary(text)>". Returns when `r` is ok.
void check_worker_answer(const nlohmann::json& r, const std::string& who, const std::string& what,
                         const std::function<void(const std::string&)>& log);

// Writes `text` to `path` through a temporary file in the same directory and a rename (readers
// never see half a file), creating the directory. Throws Error "<who>: cannot write <tmp>", or
// std::filesystem's error when the rename fails.
void write_atomically(const std::filesystem::path& path, const std::string& text, const std::string& who);

// A fresh private directory "<parent>/<prefix>XXXXXX" (mkdtemp; `parent` must exist) for one
// compile's output; removed with everything in it when the object goes, unless `keep`
// (debugging). Throws Error "<who>: cannot create a temporary directory in <parent>".
class TempDir {
 public:
  TempDir(const std::filesystem::path& parent, const std::string& prefix, const std::string& who, bool keep = false);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  bool keep_;
};

}  // namespace gemmtune
