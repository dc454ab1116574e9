// One vendor communicator and the wait for the work issued on it: the stream is polled, yielding the core
// and then sleeping longer and longer (ranks may share few cores), while the library's async error is
// checked for errors it found meanwhile; at the deadline, or on such an error, the communicator is
// aborted (where the library can), which is what makes the vendor's kernels give up, and every later op
// fails fast. A lane's communicator and those split from it abort together, as one lane.
#pragma once
#include <chrono>
#include <string>
#include <vector>

#include "backends/library/device.h"
#include "backends/library/library.h"

namespace spmd::library {

class Comm {
 public:
  using Clock = std::chrono::steady_clock;
  // Takes `handle`, the joined communicator; `parent`: the one it was split from, which must outlive it.
  Comm(Library& lib, Handle handle, Comm* parent = nullptr);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  Library& lib() const { return lib_; }
  // Throws kAborted (with the reason) once the communicator was aborted.
  Handle get() const;
  // Checks the result of issuing `c`: a failure aborts (other ranks may be inside the collective).
  void check(int result, Call c);
  // Returns once `device`'s stream is idle; throws kTimeout, the library's code (async error) or kAborted.
  void wait(Device& device, Clock::time_point deadline, const std::string& what);
  // Aborts this communicator's family (the one split from none, and every split of it) where the library
  // can; later ops on any of them throw kAborted naming `reason`.
  void abort(const std::string& reason);

 private:
  void abortFamily(const std::string& reason);

  Library& lib_;
  Handle handle_;
  Comm* parent_;
  std::vector<Comm*> children_;
  bool aborted_ = false;
  std::string reason_;
};

}  // namespace spmd::library
