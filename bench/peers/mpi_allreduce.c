/* A peer benchmark, not part of kolo: MPI_Allreduce (float32 sum, out of
 * place), timed the way kolo-bench times kolo (each rank's median of
 * per-iteration times, then the max over ranks; the iteration count comes
 * from rank 0's timing of 10 calls, for about SECONDS per size), so that
 * scripts/peer-bench.sh can run both side by side on the same machine.
 *
 * Usage: mpirun -np N mpi_allreduce MIN_BYTES MAX_BYTES [SECONDS=1]
 * Prints one line per size on rank 0: "bytes time_us" (factor 4 between
 * sizes). Exits non-zero when a result is wrong. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int Compare(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  int rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 3) {
    if (rank == 0) fprintf(stderr, "usage: %s MIN_BYTES MAX_BYTES [SECONDS]\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  const long min_bytes = atol(argv[1]), max_bytes = atol(argv[2]);
  const double seconds = argc > 3 ? atof(argv[3]) : 1.0;
  int failed = 0;
  for (long bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    const long count = bytes / (long)sizeof(float);
    float* in = malloc((size_t)bytes + 4);
    float* out = malloc((size_t)bytes + 4);
    for (long i = 0; i < count; ++i) in[i] = (float)(rank + i % 7);
    for (int i = 0; i < 3; ++i) {
      MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    double t0 = MPI_Wtime();
    for (int i = 0; i < 10; ++i) {
      MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    long iters = (long)(seconds * 10 / (MPI_Wtime() - t0));
    if (iters < 5) iters = 5;
    if (iters > 1000000) iters = 1000000;
    MPI_Bcast(&iters, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    double* times = malloc(sizeof(double) * (size_t)iters);
    for (long it = 0; it < iters; ++it) {
      t0 = MPI_Wtime();
      MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      times[it] = (MPI_Wtime() - t0) * 1e6;
    }
    /* Sum over ranks r of (r + i % 7) = n(n-1)/2 + n * (i % 7): exact. */
    for (long i = 0; i < count; ++i) {
      const float want = (float)(size * (size - 1) / 2 + size * (i % 7));
      if (out[i] != want) {
        fprintf(stderr, "mpi_allreduce: rank %d: element %ld is %g, expected %g\n",
                rank, i, out[i], want);
        failed = 1;
        break;
      }
    }
    qsort(times, (size_t)iters, sizeof(double), Compare);
    double median = times[iters / 2], slowest = 0;
    MPI_Reduce(&median, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%ld %.1f\n", bytes, slowest);
    fflush(stdout);
    free(times);
    free(in);
    free(out);
  }
  MPI_Finalize();
  return failed;
}
