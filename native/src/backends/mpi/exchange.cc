#include "backends/mpi/exchange.h"

namespace spmd::mpi {

void Exchange::complete(MPI_Request& req, const char* call, Clock::time_point deadline) {
  if (waiter_.poll({&req, 1}, deadline)) return;
  waiter_.fail({&req, 1}, std::string("waiting for the bootstrap's ") + call + " (are all ranks started?)");
}

std::vector<std::string> Exchange::allGather(const std::string& mine, Clock::time_point deadline) {
  const int W = rt_.size();
  std::vector<int> lengths(static_cast<size_t>(W)), offsets(static_cast<size_t>(W));
  int length = count(mine.size(), "MPI_Iallgather");
  MPI_Request req;
  check(MPI_Iallgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, rt_.world(), &req), "MPI_Iallgather");
  complete(req, "MPI_Iallgather", deadline);
  size_t total = 0;
  for (int j = 0; j < W; ++j) {
    offsets[size_t(j)] = count(total, "MPI_Iallgatherv");
    total += size_t(lengths[size_t(j)]);
  }
  std::string all(total, '\0');
  check(MPI_Iallgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, rt_.world(), &req),
        "MPI_Iallgatherv");
  complete(req, "MPI_Iallgatherv", deadline);
  std::vector<std::string> out;
  for (int j = 0; j < W; ++j) out.push_back(all.substr(size_t(offsets[size_t(j)]), size_t(lengths[size_t(j)])));
  return out;
}

std::string Exchange::broadcast(const std::string& value, int root, Clock::time_point deadline) {
  int length = rt_.rank() == root ? count(value.size(), "MPI_Ibcast") : 0;
  MPI_Request req;
  check(MPI_Ibcast(&length, 1, MPI_INT, root, rt_.world(), &req), "MPI_Ibcast");
  complete(req, "MPI_Ibcast", deadline);
  std::string out = rt_.rank() == root ? value : std::string(size_t(length), '\0');
  check(MPI_Ibcast(out.data(), length, MPI_CHAR, root, rt_.world(), &req), "MPI_Ibcast");
  complete(req, "MPI_Ibcast", deadline);
  return out;
}

void Exchange::barrier(Clock::time_point deadline) {
  MPI_Request req;
  check(MPI_Ibarrier(rt_.world(), &req), "MPI_Ibarrier");
  complete(req, "MPI_Ibarrier", deadline);
}

}  // namespace spmd::mpi
