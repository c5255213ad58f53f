#include "proto/op_names.h"

#include "proto/kolo.pb.h"

namespace kolo::proto {

std::string OpTypeName(int op) {
  switch (op) {
    case ALLREDUCE:
      return "allreduce";
    case ALLGATHER:
      return "allgather";
    case BROADCAST:
      return "broadcast";
    case ALLTOALL:
      return "alltoall";
    case REDUCESCATTER:
      return "reducescatter";
    case BARRIER:
      return "barrier";
    case JOIN:
      return "join";
    case PROCESS_SET_ADD:
      return "add_process_set";
    case PROCESS_SET_REMOVE:
      return "remove_process_set";
    case MEMBERSHIP_CHECK:
      return "membership check";
    case OP_UNSPECIFIED:
      return "unspecified op";
    default:
      return "unknown op " + std::to_string(op);
  }
}

}  // namespace kolo::proto
