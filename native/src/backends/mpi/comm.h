// An owned MPI communicator. Every one of ours returns errors instead of aborting the job, so a failing
// call becomes a CommError that the executor reports with its stage.
#pragma once
#include "backends/mpi/mpi_api.h"

namespace spmd::mpi {

class Comm {
 public:
  Comm() = default;
  // Collective over `parent`: a private copy, so its traffic never matches anyone else's.
  static Comm dup(MPI_Comm parent);
  // Collective over `parent`: the ranks that share this node's memory (MPI_COMM_TYPE_SHARED).
  static Comm nodeLocal(MPI_Comm parent);
  // Collective over `parent`: MPI_Comm_split, the ranks passing the same color ordered by key.
  static Comm split(MPI_Comm parent, int color, int key);
  ~Comm();
  Comm(Comm&& o) noexcept : c_(o.c_) { o.c_ = MPI_COMM_NULL; }
  Comm& operator=(Comm&& o) noexcept;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  MPI_Comm get() const { return c_; }
  int rank() const;
  int size() const;

 private:
  explicit Comm(MPI_Comm c);
  void free();

  MPI_Comm c_ = MPI_COMM_NULL;
};

}  // namespace spmd::mpi
