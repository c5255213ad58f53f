// kolo's C++ API as a table of function pointers that kolo._kolo exports in
// a capsule (kolo._kolo._c_api), for other native modules of the package
// (kolo._kolo_c10d). kolo's engine is linked statically into _kolo; a second
// module that linked it too would hold a second, uninitialised engine, so
// it calls _kolo's copy through this table instead.
//
// Thread-safety: the table is immutable; each function is as thread-safe as
// its counterpart in kolo/kolo.h.
// Invariants: both modules are built from the same tree with the same
// compiler (the capsule name carries kCApiVersion, checked at import), so
// the absl and std types in the signatures have one layout.
#ifndef KOLO_PYTHON_C_API_H_
#define KOLO_PYTHON_C_API_H_

#include "kolo/kolo.h"

namespace pybind11 {
class module_;
}

namespace kolo::python {

// Bumped whenever the table changes.
inline constexpr int kCApiVersion = 5;
// The capsule's name (PyCapsule_Import takes "module.attribute").
inline constexpr char kCApiCapsuleName[] = "kolo._kolo._c_api";

struct CApi {
  int version;
  bool (*is_initialized)();
  int (*rank)();
  int (*size)();
  absl::StatusOr<Handle> (*allreduce_async)(const Tensor&, const Tensor&,
                                            const AllreduceOptions&,
                                            absl::string_view, ProcessSet);
  absl::StatusOr<Handle> (*grouped_allreduce_async)(absl::Span<const Tensor>,
                                                    absl::Span<const Tensor>,
                                                    const AllreduceOptions&,
                                                    absl::string_view,
                                                    ProcessSet);
  absl::StatusOr<Handle> (*allgather_async)(const Tensor&, Allocator,
                                            absl::string_view, ProcessSet);
  absl::StatusOr<Handle> (*broadcast_async)(const Tensor&, int,
                                            absl::string_view, ProcessSet);
  absl::StatusOr<Handle> (*alltoall_async)(const Tensor&, Allocator,
                                           absl::Span<const int64_t>,
                                           absl::string_view, ProcessSet);
  absl::StatusOr<Handle> (*reducescatter_async)(const Tensor&, const Tensor&,
                                                const AllreduceOptions&,
                                                absl::Span<const int64_t>,
                                                absl::string_view, ProcessSet);
  absl::StatusOr<Handle> (*barrier_async)(absl::string_view, ProcessSet);
  absl::Status (*synchronize)(Handle, absl::Duration, OpResult*);
  absl::StatusOr<size_t> (*wait_any)(absl::Span<const Handle>, absl::Duration);
  absl::StatusOr<std::vector<int>> (*process_set_ranks)(ProcessSet);
  // The kind of membership change that ended an op with status `s`:
  // "lost", "hosts_updated", "leaving", "evicted", or "" when `s` is no
  // membership error (python/elastic_binding.h explains the kinds).
  const char* (*membership_kind)(const absl::Status& s);
  // The next submission on the calling thread is the call at `slot` of the
  // ordered stream `stream` (a process group's: proto Request.order_stream);
  // that submission consumes it, whether it succeeds or not.
  void (*order_next)(absl::string_view stream, uint32_t slot);
  // This rank refused its call `name` at `slot` of ordered stream `stream`
  // (process set `set`) because `why` — its own checks, or kolo's refusal
  // of the submission that took order_next: submits the slot's void, which
  // fails the other members' ops there on every rank, naming this rank and
  // `why`, at once (proto Request.order_void). Its handle ends (with that
  // error) once every member called there: synchronize it, and let the
  // slot's next call wait for it.
  absl::StatusOr<Handle> (*order_void)(absl::string_view stream, uint32_t slot,
                                       ProcessSet set, absl::string_view name,
                                       absl::string_view why);
};

// kolo._kolo: sets the module's _c_api attribute.
void BindCApi(pybind11::module_& m);

}  // namespace kolo::python

#endif  // KOLO_PYTHON_C_API_H_
