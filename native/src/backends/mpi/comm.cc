#include "backends/mpi/comm.h"

namespace spmd::mpi {

Comm::Comm(MPI_Comm c) : c_(c) {
  check(MPI_Comm_set_errhandler(c_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
}

Comm Comm::dup(MPI_Comm parent) {
  MPI_Comm c;
  check(MPI_Comm_dup(parent, &c), "MPI_Comm_dup");
  return Comm(c);
}

Comm Comm::nodeLocal(MPI_Comm parent) {
  int rank;
  check(MPI_Comm_rank(parent, &rank), "MPI_Comm_rank");
  MPI_Comm c;
  check(MPI_Comm_split_type(parent, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &c), "MPI_Comm_split_type");
  return Comm(c);
}

Comm Comm::split(MPI_Comm parent, int color, int key) {
  MPI_Comm c;
  check(MPI_Comm_split(parent, color, key, &c), "MPI_Comm_split");
  return Comm(c);
}

Comm::~Comm() { free(); }

Comm& Comm::operator=(Comm&& o) noexcept {
  if (this != &o) {
    free();
    c_ = o.c_;
    o.c_ = MPI_COMM_NULL;
  }
  return *this;
}

void Comm::free() {
  if (c_ == MPI_COMM_NULL) return;
  // After MPI_Finalize (a communicator outliving an early exit) there is nothing left to free.
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&c_);
  c_ = MPI_COMM_NULL;
}

int Comm::rank() const {
  int r;
  check(MPI_Comm_rank(c_, &r), "MPI_Comm_rank");
  return r;
}

int Comm::size() const {
  int s;
  check(MPI_Comm_size(c_, &s), "MPI_Comm_size");
  return s;
}

}  // namespace spmd::mpi
