// The edit distance of common/edit_distance.h, by dynamic programming over
// the (|a|+1) x (|b|+1) table of prefix distances.
#include "common/edit_distance.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"

namespace kolo {

size_t EditDistance(absl::string_view a, absl::string_view b, EditOps ops) {
  const std::string x = absl::AsciiStrToUpper(a), y = absl::AsciiStrToUpper(b);
  const size_t n = x.size(), m = y.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  const bool transpositions = ops == EditOps::kWithTranspositions;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = x[i - 1] == y[j - 1] ? 0 : 1;
      d[i][j] =
          std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (transpositions && i > 1 && j > 1 && x[i - 1] == y[j - 2] &&
          x[i - 2] == y[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

}  // namespace kolo
