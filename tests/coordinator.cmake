# Coordinator tests: membership and the core need no gRPC (TSan-safe); the
# server test runs a real gRPC server on loopback.
kolo_add_test(coordinator_membership_test
  SOURCES coordinator_membership_test.cc
  LIBS kolo_coordinator_core
  LABELS unit tsan)
kolo_add_test(coordinator_core_test
  SOURCES coordinator_core_test.cc coordinator_core_elastic_test.cc
    coordinator_core_growth_test.cc
  LIBS kolo_coordinator_core
  LABELS unit tsan)
kolo_add_test(coordinator_recovery_test
  SOURCES coordinator_recovery_test.cc
  LIBS kolo_coordinator_core
  LABELS unit tsan)
kolo_add_test(coordinator_server_test
  SOURCES coordinator_server_test.cc
  LIBS kolo_coordinator
  LABELS unit)
kolo_add_test(coordinator_negotiator_test
  SOURCES coordinator_negotiator_test.cc coordinator_negotiator_cache_test.cc
    coordinator_negotiator_order_test.cc
    testing/negotiator_messages.cc
  LIBS kolo_coordinator_core
  LABELS unit tsan)
kolo_add_test(coordinator_negotiator_leave_test
  SOURCES coordinator_negotiator_leave_test.cc testing/negotiator_messages.cc
  LIBS kolo_coordinator_core
  LABELS unit tsan)
kolo_add_test(coordinator_negotiator_sets_test
  SOURCES coordinator_negotiator_sets_test.cc coordinator_negotiator_join_test.cc
    coordinator_negotiator_groups_test.cc testing/negotiator_messages.cc
  LIBS kolo_coordinator_core
  LABELS unit tsan)
kolo_add_test(coordinator_metrics_text_test
  SOURCES coordinator_metrics_text_test.cc
  LIBS kolo_coordinator_core
  LABELS unit tsan)
kolo_add_test(coordinator_event_log_test
  SOURCES coordinator_event_log_test.cc
  LIBS kolo_coordinator_core
  LABELS unit tsan)
kolo_add_test(coordinator_response_cache_test
  SOURCES coordinator_response_cache_test.cc
  LIBS kolo_coordinator_core
  LABELS unit tsan)
# The negotiation link: LinkServer against the worker's NegotiationLink, which
# lives in the worker library `kolo` (it links gRPC, so not under TSan).
kolo_add_test(coordinator_link_test
  SOURCES coordinator_link_test.cc coordinator_link_io_test.cc
  LIBS kolo_coordinator_core kolo_worker
  LABELS unit)
kolo_add_test(coordinator_partial_order_test
  SOURCES coordinator_partial_order_test.cc
  LIBS kolo_coordinator_core
  LABELS unit tsan)
# The gRPC port's gate, with a fake hand-over (no gRPC: TSan-safe), plaintext
# and under TLS (an OpenSSL client: tests/testing/tls_client.h).
kolo_add_test(coordinator_grpc_gate_test
  SOURCES coordinator_grpc_gate_test.cc
  LIBS kolo_coordinator_core kolo_tls OpenSSL::SSL OpenSSL::Crypto
  LABELS unit tsan)
# The autotuner (coordinator/autotune.h) against a synthetic workload whose
# best setting is known, and through CoordinatorCore.
kolo_add_test(coordinator_autotune_test
  SOURCES coordinator_autotune_test.cc coordinator_autotune_core_test.cc
  LIBS kolo_coordinator_core
  LABELS unit)
# The control plane under TLS (issue 38): joins and every refusal.
kolo_add_test(coordinator_tls_test
  SOURCES coordinator_tls_test.cc
  LIBS kolo_coordinator kolo_worker kolo_tls OpenSSL::SSL OpenSSL::Crypto
  LABELS unit)
