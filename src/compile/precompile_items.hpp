// The parallel step of a precompile (cutlass: nvcc builds; cutedsl: worker compiles, GEMM and
// softmax): every item with an artifact key is built (or found in the store) on a few threads,
// a failure recorded on its item. Header-only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <vector>

#include "core/parallel.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune {

// Item needs `key`, `error` members; items without a key (skipped or refused problems and
// configs) only go to `progress`. `build(j, item)` builds the j-th keyed item (j counts keyed
// items in order, so that it indexes the caller's list of their specs or params) and sets its
// store_hit and seconds; on up to `threads` threads. What it throws becomes the item's error
// (an Error's message, else what()). `progress` (may be empty) sees each item once, one call at a time.
template <class Item, class Build>
void build_keyed_items(std::vector<Item>& items, int threads, const std::function<void(const Item&)>& progress,
                       Build build) {
  std::vector<size_t> todo;
  for (size_t i = 0; i < items.size(); ++i)
    if (!items[i].key.empty()) todo.push_back(i);
    else if (progress) progress(items[i]);
  std::mutex progress_mu;
  parallel_for(todo.size(), size_t(std::max(1, threads)), [&](size_t j) {
    Item& it = items[todo[j]];
    try {
      build(j, it);
    } catch (const std::exception& e) {
      auto* ge = dynamic_cast<const Error*>(&e);
      it.error = ge ? ge->message() : e.what();
    }
    if (progress) {
      std::lock_guard<std::mutex> lock(progress_mu);
      progress(it);
    }
  });
}

}  // namespace gemmtune
