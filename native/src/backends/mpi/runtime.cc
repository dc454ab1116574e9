#include "backends/mpi/runtime.h"

#include <dlfcn.h>

#include <cstdlib>

#include "base/error.h"

namespace spmd::mpi {
namespace {

// Node loads addons with RTLD_LOCAL, which hides libmpi's symbols from the components Open MPI dlopens
// during MPI_Init (mca_*.so); those then fail on undefined symbols. Reopening the libmpi already loaded
// (RTLD_NOLOAD: never a second copy) with RTLD_GLOBAL promotes it. The library is found from a symbol it
// defines, so the soname does not matter (libmpi.so.40 for Open MPI 3-5, libmpi.so.12 for MPICH); MPICH
// loads no such components, so a failure here is harmless and ignored.
void promoteLibmpiToGlobal() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&MPI_Init_thread), &info) != 0 && info.dli_fname) {
    dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  }
}

}  // namespace

void Runtime::prepareEnvironment(const InitOptions& o) {
  // Open MPI busy-polls inside blocking calls unless told otherwise; with more ranks than cores that
  // starves the ranks doing work.
  if (o.oversubscribed()) setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
}

void Runtime::init(const InitOptions& o) {
  int initialized = 0;
  check(MPI_Initialized(&initialized), "MPI_Initialized");
  if (initialized) throw CommError(code::kInvalid, "mpi: MPI was already initialised in this process (once per process)");
  oversubscribed_ = o.oversubscribed();
  promoteLibmpiToGlobal();
  check(MPI_Init_thread(nullptr, nullptr, o.funneled ? MPI_THREAD_FUNNELED : MPI_THREAD_MULTIPLE, &level_), "MPI_Init_thread");
  check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  step_.store("MPI_Comm_dup", std::memory_order_release);
  world_ = Comm::dup(MPI_COMM_WORLD);
  rank_ = world_.rank();
  size_ = world_.size();
  // MPI's own word on which ranks share this one's node, for the bootstrap to check the hosts against.
  step_.store("MPI_Comm_split_type", std::memory_order_release);
  const Comm shared = Comm::nodeLocal(world_.get());
  sharedRank_ = shared.rank();
  sharedSize_ = shared.size();
  step_.store("MPI_Comm_dup (the fault channels)", std::memory_order_release);
  faults_ = std::make_unique<Faults>(MPI_COMM_WORLD);
  interruptible_.store(faults_.get(), std::memory_order_release);
}

void Runtime::interrupt(const std::string& why) {
  if (Faults* f = interruptible_.load(std::memory_order_acquire)) f->interrupt(why);
}

bool Runtime::finalize() {
  if (!faults_) return true;  // never initialised, or finalized already
  if (faults_->stranded() > 0) return false;
  interruptible_.store(nullptr, std::memory_order_release);
  faults_->close();
  faults_.reset();
  world_ = Comm();
  check(MPI_Finalize(), "MPI_Finalize");
  return true;
}

void Runtime::abortJob(int exitCode) {
  MPI_Abort(MPI_COMM_WORLD, exitCode);
  std::_Exit(exitCode);  // MPI_Abort does not return; should a library's ever do, neither does this
}

std::string Runtime::threadLevel() const {
  switch (level_) {
    case MPI_THREAD_MULTIPLE: return "multiple";
    case MPI_THREAD_SERIALIZED: return "serialized";
    case MPI_THREAD_FUNNELED: return "funneled";
    default: return "single";
  }
}

std::string Runtime::libraryVersion() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "unknown";
  return std::string(text);  // NUL-terminated; Open MPI counts the NUL in len
}

}  // namespace spmd::mpi
