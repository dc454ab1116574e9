// Scratch memory reused across iterations so the hot path does not allocate once warm.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <new>

namespace spmd {

class Workspace {
 public:
  Workspace() = default;
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  ~Workspace() { std::free(data_); }

  // Returns at least `bytes` of 64-byte aligned memory; contents are unspecified. Grows, never shrinks.
  void* get(size_t bytes) {
    if (bytes > capacity_) {
      std::free(data_);
      size_t rounded = (bytes + 63) & ~size_t(63);
      data_ = std::aligned_alloc(64, rounded);
      if (!data_) throw std::bad_alloc();
      capacity_ = rounded;
    }
    return data_;
  }

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace spmd
