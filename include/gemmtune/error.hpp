// gemmtune: the one exception type, and the check macros that raise it.
//
// Library code never exits the process: every failure becomes a gemmtune::Error that
// carries the file:line where it was raised and, for CUDA and cuBLASLt, the library's own
// message. Errors about user input name the offending field ("problem.k: must be >= 1").
#pragma once

#include <stdexcept>
#include <string>

namespace gemmtune {

class Error : public std::runtime_error {
 public:
  Error(std::string message, const char* file, int line)
      : std::runtime_error(std::string(message) + " [" + base_name(file) + ":" + std::to_string(line) + "]"),
        message_(std::move(message)) {}

  // The message without the source location (for user-facing errors and logs).
  const std::string& message() const noexcept { return message_; }

 private:
  static std::string base_name(const char* path) {
    std::string p(path);
    auto slash = p.find_last_of('/');
    return slash == std::string::npos ? p : p.substr(slash + 1);
  }
  std::string message_;
};

}  // namespace gemmtune

#define GT_THROW(msg) throw ::gemmtune::Error((msg), __FILE__, __LINE__)
#define GT_CHECK(cond, msg)      \
  do {                           \
    if (!(cond)) GT_THROW(msg);  \
  } while (0)
