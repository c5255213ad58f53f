# elastic/: State, run and the membership error in one process (a single
# worker hosts its own coordinator; links gRPC, so not under TSan).
kolo_add_test(elastic_state_test SOURCES elastic_state_test.cc
  LIBS kolo_elastic LABELS unit)

# kolo-elastic-train's model (examples/elastic_train): gradient and the
# split-invariance of its fixed-point sums.
kolo_add_test(examples_model_test SOURCES examples_model_test.cc
  LIBS kolo_elastic_train_model LABELS unit tsan)
