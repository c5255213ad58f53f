// The memory-bandwidth limit of an allreduce on this machine: every rank of
// an out-of-place allreduce must at least read its input and write its
// output, from and to memory, whatever the algorithm (the shared slots and
// the peers' data can stay in cache; the input and output of a 64 MiB
// buffer cannot). This program times exactly that traffic: T threads (the
// ranks, one per core) each memcpy their own SIZE-byte input to their own
// output at the same time, after a barrier; it prints each round's slowest
// thread, the median over rounds, and the bus bandwidth an allreduce of SIZE
// bytes over T ranks would reach in that time (2(T-1)/T * SIZE / time).
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
static double* seconds;  // [round * threads + thread]

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
  if (out[size - 1] != (char)(t + 1)) exit(2);
  free(in);
  free(out);
  return NULL;
}

static int Less(const void* a, const void* b) {
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
  pthread_barrier_init(&barrier, NULL, threads);
  pthread_t ids[256];
  if (threads > 256) threads = 256;
  for (int t = 0; t < threads; ++t) {
    pthread_create(&ids[t], NULL, Run, (void*)(intptr_t)t);
  }
  for (int t = 0; t < threads; ++t) pthread_join(ids[t], NULL);
  double* slowest = calloc(rounds, sizeof(double));
  for (int r = 0; r < rounds; ++r) {
    for (int t = 0; t < threads; ++t) {
      if (seconds[r * threads + t] > slowest[r]) {
        slowest[r] = seconds[r * threads + t];
      }
    }
  }
  qsort(slowest, rounds, sizeof(double), Less);
  const double median = slowest[rounds / 2];
  const double bus = threads > 1 ? 2.0 * (threads - 1) / threads * size : size;
  printf(
      "%d threads each copying %zu bytes (read input, write output) at "
      "once: median %.2f ms (min %.2f, max %.2f) over %d rounds\n"
      "copy bandwidth per thread %.1f GB/s (%.1f GB/s read+write); "
      "all threads %.1f GB/s copied\n"
      "limit for an allreduce of %zu bytes over %d ranks: %.2f ms, bus "
      "bandwidth %.2f GB/s (80%%: %.2f GB/s)\n",
      threads, size, median * 1e3, slowest[0] * 1e3,
      slowest[rounds - 1] * 1e3, rounds, size / median / 1e9,
      2 * size / median / 1e9, threads * size / median / 1e9, size, threads,
      median * 1e3, bus / median / 1e9, 0.8 * bus / median / 1e9);
  return 0;
}
