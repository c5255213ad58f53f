# The Kubernetes manifests (deploy/kubernetes/) run by a harness that plays
# the kubelet (tests/kubernetes/harness.py): pods in network namespaces,
# restart policy, pod deletion, StatefulSet scaling. CI runs one combined
# short scenario (a pod deleted, a container killed, 4 -> 6 -> 3 workers);
# KOLO_LONG_TESTS=1 (read at run time) adds each fault alone. Skips (77) without root, ip netns
# or python3-yaml. RUN_SERIAL: up to seven processes on a 2-core machine.
add_test(NAME kubernetes_harness_test
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/kubernetes/scenarios.py
    --scenario ci)
set_tests_properties(kubernetes_harness_test PROPERTIES
  LABELS "multiprocess;kubernetes" TIMEOUT 300 RUN_SERIAL TRUE
  SKIP_RETURN_CODE 77 ENVIRONMENT "${KOLO_TEST_ENV}")
# kolorun with the hostfile and discover_hosts.sh of the MPI Operator's MPIJob
# (deploy/kubernetes/mpijob.yaml), in exactly the operator's formats.
add_test(NAME kubernetes_mpijob_formats_test
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/kubernetes/mpijob_formats_test.sh
    ${PROJECT_BINARY_DIR}/bin)
set_tests_properties(kubernetes_mpijob_formats_test PROPERTIES
  LABELS "multiprocess;kubernetes" TIMEOUT 120 ENVIRONMENT "${KOLO_TEST_ENV}")
# Offline checks of the manifests and the Dockerfile (kubectl's validation
# needs an API server): see tests/kubernetes/check_manifests.py.
add_test(NAME kubernetes_manifests_test
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/kubernetes/check_manifests.py)
set_tests_properties(kubernetes_manifests_test PROPERTIES LABELS "kubernetes"
  TIMEOUT 60)
