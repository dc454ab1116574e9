#include "backends/shm/shm_backend.h"

#include "backends/shm/core_probe.h"
#include "backends/shm/crossover.h"

namespace spmd::shm {

Layout ShmBackend::layoutOf(const ShmOptions& o) { return Layout{o.size, kLanes, o.channelBytes, o.slotBytes, o.slots}; }

ShmBackend::ShmBackend(const ShmOptions& o)
    : segment_(o.create ? Segment::create(o.name, layoutOf(o), o.tag) : Segment::attach(o.name, layoutOf(o), o.tag)), singleCopyAllowed_(o.singleCopy), timedCopyPath_(o.timedCopyPath) {
  for (int i = 0; i < kLanes; ++i) {
    transports_[i] = std::make_unique<ShmTransport>(segment_, o.rank, i);
    ShmTransport* t = transports_[i].get();
    if (o.sharesCores) t->shareCores(*o.sharesCores);
    collectives_[i] = std::make_unique<SharedCollectives>(segment_, *t, i, [t](const std::string& why) { t->abort(why); });
    FlightRecorder& flight = collectives_[i]->flight();
    flight.mirrorTo(&segment_.presence(i, o.rank));
    t->setStragglerFinder([t, &flight] { return describeStragglers(t->sightings(), flight); });
  }
  segment_.header().attached.fetch_add(1);
}

void ShmBackend::connect() {
  ShmTransport& t = *transports_[0];
  t.setDeadline(Transport::Clock::now() + kAgreeWithin);
  staged_ = collectives_[0]->agreeSingleCopy(singleCopyAllowed_);
  if (staged_.empty()) from_ = timeSingleCopy(*collectives_[0], timedCopyPath_);
  coreRoundTrips_ = timeCoreRoundTrips(*collectives_[0], segment_.header().probe, !t.spins());
  t.setDeadline(Transport::Clock::time_point::max());
  if (!staged_.empty()) return;
  for (auto& c : collectives_) c->useSingleCopy(from_);
  for (auto& lane : transports_) lane->handOffFrom(from_.blocks);
}

std::string ShmBackend::copyPath() const { return describeCopyPath(staged_, from_); }

}  // namespace spmd::shm
