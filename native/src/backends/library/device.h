// Where a vendor library's buffers live: a GPU's memory, its stream and the CUDA kernels (libcudart and
// libcuda opened at run time), or an NPU's memory and stream (libascendcl). It is the Memory
// (kernels/memory.h) in which the job's tensors stay for the whole run; the shared collectives see only this.
#pragma once
#include <cstddef>
#include <memory>

#include "backends/library/library.h"
#include "kernels/memory.h"

namespace spmd::library {

// Memory's copies and kernels go on stream(), the one stream of the communicator, in issue order with the
// library's collectives.
class Device : public Memory {
 public:
  virtual Stream stream() const = 0;
  // After work was issued on stream(): a device that can only poll events records one here.
  virtual void issued() {}
  // True once everything issued on stream() completed; never blocks.
  virtual bool idle() = 0;
  // Polls idle(), yielding the core: only kernels and copies are waited for here (a collective's wait,
  // which can hang on a peer, is the communicator's, with its deadline).
  void synchronize() override;
  // Makes this the calling thread's device: a lane's worker calls it before its first op, since the
  // vendors' device selection is per thread.
  virtual void select() {}
};

// CUDA device `index`; throws CommError kUnsupported when libcudart cannot be loaded.
std::unique_ptr<Device> makeCudaDevice(int index);
// Ascend device `index`; throws CommError kUnsupported when libascendcl cannot be loaded.
std::unique_ptr<Device> makeAclDevice(int index);

// A device's memory as its runtime reports it, for the memory plan before the ranks meet.
struct DeviceMemoryInfo {
  size_t free = 0, total = 0;
  const char* call = "";  // the runtime call that said so
};
// Selects the device on the calling thread; throws as the makers do.
DeviceMemoryInfo cudaMemoryInfo(int index);
DeviceMemoryInfo aclMemoryInfo(int index);

}  // namespace spmd::library
