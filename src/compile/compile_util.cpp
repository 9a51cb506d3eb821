// Small pieces the compile sides share (compile_util.hpp).
#include "compile/compile_util.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "gemmtune/error.hpp"

namespace gemmtune {
namespace fs = std::filesystem;

std::optional<std::string> slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string first_line(const std::string& text, size_t max) {
  std::string line = text.substr(0, text.find('\n'));
  return line.size() > max ? line.substr(0, max) + "..." : line;
}

std::string error_summary(const std::string& text) {
  std::string first = first_line(text);
  size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return first;
  size_t start = text.rfind('\n', end);
  size_t from = start == std::string::npos ? 0 : start + 1;
  std::string last = first_line(text.substr(from, end + 1 - from));
  return last == first ? first : first + " ... " + last;
}

void check_worker_answer(const nlohmann::json& r, const std::string& who, const std::string& what,
                         const std::function<void(const std::string&)>& log) {
  if (r.value("ok", false)) return;
  std::string kind = r.value("kind", std::string("compile"));
  std::string error = r.value("error", std::string("(no error text)"));
  if (log) log(who + ": " + what + ": " + kind + " error:\n" + error.substr(0, 2000));
  GT_THROW(who + ": compile failed (" + kind + "): " + error_summary(error));
}

void write_atomically(const fs::path& path, const std::string& text, const std::string& who) {
  fs::create_directories(path.parent_path());
  fs::path tmp = path;
  tmp += ".tmp-" + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) GT_THROW(who + ": cannot write " + tmp.string());
  }
  fs::rename(tmp, path);
}

TempDir::TempDir(const fs::path& parent, const std::string& prefix, const std::string& who, bool keep) : keep_(keep) {
  std::string tmpl = (parent / (prefix + "XXXXXX")).string();
  GT_CHECK(mkdtemp(tmpl.data()), who + ": cannot create a temporary directory in " + parent.string());
  path_ = tmpl;
}

TempDir::~TempDir() {
  if (keep_) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

}  // namespace gemmtune
