#include "coordinator/negotiator_checks.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/check.h"
#include "kolo/types.h"
#include "proto/op_names.h"

namespace kolo::coordinator {
namespace {

using Requests = std::vector<const proto::Request*>;

// The ranks requests come from: ranks[i] is the rank of the i-th request.
using Ranks = std::vector<int>;

struct Group {
  std::string value;
  std::vector<int> ranks;
};

// Ranks grouped by value, largest group first; ties: lowest rank first.
std::vector<Group> GroupByValue(const std::vector<std::string>& values) {
  std::vector<Group> groups;  // in order of each group's lowest rank
  for (int r = 0; r < static_cast<int>(values.size()); ++r) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
      return g.value == values[r];
    });
    if (it == groups.end()) {
      groups.push_back(Group{values[r], {r}});
    } else {
      it->ranks.push_back(r);
    }
  }
  std::stable_sort(groups.begin(), groups.end(),
                   [](const Group& a, const Group& b) {
                     return a.ranks.size() > b.ranks.size();
                   });
  return groups;
}

// The shortest decimal form that reads back as `v` ("1", "0.5", "0.1").
std::string FormatDouble(double v) {
  for (int precision = 6; precision < 17; ++precision) {
    std::string s = absl::StrFormat("%.*g", precision, v);
    if (std::strtod(s.c_str(), nullptr) == v) return s;
  }
  return absl::StrFormat("%.17g", v);
}

// "[1000,2048]"
std::string FormatShape(const proto::Request& r) {
  return absl::StrCat("[", absl::StrJoin(r.shape(), ","), "]");
}

// "[*,2048]": the dimensions after the first.
std::string FormatTrailingShape(const proto::Request& r) {
  std::vector<std::string> dims = {"*"};
  for (int i = 1; i < r.shape_size(); ++i) {
    dims.push_back(absl::StrCat(r.shape(i)));
  }
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

std::string FormatSplits(const proto::Request& r) {
  if (r.splits().empty()) return "default";
  return absl::StrCat("[", absl::StrJoin(r.splits(), ","), "]");
}

std::string FormatDtype(const proto::Request& r) {
  if (r.dtype() < 0 || r.dtype() >= kNumDataTypes) {
    return absl::StrCat("unknown(", r.dtype(), ")");
  }
  return std::string(DataTypeName(static_cast<DataType>(r.dtype())));
}

// The device *kind*: ranks agree on it, not on the ordinal (each rank
// drives its own GPU, usually its local_rank's).
std::string FormatDevice(const proto::Request& r) {
  if (r.device() == -1) return "cpu";
  return r.device() >= 0 ? "cuda" : absl::StrCat("invalid(", r.device(), ")");
}

std::string FormatReduceOp(const proto::Request& r) {
  if (r.reduce_op() < 0 || r.reduce_op() >= kNumReduceOps) {
    return absl::StrCat("unknown(", r.reduce_op(), ")");
  }
  return std::string(ReduceOpName(static_cast<ReduceOp>(r.reduce_op())));
}

std::string FormatPrescale(const proto::Request& r) {
  return FormatDouble(r.prescale());
}

std::string FormatPostscale(const proto::Request& r) {
  return FormatDouble(r.postscale());
}

std::string OpName(const proto::Request& r) {
  return proto::OpTypeName(r.op());
}

std::string FormatGroupSize(const proto::Request& r) {
  return r.group().empty() ? "none" : absl::StrCat(r.group_size());
}

std::string FormatRemovedSet(const proto::Request& r) {
  return absl::StrCat(r.root());
}

std::string FormatRoot(const proto::Request& r) {
  return absl::StrCat(r.root());
}

// A field the ranks must agree on: its name in messages, and its value.
struct Field {
  absl::string_view what;
  std::string (*value)(const proto::Request&);
};

// The fields of step 5 in the header, in the order they are checked.
std::vector<Field> OpFields(proto::OpType op) {
  switch (op) {
    case proto::ALLREDUCE:
      return {{"shape", FormatShape},
              {"reduce op", FormatReduceOp},
              {"prescale", FormatPrescale},
              {"postscale", FormatPostscale}};
    case proto::REDUCESCATTER:
      return {{"shape", FormatShape},
              {"reduce op", FormatReduceOp},
              {"prescale", FormatPrescale},
              {"postscale", FormatPostscale},
              {"splits", FormatSplits}};
    case proto::BROADCAST:
      return {{"shape", FormatShape}, {"root", FormatRoot}};
    case proto::ALLGATHER:
    case proto::ALLTOALL:
      return {{"shape", FormatTrailingShape}};
    case proto::PROCESS_SET_ADD:
      return {{"ranks", FormatSplits}};
    case proto::PROCESS_SET_REMOVE:
      return {{"process set", FormatRemovedSet}};
    default:
      return {};
  }
}

// "<op> <what> X on ranks .. but Y on rank .." when the ranks disagree on
// field; nullopt when they agree.
std::optional<std::string> Mismatch(const Requests& rs, const Ranks& ranks,
                                    absl::string_view op, const Field& field) {
  std::vector<std::string> values;
  values.reserve(rs.size());
  for (const proto::Request* r : rs) values.push_back(field.value(*r));
  if (std::all_of(values.begin(), values.end(),
                  [&](const std::string& v) { return v == values[0]; })) {
    return std::nullopt;
  }
  return absl::StrCat(op, op.empty() ? "" : " ", field.what, " ",
                      DescribeGroups(values, ranks));
}

// The first field of `fields` the ranks disagree on; nullopt if none.
std::optional<std::string> FirstMismatch(const Requests& rs, const Ranks& ranks,
                                         absl::string_view op,
                                         const std::vector<Field>& fields) {
  for (const Field& field : fields) {
    if (std::optional<std::string> m = Mismatch(rs, ranks, op, field)) {
      return m;
    }
  }
  return std::nullopt;
}

// "tensor 'x': ..." (or "process set registration 'process_set.3': ...").
proto::Response Error(absl::string_view name, absl::StatusCode code,
                      absl::string_view text, proto::OpType op) {
  proto::Response response;
  response.add_names(std::string(name));
  response.set_error_code(static_cast<int>(code));
  const bool registration =
      op == proto::PROCESS_SET_ADD || op == proto::PROCESS_SET_REMOVE;
  response.set_error(
      absl::StrCat(registration ? "process set registration '" : "tensor '",
                   name, "': ", text));
  return response;
}

// "invalid on rank 2: R" / "invalid on ranks 1,3: R" / "invalid on rank 1:
// R1; on rank 3: R2"; nullopt when no rank flagged the request.
std::optional<std::string> DescribeInvalid(const Requests& rs,
                                           const Ranks& from) {
  std::vector<std::string> reasons;
  std::vector<int> ranks;
  for (int r = 0; r < static_cast<int>(rs.size()); ++r) {
    if (rs[r]->invalid().empty()) continue;
    reasons.push_back(rs[r]->invalid());
    ranks.push_back(from[r]);
  }
  if (ranks.empty()) return std::nullopt;
  std::vector<std::string> parts;
  for (const Group& g : GroupByValue(reasons)) {
    std::vector<int> group_ranks;
    for (int i : g.ranks) group_ranks.push_back(ranks[i]);
    parts.push_back(absl::StrCat(parts.empty() ? "invalid on " : "on ",
                                 RankList(group_ranks), ": ", g.value));
  }
  return absl::StrJoin(parts, "; ");
}

// Allgather and alltoall split the first dimension: a scalar cannot take
// part (a correct worker flags it invalid itself).
std::optional<std::string> CheckHasRows(const Requests& rs, const Ranks& ranks,
                                        const std::string& op) {
  if (rs[0]->op() != proto::ALLGATHER && rs[0]->op() != proto::ALLTOALL) {
    return std::nullopt;
  }
  for (int r = 0; r < static_cast<int>(rs.size()); ++r) {
    if (rs[r]->shape().empty()) {
      return absl::StrCat(op, " of a scalar on rank ", ranks[r],
                          ": the tensor needs at least one dimension");
    }
  }
  return std::nullopt;
}

// Whether `splits` are `size` non-negative entries summing to the first
// dimension of `r`.
bool SplitsFit(const proto::Request& r, int size) {
  if (r.splits_size() != size || r.shape().empty()) return false;
  int64_t sum = 0;
  for (int64_t s : r.splits()) {
    if (s < 0) return false;
    sum += s;
  }
  return sum == r.shape(0);
}

// The output an allgather (`receiver` -1: every rank's) or an alltoall
// (what rank index `receiver` gets) concatenates from every rank's rows:
// refused when larger than a tensor kolo takes (kMaxTensorElements /
// kMaxTensorBytes), so no rank is asked to allocate it. The ranks agree on
// dtype and row shape (checked before); their rows are checked by their
// own workers, and summed here without overflow.
std::optional<std::string> OutputTooLarge(const Requests& rs,
                                          const Ranks& ranks,
                                          const std::string& op, int receiver) {
  const proto::Request& first = *rs[0];
  if (first.shape().empty()) return std::nullopt;
  int64_t rows = 0;
  bool over = false;
  for (const proto::Request* r : rs) {
    int64_t add = 0;
    if (receiver < 0) {
      add = r->shape(0);
    } else if (receiver < r->splits_size()) {
      add = r->splits(receiver);
    }
    if (add < 0 || __builtin_add_overflow(rows, add, &rows)) {
      over = true;
      break;
    }
  }
  std::vector<int64_t> shape(first.shape().begin(), first.shape().end());
  shape[0] = rows;
  if (!over &&
      CheckedElements("", static_cast<DataType>(first.dtype()), shape).ok()) {
    return std::nullopt;
  }
  std::vector<int64_t> sent;
  for (const proto::Request* r : rs) {
    sent.push_back(receiver < 0                  ? r->shape(0)
                   : receiver < r->splits_size() ? r->splits(receiver)
                                                 : 0);
  }
  return absl::StrCat(
      op, ": the output ",
      receiver < 0 ? std::string("every rank")
                   : absl::StrCat("rank ", ranks[receiver]),
      " would get (rows [", absl::StrJoin(sent, ","), "] from ",
      RankList(ranks),
      ") is larger than kolo takes: at most 2^44 elements and 2^47 bytes "
      "per tensor");
}

// Guards against requests a correct worker flags invalid itself; nullopt
// when the agreed request can run.
std::optional<std::string> CheckRunnable(const Requests& rs, const Ranks& ranks,
                                         const std::string& op) {
  const int size = static_cast<int>(rs.size());
  const proto::Request& first = *rs[0];
  switch (first.op()) {
    case proto::ALLGATHER:
      return OutputTooLarge(rs, ranks, op, -1);
    case proto::ALLTOALL:
      for (int r = 0; r < size; ++r) {
        if (!SplitsFit(*rs[r], size)) {
          return absl::StrCat(op, " splits ", FormatSplits(*rs[r]), " on rank ",
                              ranks[r], " are not ", size,
                              " non-negative entries summing to the first "
                              "dimension of shape ",
                              FormatShape(*rs[r]));
        }
      }
      for (int r = 0; r < size; ++r) {
        if (auto bad = OutputTooLarge(rs, ranks, op, r)) return bad;
      }
      return std::nullopt;
    case proto::REDUCESCATTER:
      if (first.splits().empty() || SplitsFit(first, size)) {
        return std::nullopt;
      }
      return absl::StrCat(op, " splits ", FormatSplits(first), " are not ",
                          size,
                          " non-negative entries summing to the first "
                          "dimension of shape ",
                          FormatShape(first));
    case proto::BROADCAST:
      if (std::find(ranks.begin(), ranks.end(), first.root()) == ranks.end()) {
        return absl::StrCat(op, " root ", first.root(), " is not one of its ",
                            RankList(ranks));
      }
      return std::nullopt;
    case proto::ALLREDUCE:
    case proto::BARRIER:
    case proto::MEMBERSHIP_CHECK:
    case proto::PROCESS_SET_ADD:
    case proto::PROCESS_SET_REMOVE:
      return std::nullopt;
    default:
      return absl::StrCat(op, " on every rank: not a collective kolo knows");
  }
}

// The blocking calls' expectations (Request.expect): a rank that expects
// other rows from some rank than that rank sends; nullopt when every
// expectation holds.
std::optional<std::string> CheckExpected(const Requests& rs, const Ranks& ranks,
                                         const std::string& op) {
  const proto::OpType type = rs[0]->op();
  if (type != proto::ALLGATHER && type != proto::ALLTOALL) return std::nullopt;
  for (size_t i = 0; i < rs.size(); ++i) {
    if (rs[i]->expect().empty()) continue;
    std::vector<int64_t> sent;  // what each rank sends rank ranks[i]
    for (const proto::Request* r : rs) {
      sent.push_back(type == proto::ALLGATHER ? r->shape(0)
                                              : r->splits(static_cast<int>(i)));
    }
    const std::vector<int64_t> expected(rs[i]->expect().begin(),
                                        rs[i]->expect().end());
    if (expected == sent) continue;
    return absl::StrCat(
        op, type == proto::ALLGATHER ? " counts [" : " recv_splits [",
        absl::StrJoin(expected, ","), "] on rank ", ranks[i],
        " do not match what the ranks send it: [", absl::StrJoin(sent, ","),
        "]");
  }
  return std::nullopt;
}

}  // namespace

std::string DescribeCall(const proto::Request& r) {
  if (!r.group().empty()) {
    return absl::StrCat("grouped ", proto::OpTypeName(r.op()), " '", r.group(),
                        "' (", r.group_size(), " tensors)");
  }
  std::string out =
      absl::StrCat(proto::OpTypeName(r.op()), " '", r.name(), "'");
  if (r.op() != proto::BARRIER) {
    absl::StrAppend(&out, " (", FormatDtype(r), ", shape ", FormatShape(r),
                    ")");
  }
  return out;
}

std::string RankList(const std::vector<int>& ranks) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ",
                      absl::StrJoin(ranks, ","));
}

std::string DescribeGroups(const std::vector<std::string>& values,
                           const std::vector<int>& ranks) {
  std::vector<Group> groups = GroupByValue(values);
  if (!ranks.empty()) {
    for (Group& g : groups) {
      for (int& r : g.ranks) r = ranks[r];
    }
  }
  std::string out;
  for (size_t i = 0; i < groups.size(); ++i) {
    if (i == 1) {
      out += " but ";
    } else if (i > 1) {
      out += i + 1 == groups.size() ? " and " : ", ";
    }
    absl::StrAppend(&out, groups[i].value, " on ", RankList(groups[i].ranks));
  }
  return out;
}

proto::Response CheckAgreement(absl::string_view name, const Requests& rs,
                               const std::vector<int>& from) {
  KOLO_CHECK(!rs.empty()) << "no requests for tensor '" << name << "'";
  Ranks ranks = from;
  if (ranks.empty()) {
    for (int r = 0; r < static_cast<int>(rs.size()); ++r) ranks.push_back(r);
  }
  KOLO_CHECK(ranks.size() == rs.size())
      << ranks.size() << " ranks for " << rs.size() << " requests";
  const auto failed = absl::StatusCode::kFailedPrecondition;
  const auto invalid = absl::StatusCode::kInvalidArgument;
  if (std::optional<std::string> flagged = DescribeInvalid(rs, ranks)) {
    return Error(name, invalid, *flagged, rs[0]->op());
  }
  if (std::optional<std::string> m = Mismatch(rs, ranks, "", {"op", OpName})) {
    return Error(name, failed, *m, rs[0]->op());
  }
  const proto::OpType type = rs[0]->op();
  const std::string op = proto::OpTypeName(type);
  const std::vector<Field> tensor_fields = {{"dtype", FormatDtype},
                                            {"device kind", FormatDevice}};
  if (type != proto::BARRIER) {  // a barrier has no tensor
    if (std::optional<std::string> m =
            FirstMismatch(rs, ranks, op, tensor_fields)) {
      return Error(name, failed, *m, rs[0]->op());
    }
  }
  if (std::optional<std::string> m =
          Mismatch(rs, ranks, op, {"group size", FormatGroupSize})) {
    return Error(name, failed, *m, rs[0]->op());
  }
  if (std::optional<std::string> bad = CheckHasRows(rs, ranks, op)) {
    return Error(name, invalid, *bad, rs[0]->op());
  }
  if (std::optional<std::string> m =
          FirstMismatch(rs, ranks, op, OpFields(type))) {
    return Error(name, failed, *m, rs[0]->op());
  }
  if (std::optional<std::string> bad = CheckRunnable(rs, ranks, op)) {
    return Error(name, invalid, *bad, rs[0]->op());
  }
  if (std::optional<std::string> bad = CheckExpected(rs, ranks, op)) {
    return Error(name, invalid, *bad, rs[0]->op());
  }

  proto::Response response;
  response.add_names(std::string(name));
  response.set_op(type);
  response.set_process_set(rs[0]->process_set());
  if (type == proto::ALLGATHER) {  // every rank's first dimension
    for (const proto::Request* r : rs) response.add_sizes(r->shape(0));
  } else if (type == proto::ALLTOALL) {  // sender major
    for (const proto::Request* r : rs) {
      for (int64_t s : r->splits()) response.add_sizes(s);
    }
  }
  return response;
}

}  // namespace kolo::coordinator
