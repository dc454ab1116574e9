// Memory-copy bandwidth for `npm run bench`'s ceilings: K processes each copy their own BYTES-sized
// buffer (beyond every cache at 256 MiB) at the same moment; the aggregate bandwidth of one repeat is
// K * BYTES / (last copy's end - first copy's start), in bytes copied per second (one copy = BYTES read
// and BYTES written). Each repeat copies twice, with memcpy and with non-temporal stores (as the runner's
// copies past the cache do: native/src/kernels/cpu/stream_copy.cc), and counts the faster: on the EPYC VM
// glibc's memcpy of 128 MiB ran at 13 GB/s and the streaming copy at 21, so a ceiling from memcpy alone
// would sit below what the runner reaches.
//
//   memcpy_bw BYTES K REPEATS
//
// Prints one JSON object: {"bytes":..., "processes":K, "repeats_bytes_per_s":[...], "median_bytes_per_s":...}.
// Buffers are written before the first repeat (no page faults in the timing) and one untimed copy runs
// first; the processes start each repeat together on a process-shared barrier.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

enum { kVariants = 2 };  // memcpy, streaming

typedef struct {
  pthread_barrier_t barrier;
  double t[];  // [repeat][variant][process][start, end]
} Shared;

// The buffers are page-aligned and BYTES a multiple of 64 is not promised: the tail goes by memcpy.
static void stream_copy(char* dst, const char* src, size_t n) {
#if defined(__x86_64__)
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m128i a = _mm_loadu_si128((const __m128i*)(src + i)), b = _mm_loadu_si128((const __m128i*)(src + i + 16));
    __m128i c = _mm_loadu_si128((const __m128i*)(src + i + 32)), d = _mm_loadu_si128((const __m128i*)(src + i + 48));
    _mm_stream_si128((__m128i*)(dst + i), a);
    _mm_stream_si128((__m128i*)(dst + i + 16), b);
    _mm_stream_si128((__m128i*)(dst + i + 32), c);
    _mm_stream_si128((__m128i*)(dst + i + 48), d);
  }
  memcpy(dst + i, src + i, n - i);
  _mm_sfence();
#else
  memcpy(dst, src, n);
#endif
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static long parse(const char* s, long min) {
  char* end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < min) {
    fprintf(stderr, "memcpy_bw: expected an integer >= %ld, got %s\n", min, s);
    exit(2);
  }
  return v;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static void child(Shared* sh, size_t bytes, int k, int me, int repeats) {
  char *src = NULL, *dst = NULL;
  if (posix_memalign((void**)&src, 4096, bytes) || posix_memalign((void**)&dst, 4096, bytes)) {
    fprintf(stderr, "memcpy_bw: out of memory\n");
    _exit(1);
  }
  memset(src, 1, bytes);
  memset(dst, 2, bytes);
  memcpy(dst, src, bytes);  // untimed
  for (int r = 0; r < repeats; ++r) {
    for (int v = 0; v < kVariants; ++v) {
      pthread_barrier_wait(&sh->barrier);
      double t0 = now_s();
      v ? stream_copy(dst, src, bytes) : (void)memcpy(dst, src, bytes);
      double t1 = now_s();
      sh->t[((r * kVariants + v) * k + me) * 2] = t0;
      sh->t[((r * kVariants + v) * k + me) * 2 + 1] = t1;
    }
  }
  // Keeps the copy from being optimised away.
  _exit(dst[bytes - 1] == 1 ? 0 : 1);
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: memcpy_bw BYTES PROCESSES REPEATS\n");
    return 2;
  }
  const size_t bytes = (size_t)parse(argv[1], 1);
  const int k = (int)parse(argv[2], 1), repeats = (int)parse(argv[3], 1);
  size_t shared = sizeof(Shared) + sizeof(double) * 2 * kVariants * (size_t)k * (size_t)repeats;
  Shared* sh = mmap(NULL, shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return perror("mmap"), 1;
  pthread_barrierattr_t attr;
  pthread_barrierattr_init(&attr);
  pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(&sh->barrier, &attr, (unsigned)k);
  for (int i = 0; i < k; ++i) {
    pid_t pid = fork();
    if (pid < 0) return perror("fork"), 1;
    if (pid == 0) child(sh, bytes, k, i, repeats);
  }
  int failed = 0;
  for (int i = 0; i < k; ++i) {
    int status;
    if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
  }
  if (failed) {
    fprintf(stderr, "memcpy_bw: a copier process failed\n");
    return 1;
  }
  double* bw = calloc((size_t)repeats, sizeof(double));
  printf("{\"bytes\":%zu,\"processes\":%d,\"repeats_bytes_per_s\":[", bytes, k);
  for (int r = 0; r < repeats; ++r) {
    for (int v = 0; v < kVariants; ++v) {
      double first = 1e300, last = 0;
      for (int i = 0; i < k; ++i) {
        double t0 = sh->t[((r * kVariants + v) * k + i) * 2], t1 = sh->t[((r * kVariants + v) * k + i) * 2 + 1];
        if (t0 < first) first = t0;
        if (t1 > last) last = t1;
      }
      double rate = (double)k * (double)bytes / (last - first);
      if (rate > bw[r]) bw[r] = rate;
    }
    printf("%s%.0f", r ? "," : "", bw[r]);
  }
  qsort(bw, (size_t)repeats, sizeof(double), cmp);
  double median = repeats % 2 ? bw[repeats / 2] : (bw[repeats / 2 - 1] + bw[repeats / 2]) / 2;
  printf("],\"median_bytes_per_s\":%.0f}\n", median);
  return 0;
}
