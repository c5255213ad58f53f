// The memory-bandwidth limit of an allreduce on this machine, timed as
// copies (memcpy: the fastest way this machine moves bytes) of the bytes an
// allreduce must move, T threads (the ranks, pinned one per core) at once:
//
//  - "memory": every rank of an out-of-place allreduce must at least read
//    its input and write its output, whatever the algorithm (shared slots
//    and the peers' data can stay in cache; 64 MiB of input and output
//    cannot): each thread copies its SIZE-byte input to its output.
//  - "allreduce" (T = 2): besides, each rank must get the peer's half of the
//    input for the half it reduces, and the peer's half of the result, from
//    the other core. Per 256 KiB chunk, as kolo's ShmAllreduce moves them:
//    copy the half the peer reduces into a shared slot; barrier; copy the
//    own half of the input to the output; copy the peer's slot's half into
//    the own slot (the reduce's cross-core read and its publication);
//    barrier; copy the peer's published half to the output. The reduction's
//    arithmetic itself is left out, so this is a floor, not a model.
//
// It prints, per pattern, the median over rounds of the slowest thread, and
// the bus bandwidth an allreduce of SIZE bytes over T ranks would reach in
// that time (2(T-1)/T * SIZE / time).
//
// Usage: memory_limit [SIZE_BYTES=64Mi] [THREADS=2] [ROUNDS=21]
// Built and run by scripts/memory-limit.sh.
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static size_t size;
static int threads, rounds;
static pthread_barrier_t barrier;
static double* seconds;   // [round * threads + thread], "memory"
static double* seconds2;  // the same, "allreduce"
static char* slots[2];    // the two threads' shared slots (2 x 256 KiB)
static atomic_uint arrived;

enum { kChunk = 256 * 1024 };

// A spinning barrier for the two threads of the "allreduce" pattern (each
// has a core): the n-th call returns once both made it.
static void Meet(unsigned* n) {
  *n += 2;
  atomic_fetch_add(&arrived, 1);
  while (atomic_load(&arrived) < *n) {
  }
}

static void AllreduceBytes(int t, const char* in, char* out, unsigned* met,
                           unsigned use) {
  const int peer = 1 - t;
  for (size_t at = 0; at < size; at += kChunk, ++use) {
    const size_t c = size - at < kChunk ? size - at : kChunk;
    const size_t half = c / 2;
    // This thread reduces [own, own + len); the peer the other half.
    const size_t own = t == 0 ? 0 : half, len = t == 0 ? half : c - half;
    const size_t theirs = t == 0 ? half : 0, their_len = c - len;
    char* mine = slots[t] + (use % 2) * kChunk;
    const char* other = slots[peer] + (use % 2) * kChunk;
    memcpy(mine + theirs, in + at + theirs, their_len);
    Meet(met);
    memcpy(out + at + own, in + at + own, len);
    memcpy(mine + own, other + own, len);
    Meet(met);
    memcpy(out + at + theirs, other + theirs, their_len);
  }
}

static double Now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void* Run(void* arg) {
  const int t = (int)(intptr_t)arg;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(t % CPU_SETSIZE, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  char* in = malloc(size);
  char* out = malloc(size);
  if (in == NULL || out == NULL) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  memset(in, t + 1, size);
  memset(out, 0, size);
  for (int r = -2; r < rounds; ++r) {  // two warm-up rounds
    pthread_barrier_wait(&barrier);
    const double start = Now();
    memcpy(out, in, size);
    const double took = Now() - start;
    if (r >= 0) seconds[r * threads + t] = took;
  }
  unsigned met = 0;
  for (int r = -2; threads == 2 && r < rounds; ++r) {
    pthread_barrier_wait(&barrier);
    const double start = Now();
    AllreduceBytes(t, in, out, &met, (unsigned)(r + 2) * 1024u);
    const double took = Now() - start;
    if (r >= 0) seconds2[r * threads + t] = took;
  }
  if (out[size - 1] != (char)(t + 1)) exit(2);
  free(in);
  free(out);
  return NULL;
}

static double Median(const double* by_thread) {
  double* slowest = calloc(rounds, sizeof(double));
  for (int r = 0; r < rounds; ++r) {
    for (int t = 0; t < threads; ++t) {
      if (by_thread[r * threads + t] > slowest[r]) {
        slowest[r] = by_thread[r * threads + t];
      }
    }
  }
  int Less(const void* a, const void* b);
  qsort(slowest, rounds, sizeof(double), Less);
  const double median = slowest[rounds / 2];
  free(slowest);
  return median;
}

int Less(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  size = argc > 1 ? strtoull(argv[1], NULL, 0) : (size_t)64 << 20;
  threads = argc > 2 ? atoi(argv[2]) : 2;
  rounds = argc > 3 ? atoi(argv[3]) : 21;
  if (size == 0 || threads < 1 || rounds < 1) {
    fprintf(stderr, "usage: memory_limit [SIZE_BYTES] [THREADS] [ROUNDS]\n");
    return 1;
  }
  seconds = calloc((size_t)rounds * threads, sizeof(double));
  seconds2 = calloc((size_t)rounds * threads, sizeof(double));
  slots[0] = aligned_alloc(4096, 2 * kChunk);
  slots[1] = aligned_alloc(4096, 2 * kChunk);
  memset(slots[0], 0, 2 * kChunk);
  memset(slots[1], 0, 2 * kChunk);
  pthread_barrier_init(&barrier, NULL, threads);
  pthread_t ids[256];
  if (threads > 256) threads = 256;
  for (int t = 0; t < threads; ++t) {
    pthread_create(&ids[t], NULL, Run, (void*)(intptr_t)t);
  }
  for (int t = 0; t < threads; ++t) pthread_join(ids[t], NULL);
  const double median = Median(seconds);
  const double bus = threads > 1 ? 2.0 * (threads - 1) / threads * size : size;
  printf(
      "memory: %d threads each copying %zu bytes (read input, write output) "
      "at once: median %.2f ms over %d rounds; copy bandwidth per thread "
      "%.1f GB/s, all threads %.1f GB/s\n"
      "  limit for an allreduce of %zu bytes over %d ranks: %.2f ms, bus "
      "bandwidth %.2f GB/s (80%%: %.2f GB/s)\n",
      threads, size, median * 1e3, rounds, size / median / 1e9,
      threads * size / median / 1e9, size, threads, median * 1e3,
      bus / median / 1e9, 0.8 * bus / median / 1e9);
  if (threads == 2) {
    const double m2 = Median(seconds2);
    printf(
        "allreduce: the bytes a 2-rank shared-memory allreduce must move "
        "(input and output from and to memory, the peer's halves across "
        "cores), as copies in 256 KiB chunks: median %.2f ms\n"
        "  limit for an allreduce of %zu bytes over 2 ranks: %.2f ms, bus "
        "bandwidth %.2f GB/s (80%%: %.2f GB/s)\n",
        m2 * 1e3, size, m2 * 1e3, bus / m2 / 1e9, 0.8 * bus / m2 / 1e9);
  }
  return 0;
}
