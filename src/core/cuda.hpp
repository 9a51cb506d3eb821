// CUDA runtime checks and RAII owners for device memory, streams and events.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <utility>

#include "gemmtune/error.hpp"

#define GT_CUDA(expr)                                                                         \
  do {                                                                                        \
    cudaError_t gt_err_ = (expr);                                                             \
    if (gt_err_ != cudaSuccess)                                                               \
      GT_THROW(std::string("CUDA error ") + cudaGetErrorName(gt_err_) + " (" +                \
               cudaGetErrorString(gt_err_) + ") in " #expr);                                  \
  } while (0)

namespace gemmtune {

// True when at least one CUDA device is usable; `why` gets the reason when not.
bool cuda_device_present(std::string* why = nullptr);

// Owns one cudaMalloc allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes) GT_CUDA(cudaMalloc(&ptr_, bytes));
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  void* get() const { return ptr_; }
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class Stream {
 public:
  Stream() { GT_CUDA(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~Stream() {
    if (s_) cudaStreamDestroy(s_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }
  void sync() const { GT_CUDA(cudaStreamSynchronize(s_)); }

 private:
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  Event() { GT_CUDA(cudaEventCreate(&e_)); }
  ~Event() {
    if (e_) cudaEventDestroy(e_);
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }
  void record(cudaStream_t s) const { GT_CUDA(cudaEventRecord(e_, s)); }
  // Milliseconds from `start` to this event (both recorded and complete).
  float since(const Event& start) const {
    GT_CUDA(cudaEventSynchronize(e_));
    float ms = 0;
    GT_CUDA(cudaEventElapsedTime(&ms, start.e_, e_));
    return ms;
  }

 private:
  cudaEvent_t e_ = nullptr;
};

}  // namespace gemmtune
