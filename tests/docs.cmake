# Documentation checks. docs_reference_test: tests/docs/check_reference.py
# holds docs/configuration.md against every variable kolo knows
# (common/variables.cc, the Horovod aliases), docs/running.md
# against `kolorun --help`, and docs/api/python.md against kolo.torch's
# names; it needs no torch and no Doxygen. (scripts/docs.sh builds the site
# itself, strictly, and also checks docs/api/cpp.md against Doxygen's view
# of include/kolo/.)
add_test(NAME docs_reference_test
         COMMAND ${KOLO_PYTHON_EXECUTABLE}
                 ${CMAKE_CURRENT_SOURCE_DIR}/docs/check_reference.py
                 --root ${PROJECT_SOURCE_DIR}
                 --kolorun $<TARGET_FILE:kolorun>)
set_tests_properties(docs_reference_test PROPERTIES
  LABELS unit TIMEOUT 60 ENVIRONMENT "${KOLO_TEST_ENV}")
