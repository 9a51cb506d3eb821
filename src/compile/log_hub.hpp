// Fan-out of a process-wide compiler's log lines to every live backend's log.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace gemmtune {

// A process-wide compiler outlives the engines (and their backends) that use it; each backend
// registers its engine's log on creation and removes it on destruction, and the compiler logs
// through the hub. Thread-safe.
class LogHub {
 public:
  int add(std::function<void(const std::string&)> f) {
    std::lock_guard<std::mutex> lock(mu_);
    sinks_[next_] = std::move(f);
    return next_++;
  }
  void remove(int id) {
    std::lock_guard<std::mutex> lock(mu_);
    sinks_.erase(id);
  }
  void operator()(const std::string& msg) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, f] : sinks_) f(msg);
  }

 private:
  std::mutex mu_;
  std::map<int, std::function<void(const std::string&)>> sinks_;
  int next_ = 0;
};

}  // namespace gemmtune
