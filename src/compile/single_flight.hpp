// One compile per artifact key at a time, however many candidates ask for it.
#pragma once

#include <exception>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <string>

#include "gemmtune/error.hpp"

namespace gemmtune {

// run(key, make): the first caller for a key runs make(); callers for the same key meanwhile
// wait for its result (or its exception, rethrown). With remember_failures, a key whose make()
// threw Error fails again at once with the same message for the life of this object (a broken
// build is not retried in this process). Thread-safe.
template <class T>
class SingleFlight {
 public:
  explicit SingleFlight(bool remember_failures) : remember_failures_(remember_failures) {}

  T run(const std::string& key, const std::function<T()>& make) {
    std::promise<T> promise;
    std::shared_future<T> result;
    bool owner = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto f = failed_.find(key); f != failed_.end()) GT_THROW(f->second);
      if (auto it = in_flight_.find(key); it != in_flight_.end()) {
        result = it->second;
      } else {
        result = in_flight_[key] = promise.get_future().share();
        owner = true;
      }
    }
    if (owner) {
      try {
        promise.set_value(make());
      } catch (const Error& e) {
        if (remember_failures_) {
          std::lock_guard<std::mutex> lock(mu_);
          failed_[key] = e.message();
        }
        promise.set_exception(std::current_exception());
      } catch (...) {
        promise.set_exception(std::current_exception());
      }
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_.erase(key);
    }
    return result.get();  // rethrows the owner's exception
  }

 private:
  const bool remember_failures_;
  std::mutex mu_;
  std::map<std::string, std::shared_future<T>> in_flight_;
  std::map<std::string, std::string> failed_;  // key -> reason
};

}  // namespace gemmtune
