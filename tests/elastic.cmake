# elastic/: State, run and the membership error in one process (a single
# worker hosts its own coordinator; links gRPC, so not under TSan).
kolo_add_test(elastic_state_test SOURCES elastic_state_test.cc
  LIBS kolo_elastic LABELS unit)
