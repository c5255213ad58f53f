// The user-facing names of the collectives of proto::OpType ("allreduce",
// ...), shared by the coordinator's negotiation messages and the worker's
// errors and generated op names, so that both sides say the same thing.
//
// Thread-safety: a pure function.
#ifndef KOLO_PROTO_OP_NAMES_H_
#define KOLO_PROTO_OP_NAMES_H_

#include <string>

namespace kolo::proto {

// "allreduce", "allgather", "broadcast", "alltoall", "reducescatter",
// "barrier"; "unspecified op" for OP_UNSPECIFIED; "unknown op N" otherwise.
std::string OpTypeName(int op);

}  // namespace kolo::proto

#endif  // KOLO_PROTO_OP_NAMES_H_
