#include "backends/mpi/mpi_transport.h"

#include <algorithm>
#include <string>

#include "runtime/flight_recorder.h"

namespace spmd::mpi {
namespace {

constexpr int kTag = 0;
// Messages are cut into pieces MPI's int byte count can hold; both sides cut a message of equal size alike,
// and MPI keeps the pieces between one pair of ranks in order.
constexpr size_t kPieceBytes = size_t(1) << 30;

}  // namespace

void MpiTransport::post(const Message& m, void* data) {
  auto* bytes = static_cast<char*>(data);
  for (size_t at = 0; at < m.bytes; at += kPieceBytes) {
    int n = int(std::min(kPieceBytes, m.bytes - at));
    reqs_.push_back(MPI_REQUEST_NULL);
    messages_.push_back(m);
    if (m.recv) check(MPI_Irecv(bytes + at, n, MPI_BYTE, m.peer, kTag, comm_, &reqs_.back()), "MPI_Irecv");
    else check(MPI_Isend(bytes + at, n, MPI_BYTE, m.peer, kTag, comm_, &reqs_.back()), "MPI_Isend");
  }
}

void MpiTransport::exchange(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs) {
  if (flight_) flight_->notePeers(sends, recvs);
  reqs_.clear();
  messages_.clear();
  auto receiving = [this](size_t i) { return messages_[i].recv; };
  try {
    // Receives first, so a peer's eager sends find their buffers.
    for (const RecvSpec& r : recvs) post({r.peer, r.bytes, true}, r.data);
    for (const SendSpec& s : sends) post({s.peer, s.bytes, false}, const_cast<void*>(s.data));
  } catch (...) {
    waiter_.settle(reqs_, receiving);
    throw;
  }
  if (waiter_.poll(reqs_, deadline_)) return;
  const Message& m = messages_[firstPending(reqs_)];
  waiter_.fail(reqs_,
               (m.recv ? "receiving " : "sending ") + std::to_string(m.bytes) + (m.recv ? " bytes from rank " : " bytes to rank ") +
                   std::to_string(m.peer),
               receiving);
}

}  // namespace spmd::mpi
