// What moving data between two CPUs costs right now: the bench's "spells" (whole invocations 3-4x slower, for
// every peer at once) are suspected to be the hypervisor placing the two vCPUs where modified cache lines
// travel far (on EPYC: different CCDs, no shared L3). Two threads, pinned to the first two CPUs this process
// may use, measure:
//   rtt_ns          a cache line bounced between them and back (best batch of 2000 round trips);
//   handoff_64k_us  one thread writes 64 KiB, the other copies it out (best of 200): what a staged copy pays;
//   memcpy_64k_us   the same copy within one thread, in cache (best of 200): the CPU's own speed.
// Prints one JSON object. Log it over time beside a bench run to see whether a spell is a placement:
//   cc -O2 -pthread -o bench/build/handoff bench/handoff.c
//   while sleep 20; do echo "$(date +%T) $(bench/build/handoff)"; done
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum { kBytes = 65536, kRoundTrips = 2000, kBatches = 50, kHandoffs = 200 };

static _Alignas(64) atomic_long turn;  // odd: the second thread's move; even: the first's
static _Alignas(64) char source[kBytes];
static _Alignas(64) char sink[kBytes];
static int cpus[2];

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void await_turn(long want) {
  while (atomic_load_explicit(&turn, memory_order_acquire) != want) {
  }
}

static void pass_turn(long to) { atomic_store_explicit(&turn, to, memory_order_release); }

// The second thread answers every odd turn: a bare bounce for the round trips, then a copy for the handoffs.
static void* answer(void* unused) {
  (void)unused;
  pin(cpus[1]);
  long t = 1;
  for (int i = 0; i < kBatches * kRoundTrips; ++i, t += 2) {
    await_turn(t);
    pass_turn(t + 1);
  }
  for (int i = 0; i < kHandoffs; ++i, t += 2) {
    await_turn(t);
    memcpy(sink, source, kBytes);
    pass_turn(t + 1);
  }
  return NULL;
}

int main(void) {
  cpu_set_t mine;
  sched_getaffinity(0, sizeof mine, &mine);
  for (int c = 0, found = 0; c < CPU_SETSIZE && found < 2; ++c) {
    if (CPU_ISSET(c, &mine)) cpus[found++] = c;
  }
  if (CPU_COUNT(&mine) < 2) {
    fprintf(stderr, "handoff: needs 2 CPUs, this process may use %d\n", CPU_COUNT(&mine));
    return 2;
  }
  pin(cpus[0]);
  pthread_t other;
  pthread_create(&other, NULL, answer, NULL);
  long t = 0;
  double rtt = 1e18, handoff = 1e18, local = 1e18;
  for (int b = 0; b < kBatches; ++b) {
    const double start = now_ns();
    for (int i = 0; i < kRoundTrips; ++i, t += 2) {
      pass_turn(t + 1);
      await_turn(t + 2);
    }
    const double per = (now_ns() - start) / kRoundTrips;
    if (per < rtt) rtt = per;
  }
  for (int i = 0; i < kHandoffs; ++i, t += 2) {
    const double start = now_ns();
    memset(source, i, kBytes);  // modified here, so the other CPU must fetch every line from this one
    pass_turn(t + 1);
    await_turn(t + 2);
    const double took = now_ns() - start;
    if (took < handoff) handoff = took;
  }
  pthread_join(other, NULL);
  for (int i = 0; i < kHandoffs; ++i) {
    const double start = now_ns();
    memcpy(sink, source, kBytes);
    __asm__ volatile("" : : "r"(sink) : "memory");  // the copy is used: the compiler keeps it
    const double took = now_ns() - start;
    if (took < local) local = took;
  }
  printf("{\"cpus\":[%d,%d],\"rtt_ns\":%.0f,\"handoff_64k_us\":%.2f,\"memcpy_64k_us\":%.2f}\n", cpus[0], cpus[1], rtt, handoff / 1e3,
         local / 1e3);
  return 0;
}
