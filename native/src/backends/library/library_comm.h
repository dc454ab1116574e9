// One vendor communicator and the wait for the work issued on it: the stream is polled, yielding the core
// and then sleeping longer and longer (ranks may share few cores), while the library's async error is
// checked for errors it found meanwhile; at the deadline, or on such an error, the communicator is
// aborted (where the library can), which is what makes the vendor's kernels give up, and every later op
// fails fast. A lane's communicator and those split from it abort together, as one lane.
//
// The vendor's split has no deadline and cannot be interrupted (an abort would free the parent under it),
// so it runs on a thread of its own: past the deadline this rank stops waiting, leaves the call blocked
// there and gives the family up without calling the library, for the process to exit.
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
  // The library's split (ncclCommSplit) of this communicator, on a thread of its own with `device`
  // selected; throws kTimeout at `deadline` (a peer stuck inside it), or what check() throws.
  Handle split(int color, int key, Device& device, Clock::time_point deadline);
  // Aborts this communicator's family (the one split from none, and every split of it) where the library
  // can; later ops on any of them throw kAborted naming `reason`.
  void abort(const std::string& reason);

 private:
  Comm& root();
  // `viaLibrary`: abort through the library where it can; else only mark the family given up.
  void endFamily(const std::string& reason, bool viaLibrary);

  Library& lib_;
  Handle handle_;
  Comm* parent_;
  std::vector<Comm*> children_;
  bool aborted_ = false;
  std::string reason_;
};

}  // namespace spmd::library
