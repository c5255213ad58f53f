// kolo-consumer: a short allreduce, checked exactly. Every rank r contributes
// r + 1 in each of 1000 float32 elements and i in element i of an int64
// vector; the sums are size*(size+1)/2 and size*i. Prints one line per rank
// and exits 1 on any wrong element or error.
#include <cstdint>
#include <cstdio>
#include <vector>

#include "kolo/kolo.h"

int main() {
  if (absl::Status st = kolo::init(); !st.ok()) {
    std::fprintf(stderr, "init: %s\n", st.ToString().c_str());
    return 1;
  }
  const int rank = kolo::rank();
  const int size = kolo::size();
  std::vector<float> ones(1000, static_cast<float>(rank + 1));
  std::vector<int64_t> index(64);
  for (int64_t i = 0; i < 64; ++i) index[i] = i;

  absl::Status st =
      kolo::allreduce(ones.data(), ones.data(), 1000, kolo::DataType::kFloat32);
  if (st.ok()) {
    st =
        kolo::allreduce(index.data(), index.data(), 64, kolo::DataType::kInt64);
  }
  if (!st.ok()) {
    std::fprintf(stderr, "rank %d: allreduce: %s\n", rank,
                 st.ToString().c_str());
    return 1;
  }
  int wrong = 0;
  const float want = static_cast<float>(size * (size + 1) / 2);
  for (float v : ones) wrong += v != want;
  for (int64_t i = 0; i < 64; ++i) wrong += index[i] != size * i;
  std::printf("rank %d of %d: kolo %s: %s\n", rank, size, KOLO_VERSION_STRING,
              wrong == 0 ? "sums exact" : "WRONG SUMS");
  if (absl::Status down = kolo::shutdown(); !down.ok()) {
    std::fprintf(stderr, "rank %d: shutdown: %s\n", rank,
                 down.ToString().c_str());
    return 1;
  }
  return wrong == 0 ? 0 : 1;
}
