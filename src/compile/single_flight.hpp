// One compile per artifact key at a time, however many candidates ask for it.
#pragma once

#include <exception>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

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

  // One key's outcome in run_group: a value, or the message of the Error that made it fail.
  struct Result {
    std::optional<T> value;
    std::string error;
  };
  // run() for several keys made together. make(owned, results) is called once with the indices
  // (into keys) of the keys this call makes (no flight elsewhere, no remembered failure) and
  // sets, for each owned index, results[i].value or results[i].error. Returns one Result a key:
  // those made here, those awaited from other flights (their Error's message) and remembered
  // failures. An Error thrown by make fails every owned key it left unset; any other exception
  // is passed to the owned keys' waiters and rethrown. Keys must be distinct.
  std::vector<Result> run_group(const std::vector<std::string>& keys,
                                const std::function<void(const std::vector<size_t>&, std::vector<Result>&)>& make) {
    std::vector<Result> results(keys.size());
    std::vector<size_t> owned;
    std::map<size_t, std::promise<T>> promises;
    std::map<size_t, std::shared_future<T>> awaited;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < keys.size(); ++i) {
        if (auto f = failed_.find(keys[i]); f != failed_.end()) {
          results[i].error = f->second;
        } else if (auto it = in_flight_.find(keys[i]); it != in_flight_.end()) {
          awaited[i] = it->second;
        } else {
          in_flight_[keys[i]] = promises[i].get_future().share();
          owned.push_back(i);
        }
      }
    }
    std::exception_ptr other;
    if (!owned.empty()) {
      try {
        make(owned, results);
      } catch (const Error& e) {
        for (size_t i : owned)
          if (!results[i].value && results[i].error.empty()) results[i].error = e.message();
      } catch (...) {
        other = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i : owned) {
        std::promise<T>& p = promises[i];
        if (other) {
          p.set_exception(other);
        } else if (results[i].value) {
          p.set_value(*results[i].value);
        } else {
          if (results[i].error.empty()) results[i].error = "not built (no result for this key)";
          if (remember_failures_) failed_[keys[i]] = results[i].error;
          p.set_exception(std::make_exception_ptr(Error(results[i].error, __FILE__, __LINE__)));
        }
        in_flight_.erase(keys[i]);
      }
    }
    if (other) std::rethrow_exception(other);
    for (auto& [i, f] : awaited) {
      try {
        results[i].value = f.get();
      } catch (const Error& e) {
        results[i].error = e.message();
      }
    }
    return results;
  }

 private:
  const bool remember_failures_;
  std::mutex mu_;
  std::map<std::string, std::shared_future<T>> in_flight_;
  std::map<std::string, std::string> failed_;  // key -> reason
};

}  // namespace gemmtune
