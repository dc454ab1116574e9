// Open MPI baseline for `npm run bench`: times MPI's own collectives the way the runner times its ops
// (native/src/runtime/executor.cc and src/metrics/aggregate.ts), so the two columns of the comparison differ
// only in the library that moves the bytes.
//
//   mpirun -np W ompi_coll WARMUP ITERS OP:COUNT [OP:COUNT ...]
//
// OP is a runner op name (allreduce, reduce_scatter, all_gather, gather, all_to_all, broadcast) and COUNT
// the float32 elements of the op's input tensor on each rank, as in the runner's job file:
//   allreduce       MPI_Allreduce(COUNT, sum)
//   reduce_scatter  MPI_Reduce_scatter_block(COUNT / W per rank, sum)   COUNT a multiple of W
//   all_gather      MPI_Allgather(COUNT from each rank)
//   gather          MPI_Gather(COUNT from each rank, root 0)
//   all_to_all      MPI_Alltoall(COUNT / W to each rank)                COUNT a multiple of W
//   broadcast       MPI_Bcast(COUNT, root 0)
//
// Like the runner: every buffer is allocated (and inputs filled) before the first step; a run is WARMUP
// untimed steps and then ITERS timed ones; each step runs the ops in the order given, each as
// MPI_Barrier, t0, op, t1 on every rank (CLOCK_MONOTONIC, like std::chrono::steady_clock). An op's time
// per iteration is the slowest rank's (MPI_Reduce with MPI_MAX), and avg/p50/p95/min/max are taken over
// those per-iteration maxima; each rank's own mean is reported too. Rank 0 prints one JSON object with the
// peak resident memory (getrusage ru_maxrss, KiB) of every rank, measured after the last step.
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

enum Kind { ALLREDUCE, REDUCE_SCATTER, ALL_GATHER, GATHER, ALL_TO_ALL, BROADCAST };
static const char* const NAMES[] = {"allreduce", "reduce_scatter", "all_gather", "gather", "all_to_all", "broadcast"};

typedef struct {
  enum Kind kind;
  long count;  // input elements per rank
  float* in;
  float* out;
  double* times;  // ITERS per-iteration microseconds on this rank
} Op;

static int rank_, world_;

static void die(const char* fmt, const char* what) {
  if (rank_ == 0) {
    fprintf(stderr, "ompi_coll: ");
    fprintf(stderr, fmt, what);
    fprintf(stderr, "\n");
  }
  MPI_Abort(MPI_COMM_WORLD, 2);
  exit(2);
}

static void* alloc(size_t bytes) {
  void* p = NULL;
  if (bytes == 0) bytes = 1;
  if (posix_memalign(&p, 64, bytes) != 0) die("out of memory (%s)", "posix_memalign");
  return p;
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void run(const Op* op) {
  const int n = (int)op->count, block = (int)(op->count / world_);
  switch (op->kind) {
    case ALLREDUCE: MPI_Allreduce(op->in, op->out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case REDUCE_SCATTER: MPI_Reduce_scatter_block(op->in, op->out, block, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case ALL_GATHER: MPI_Allgather(op->in, n, MPI_FLOAT, op->out, n, MPI_FLOAT, MPI_COMM_WORLD); break;
    case GATHER: MPI_Gather(op->in, n, MPI_FLOAT, op->out, n, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
    case ALL_TO_ALL: MPI_Alltoall(op->in, block, MPI_FLOAT, op->out, block, MPI_FLOAT, MPI_COMM_WORLD); break;
    case BROADCAST: MPI_Bcast(op->out, n, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
  }
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

// Nearest-rank percentile of sorted values, as src/metrics/stats.ts computes it.
static double percentile(const double* sorted, int n, double p) {
  if (n == 0) return 0;
  long i = (long)ceil((p / 100) * n) - 1;
  if (i < 0) i = 0;
  if (i > n - 1) i = n - 1;
  return sorted[i];
}

static long parse_long(const char* s, const char* what) {
  char* end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < 0) die("expected a non-negative integer, got %s", what);
  return v;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_);
  if (argc < 4) die("%s", "usage: ompi_coll WARMUP ITERS OP:COUNT [OP:COUNT ...]");
  const int warmup = (int)parse_long(argv[1], argv[1]);
  const int iters = (int)parse_long(argv[2], argv[2]);
  if (iters < 1) die("ITERS must be at least 1, got %s", argv[2]);
  const int nops = argc - 3;
  Op* ops = calloc((size_t)nops, sizeof(Op));
  for (int i = 0; i < nops; ++i) {
    const char* arg = argv[3 + i];
    const char* colon = strchr(arg, ':');
    if (!colon) die("expected OP:COUNT, got %s", arg);
    int k = -1;
    for (int j = 0; j < 6; ++j)
      if ((size_t)(colon - arg) == strlen(NAMES[j]) && strncmp(arg, NAMES[j], (size_t)(colon - arg)) == 0) k = j;
    if (k < 0) die("unknown op in %s", arg);
    Op* op = &ops[i];
    op->kind = (enum Kind)k;
    op->count = parse_long(colon + 1, arg);
    if (op->count > 2147483647L) die("COUNT too large for an MPI count: %s", arg);
    if ((op->kind == REDUCE_SCATTER || op->kind == ALL_TO_ALL) && op->count % world_ != 0) die("COUNT must be a multiple of the world size: %s", arg);
    size_t n = (size_t)op->count, in = n, out = n;
    switch (op->kind) {
      case ALLREDUCE: break;
      case REDUCE_SCATTER: out = n / (size_t)world_; break;
      case ALL_GATHER: out = n * (size_t)world_; break;
      case GATHER: out = rank_ == 0 ? n * (size_t)world_ : 0; break;
      case ALL_TO_ALL: break;
      case BROADCAST: in = 0; break;  // broadcasts in place, from the root's output buffer (as the runner)
    }
    op->in = alloc(in * sizeof(float));
    op->out = alloc(out * sizeof(float));
    // Small integers, as the runner's default fill: sums stay exact, no denormals.
    for (size_t e = 0; e < in; ++e) op->in[e] = (float)((int)((e * 7 + (size_t)rank_) % 9) - 4);
    memset(op->out, 0, out * sizeof(float));  // the runner's std::vector zero-fills its outputs too
    if (op->kind == BROADCAST && rank_ == 0)
      for (size_t e = 0; e < n; ++e) op->out[e] = (float)((int)(e % 9) - 4);
    op->times = calloc((size_t)iters, sizeof(double));
  }

  for (int step = 0; step < warmup + iters; ++step) {
    for (int i = 0; i < nops; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = now_us();
      run(&ops[i]);
      double t1 = now_us();
      if (step >= warmup) ops[i].times[step - warmup] = t1 - t0;
    }
  }

  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double rss = (double)ru.ru_maxrss;  // KiB on Linux
  double* rsses = rank_ == 0 ? calloc((size_t)world_, sizeof(double)) : NULL;
  MPI_Gather(&rss, 1, MPI_DOUBLE, rsses, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);

  double* slowest = calloc((size_t)iters, sizeof(double));
  double* means = rank_ == 0 ? calloc((size_t)world_, sizeof(double)) : NULL;
  if (rank_ == 0) {
    printf("{\"world_size\":%d,\"warmup\":%d,\"iterations\":%d,\"max_rss_kib\":[", world_, warmup, iters);
    for (int r = 0; r < world_; ++r) printf("%s%.0f", r ? "," : "", rsses[r]);
    printf("],\"results\":[");
  }
  for (int i = 0; i < nops; ++i) {
    const Op* op = &ops[i];
    MPI_Reduce(op->times, slowest, iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    double mine = 0;
    for (int t = 0; t < iters; ++t) mine += op->times[t];
    mine /= iters;
    MPI_Gather(&mine, 1, MPI_DOUBLE, means, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank_ != 0) continue;
    double sum = 0;
    for (int t = 0; t < iters; ++t) sum += slowest[t];
    qsort(slowest, (size_t)iters, sizeof(double), cmp);
    printf("%s{\"op\":\"%s\",\"count\":%ld,\"time\":{\"avg_us\":%.3f,\"p50_us\":%.3f,\"p95_us\":%.3f,\"min_us\":%.3f,\"max_us\":%.3f},"
           "\"per_rank_avg_us\":[",
           i ? "," : "", NAMES[op->kind], op->count, sum / iters, percentile(slowest, iters, 50), percentile(slowest, iters, 95),
           slowest[0], slowest[iters - 1]);
    for (int r = 0; r < world_; ++r) printf("%s%.3f", r ? "," : "", means[r]);
    printf("]}");
  }
  if (rank_ == 0) {
    printf("]}\n");
    fflush(stdout);
  }
  MPI_Finalize();
  return 0;
}
