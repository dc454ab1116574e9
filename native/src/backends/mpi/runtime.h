// The process's MPI library. MPI is initialised once per process, on a thread of its own — the MPI
// thread, which the MPI backend's communicator then uses as its progress thread — and every MPI call of
// lane 0 and of the bootstrap runs there, so MPI_THREAD_FUNNELED is enough. With MPI_THREAD_MULTIPLE the
// backend's lane 1 also calls MPI, from the executor's lane thread.
#pragma once
#include <atomic>
#include <memory>
#include <string>

#include "backends/mpi/faults.h"
#include "base/cores.h"
#include "base/op_queue.h"

namespace spmd::mpi {

struct InitOptions {
  int localRanks = 1;     // ranks on this node, as the launcher says: more than cores is oversubscribed
  bool funneled = false;  // ask only for MPI_THREAD_FUNNELED (every MPI call on the MPI thread)
  // Only an unbound process judges from the count. One bound to some CPUs was placed by its launcher
  // (mpirun's default binding: a core per rank, though each sees a single CPU), which knows whether its
  // ranks share cores and tells MPI so (Open MPI: OMPI_MCA_mpi_oversubscribe). Yielding inside MPI on a
  // core of its own hands that core to any other process of the machine: 8-byte allreduce 73 us instead
  // of 0.5 us at the median on a loaded 2-core machine.
  bool oversubscribed() const { return !boundToSome() && unsigned(localRanks) > usableCores(); }
};

class Runtime {
 public:
  Runtime() = default;
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Where init(), finalize() and every lane-0 and bootstrap MPI call run.
  OpQueue& thread() { return thread_; }

  // On the JS thread, before init is queued: the environment MPI_Init reads, a user's own settings kept.
  // Not on the MPI thread: setenv beside another thread's getenv is undefined behaviour. (What UCX reads
  // when it is loaded, before MPI_Init, is set where the addon is loaded: src/comm/native.ts.)
  static void prepareEnvironment(const InitOptions& o);
  // On the MPI thread. Throws CommError when MPI was initialised in this process before.
  void init(const InitOptions& o);
  // Any thread: the MPI call init() is in (or last made), for the message when start-up passes its deadline:
  // init's calls wait on every rank and none of them can be given a deadline.
  const char* startupStep() const { return step_.load(std::memory_order_acquire); }
  // On the MPI thread: MPI_Finalize. Returns false, leaving MPI initialised, when failed waits stranded
  // requests: finalizing is erroneous then, and the caller ends the job with abortJob().
  bool finalize();
  // Any thread, no MPI call: ends the wait the MPI thread (or lane 1) is in with kAborted, `why`.
  void interrupt(const std::string& why);
  // Any thread; the last resort: MPI_Abort on the whole job (never returns).
  [[noreturn]] static void abortJob(int exitCode);

  int rank() const { return rank_; }
  int size() const { return size_; }
  // This rank's index and their number among the ranks MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) groups with it.
  int sharedRank() const { return sharedRank_; }
  int sharedSize() const { return sharedSize_; }
  // Granted MPI_THREAD_MULTIPLE: a second thread may call MPI, so the backend can have two lanes.
  bool multiple() const { return level_ == MPI_THREAD_MULTIPLE; }
  std::string threadLevel() const;
  bool oversubscribed() const { return oversubscribed_; }
  Faults& faults() { return *faults_; }
  // Any thread: a lane is stuck inside MPI for good (Faults::wedge), so finalize() would never run.
  bool wedged() const {
    const Faults* f = interruptible_.load(std::memory_order_acquire);
    return f && f->wedged();
  }
  // The runtime's own copy of MPI_COMM_WORLD, for bootstrap exchanges.
  MPI_Comm world() const { return world_.get(); }

  // The linked library's version text; valid before init and after finalize.
  static std::string libraryVersion();

 private:
  int rank_ = 0, size_ = 1, level_ = MPI_THREAD_SINGLE, sharedRank_ = 0, sharedSize_ = 1;
  bool oversubscribed_ = false;
  Comm world_;
  std::unique_ptr<Faults> faults_;
  std::atomic<const char*> step_{"MPI_Init_thread"};
  std::atomic<Faults*> interruptible_{nullptr};  // faults_ while MPI is up, for interrupt() from any thread
  OpQueue thread_;  // declared last: joined first, before the state its ops use goes away
};

}  // namespace spmd::mpi
