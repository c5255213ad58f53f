# The scripts' own tests (issue 38). goodput_test: scripts/goodput.py's
# arithmetic on a scripted schedule (no job). chaos_replay_test: two
# `scripts/chaos.sh --replay` of one round seed fire the same faults (two
# short jobs, 90 s with their reference runs: only with KOLO_LONG_TESTS=1,
# else skipped). chaos_1000_faults_test: `scripts/chaos.sh --faults 1000`,
# only with KOLO_LONG_TESTS=1 (else skipped: exit 77).
add_test(NAME goodput_test
         COMMAND ${KOLO_PYTHON_EXECUTABLE}
                 ${CMAKE_CURRENT_SOURCE_DIR}/scripts/goodput_test.py)
set_tests_properties(goodput_test PROPERTIES LABELS unit TIMEOUT 60)
add_test(NAME chaos_replay_test
         COMMAND sh -c "[ \"$KOLO_LONG_TESTS\" = 1 ] || exit 77; exec ${KOLO_PYTHON_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/scripts/chaos_replay_test.py")
set_tests_properties(chaos_replay_test PROPERTIES
  RUN_SERIAL TRUE TIMEOUT 600 SKIP_RETURN_CODE 77
  ENVIRONMENT "${KOLO_TEST_ENV};KOLO_BIN_DIR=${PROJECT_BINARY_DIR}/bin")
add_test(NAME chaos_1000_faults_test
         COMMAND sh -c "[ \"$KOLO_LONG_TESTS\" = 1 ] || exit 77; exec ${PROJECT_SOURCE_DIR}/scripts/chaos.sh --faults 1000 1")
set_tests_properties(chaos_1000_faults_test PROPERTIES
  RUN_SERIAL TRUE SKIP_RETURN_CODE 77 TIMEOUT 36000
  ENVIRONMENT "${KOLO_TEST_ENV};KOLO_BIN_DIR=${PROJECT_BINARY_DIR}/bin")
# fault_events_test: kolorun --events with --fault writes a `fault` event
# for each fault kolorun fires, matching the fault report (one short job).
add_test(NAME fault_events_test
         COMMAND ${KOLO_PYTHON_EXECUTABLE}
                 ${CMAKE_CURRENT_SOURCE_DIR}/scripts/fault_events_test.py)
set_tests_properties(fault_events_test PROPERTIES
  RUN_SERIAL TRUE TIMEOUT 300
  ENVIRONMENT "${KOLO_TEST_ENV};KOLO_BIN_DIR=${PROJECT_BINARY_DIR}/bin")
