// Where a lane's tensors and an op's buffers live, and the kernels that work there. Host backends (shm, tcp,
// mpi) use host memory and the CPU kernels; a vendor library backend (nccl, hccl) its device's memory
// (backends/library/device.h), where the tensors stay for the whole run and only results come back.
#pragma once
#include <cstddef>
#include <utility>

#include "kernels/device_kernels.h"

namespace spmd {

class Memory {
 public:
  virtual ~Memory() = default;
  // True for host memory itself: pointers into it are the host's (a test double's host "device" is not).
  virtual bool isHost() const { return false; }
  virtual void* alloc(size_t bytes) = 0;
  virtual void free(void* p) = 0;
  // Copies ordered after the work issued before them; upload and download return once theirs is done,
  // copy and zero may return before.
  virtual void upload(void* dst, const void* src, size_t bytes) = 0;
  virtual void download(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  virtual void zero(void* dst, size_t bytes) = 0;
  // Returns once everything issued (kernels, copies) has completed.
  virtual void synchronize() = 0;
  // Throws CommError kUnsupported where there are none (say, a build without nvcc).
  virtual kernels::DeviceKernels& kernels() = 0;
};

// The process's host memory, with the CPU kernels.
Memory& hostMemory();

// `bytes` of a Memory, freed with its owner; null when empty.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Memory& m, size_t bytes) : m_(&m), p_(bytes ? m.alloc(bytes) : nullptr), bytes_(bytes) {}
  ~Buffer() { reset(); }
  Buffer(Buffer&& o) noexcept : m_(o.m_), p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      m_ = o.m_;
      p_ = std::exchange(o.p_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  void* get() const { return p_; }
  template <class T>
  T* as() const { return static_cast<T*>(p_); }
  size_t bytes() const { return bytes_; }
  static Buffer zeros(Memory& m, size_t bytes) {
    Buffer b(m, bytes);
    b.zero();
    return b;
  }
  void zero() {
    if (p_) m_->zero(p_, bytes_);
  }

 private:
  void reset() {
    if (p_) m_->free(p_);
    p_ = nullptr;
  }
  Memory* m_ = nullptr;
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// Scratch of a Memory that grows to the largest size asked of it, so warm steps do not allocate.
class Scratch {
 public:
  explicit Scratch(Memory& m) : m_(m) {}
  // At least `bytes`; contents unspecified.
  void* get(size_t bytes) {
    if (bytes > b_.bytes()) b_ = Buffer(m_, bytes);
    return b_.get();
  }

 private:
  Memory& m_;
  Buffer b_;
};

}  // namespace spmd
