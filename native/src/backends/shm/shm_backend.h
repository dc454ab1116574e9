// The shm backend: one segment, kMaxLanes lanes (one per stream), each a ShmTransport under the
// shm's own shared algorithms and the transport algorithms.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/shm/segment.h"
#include "backends/shm/shared_collectives.h"
#include "backends/shm/shm_transport.h"
#include "runtime/backend.h"

namespace spmd::shm {

struct ShmOptions {
  std::string name;  // POSIX shm name, starting with '/'
  Tag tag{};         // what proves the segment is the job's (segment.h)
  int rank = 0;
  int size = 1;
  bool create = false;  // rank 0 creates, the others attach
  size_t channelBytes = 256 * 1024;
  size_t slotBytes = 256 * 1024;
  int slots = 4;
  // This rank's CPUs are shared with other ranks, as the ranks found from their bindings; unset: judged
  // from this process's CPU count alone (ShmTransport).
  std::optional<bool> sharesCores;
  // false: this rank stages every message (SPMD_SHM_SINGLE_COPY=0), and so, agreed at connect(), do all.
  bool singleCopy = true;
  // false: this rank keeps single copy's default thresholds untimed (SPMD_SHM_SINGLE_COPY=fixed), and so, agreed
  // at connect(), do all (crossover.h, timeSingleCopy).
  bool timedCopyPath = true;
};

class ShmBackend : public Backend {
 public:
  explicit ShmBackend(const ShmOptions& o);
  std::string name() const override { return "shm"; }
  // Collective: the ranks agree whether large blocks move single-copy (single_copy.h), and if so from which
  // sizes, by timing both paths (crossover.h).
  void connect() override;
  std::string copyPath() const override;
  std::vector<double> coreRoundTrips() const override { return coreRoundTrips_; }
  Collectives& lane(int i) override { return *collectives_[i]; }
  int lanes() const override { return kLanes; }
  void release() override { segment_.unlink(); }

 private:
  static constexpr int kLanes = kMaxLanes;
  static Layout layoutOf(const ShmOptions& o);
  Segment segment_;
  bool singleCopyAllowed_;
  bool timedCopyPath_;
  std::string staged_ = "not agreed: connect() was not called";  // why blocks stage ("" once single copy is agreed)
  SingleCopyFrom from_;  // where single copy was agreed: from which sizes
  std::vector<double> coreRoundTrips_;  // as timed at connect() (core_probe.h)
  std::unique_ptr<ShmTransport> transports_[kLanes];
  std::unique_ptr<SharedCollectives> collectives_[kLanes];
};

}  // namespace spmd::shm
