# The Python package's tests (issue 20): pytest, under kolorun with 2 and 3
# ranks for the collectives, in one process for the package itself. Each
# ctest entry runs one kolorun for all its files (start-up is paid once).
# tests/python/run.sh exits 77 -- reported as skipped -- when the
# interpreter lacks torch or pytest. python_wheel_test: tests/install/wheel.sh;
# readme_quickstart_test: tests/docs/quickstarts.py.
if(KOLO_HAVE_PYTHON)
  set(_py_env ${KOLO_TEST_ENV} PYTHONPATH=${PROJECT_BINARY_DIR}/python
      PYTHONDONTWRITEBYTECODE=1 KOLO_PYTHON=${KOLO_PYTHON_EXECUTABLE})
  set(_py_run ${CMAKE_CURRENT_SOURCE_DIR}/python/run.sh)
  add_test(NAME python_package_test
           COMMAND ${_py_run} 1 test_package.py test_example_torch_train.py)
  foreach(np 2 3)
    add_test(NAME python_torch_np${np}_test
             COMMAND ${_py_run} ${np} test_collectives.py test_errors.py
                     test_lifecycle.py test_training.py test_elastic.py
                     test_cuda.py)
    set_tests_properties(python_torch_np${np}_test PROPERTIES RUN_SERIAL TRUE)
  endforeach()
  # kolo.torch.elastic through real faults (kill, SIGTERM leave, stop and
  # rejoin): examples/torch_elastic_train.py under kolorun --min-np.
  add_test(NAME python_elastic_test
           COMMAND ${_py_run} 1 test_example_torch_elastic.py)
  set_tests_properties(python_elastic_test PROPERTIES RUN_SERIAL TRUE)
  # Ranks that stop early (shutdown, a caught Ctrl-C) strand nobody: small
  # kolo.torch jobs under kolorun, each with a deadline (issue 39).
  add_test(NAME python_stranded_test COMMAND ${_py_run} 1 test_stranded.py)
  set_tests_properties(python_stranded_test PROPERTIES RUN_SERIAL TRUE)
  # kolo.torch under the real torchrun (python -m torch.distributed.run),
  # 2 workers: its coordinator port and secret through torchrun's store, a
  # user's KOLO_COORDINATOR/KOLO_SECRET_FILE, and the errors of a broken
  # store, each job with a deadline.
  add_test(NAME python_torchrun_test COMMAND ${_py_run} 1 test_torchrun.py)
  set_tests_properties(python_torchrun_test PROPERTIES RUN_SERIAL TRUE)
  # torch.distributed on the kolo backend (kolo.torch.distributed, issue
  # 40), where kolo._kolo_c10d is built (libtorch-dev installed): alone (a
  # tcp:// rendezvous, and two 2-worker torchrun launches) and under kolorun
  # with 2 and 3 ranks.
  set(_c10d_tests)
  if(TARGET kolo_c10d)
    add_test(NAME python_c10d_test
             COMMAND ${_py_run} 1 test_torch_distributed.py)
    foreach(np 2 3)
      add_test(NAME python_c10d_np${np}_test
               COMMAND ${_py_run} ${np} test_torch_distributed.py)
    endforeach()
    # Elastic DDP (issue 40 point 2): examples/torch_ddp_elastic_train.py
    # under kolorun --min-np with a worker killed and one asked to leave.
    add_test(NAME python_ddp_elastic_test
             COMMAND ${_py_run} 1 test_example_torch_ddp_elastic.py)
    set(_c10d_tests python_c10d_test python_c10d_np2_test python_c10d_np3_test
                    python_ddp_elastic_test)
    set_tests_properties(${_c10d_tests} PROPERTIES RUN_SERIAL TRUE)
  endif()
  foreach(t python_package_test python_torch_np2_test python_torch_np3_test
            python_elastic_test python_stranded_test python_torchrun_test
            ${_c10d_tests})
    set_tests_properties(${t} PROPERTIES LABELS "python;multiprocess"
      TIMEOUT 300 SKIP_RETURN_CODE 77 ENVIRONMENT "${_py_env}")
  endforeach()
  set_tests_properties(python_package_test PROPERTIES LABELS "python;unit")
  # pip install of the kolo-collectives wheel (issue 32 point 2): the wheel
  # from this build (KOLO_CMAKE_BUILD_DIR), a fresh venv, a 2-rank allreduce
  # through the venv's kolorun, a clean uninstall. Not in sanitizer builds
  # (their module cannot load into a plain interpreter).
  if(NOT KOLO_SANITIZE)
    add_test(NAME python_wheel_test
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install/wheel.sh
                     ${PROJECT_BINARY_DIR})
    set_tests_properties(python_wheel_test PROPERTIES
      LABELS "python;multiprocess" RUN_SERIAL TRUE TIMEOUT 600
      SKIP_RETURN_CODE 77 ENVIRONMENT "KOLO_PYTHON=${KOLO_PYTHON_EXECUTABLE}")
    # The README's quick starts, run exactly as written against an install
    # of this build (tests/docs/quickstarts.py): C++ through pkg-config,
    # Python, an elastic job, an injected fault.
    add_test(NAME readme_quickstart_test
             COMMAND ${KOLO_PYTHON_EXECUTABLE}
                     ${CMAKE_CURRENT_SOURCE_DIR}/docs/quickstarts.py
                     ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_BINARY_DIR})
    set_tests_properties(readme_quickstart_test PROPERTIES
      LABELS "python;multiprocess" RUN_SERIAL TRUE TIMEOUT 600
      ENVIRONMENT "KOLO_PYTHON=${KOLO_PYTHON_EXECUTABLE}")
  endif()
endif()
