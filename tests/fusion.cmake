# fusion/: the fusion planner (pure computation, no gRPC: TSan-safe).
kolo_add_test(fusion_planner_test
  SOURCES fusion_planner_test.cc
  LIBS kolo_fusion
  LABELS unit tsan)
