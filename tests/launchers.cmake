# Jobs started by real launchers other than kolorun (tests/launchers/):
#   launchers_slurm_test   a private Slurm cluster (munged, slurmctld, slurmd)
#                          on this machine: srun, sbatch with
#                          examples/slurm/train.sbatch, and an elastic kolorun
#                          inside an allocation (examples/slurm/elastic.sbatch)
#   launchers_mpirun_test  Open MPI's mpirun -np 4
# Each skips (exit 77) when its launcher is not installed. RUN_SERIAL: they
# start daemons and several workers on a 2-core machine.
add_test(NAME launchers_slurm_test
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/launchers/slurm_test.sh
    ${PROJECT_BINARY_DIR}/bin ${PROJECT_SOURCE_DIR})
add_test(NAME launchers_mpirun_test
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/launchers/mpirun_test.sh
    ${PROJECT_BINARY_DIR}/bin)
set_tests_properties(launchers_slurm_test PROPERTIES
  LABELS "multiprocess;slurm" TIMEOUT 180 RUN_SERIAL TRUE
  SKIP_RETURN_CODE 77 ENVIRONMENT "${KOLO_TEST_ENV}")
set_tests_properties(launchers_mpirun_test PROPERTIES
  LABELS "multiprocess;mpirun" TIMEOUT 120 RUN_SERIAL TRUE
  SKIP_RETURN_CODE 77 ENVIRONMENT "${KOLO_TEST_ENV}")
