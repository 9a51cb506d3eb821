// Small pieces the compile sides share (compile_util.hpp).
#include "compile/compile_util.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "gemmtune/error.hpp"
#include "store/secure_fs.hpp"

namespace gemmtune {
namespace fs = std::filesystem;

std::optional<std::string> slurp(const fs::path& path) {
  // Bounded: a regular file (a link to one is followed) of at most 64 MiB, never blocking on a
  // FIFO; anything else reads as absent.
  return securefs::read_regular(path, uint64_t(64) << 20, {}, true).bytes;
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
  securefs::make_private_dirs(path.parent_path());
  // A fresh private temporary (O_EXCL, never through a planted link), renamed over `path`.
  std::string tmpl = path.string() + ".tmp-XXXXXX";
  int fd = mkstemp(tmpl.data());
  GT_CHECK(fd >= 0, who + ": cannot create a temporary next to " + path.string() + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += size_t(n);
  }
  close(fd);
  if (done != text.size()) {
    unlink(tmpl.c_str());
    GT_THROW(who + ": cannot write " + tmpl);
  }
  if (rename(tmpl.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    unlink(tmpl.c_str());
    GT_THROW(who + ": cannot rename " + tmpl + " to " + path.string() + ": " + why);
  }
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
