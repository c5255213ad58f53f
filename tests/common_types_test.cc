// Element types: names, sizes, parsing.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kolo/types.h"

namespace kolo {
namespace {

using ::testing::HasSubstr;

TEST(Types, NamesSizesAndParsingRoundTrip) {
  const size_t sizes[kNumDataTypes] = {1, 1, 2, 4, 8, 2, 2, 4, 8, 1};
  for (int i = 0; i < kNumDataTypes; ++i) {
    const auto t = static_cast<DataType>(i);
    EXPECT_EQ(DataTypeSize(t), sizes[i]) << DataTypeName(t);
    absl::StatusOr<DataType> parsed = ParseDataType(DataTypeName(t));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, t);
  }
  for (int i = 0; i < kNumReduceOps; ++i) {
    const auto op = static_cast<ReduceOp>(i);
    absl::StatusOr<ReduceOp> parsed = ParseReduceOp(ReduceOpName(op));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, op);
  }
  EXPECT_EQ(DataTypeName(DataType::kBFloat16), "bfloat16");
  EXPECT_EQ(ReduceOpName(ReduceOp::kAverage), "average");
  EXPECT_EQ(DataTypeSize(static_cast<DataType>(77)), 0u);
  EXPECT_EQ(DataTypeName(static_cast<DataType>(77)), "unknown");
}

TEST(Types, Aliases) {
  EXPECT_EQ(*ParseDataType("float"), DataType::kFloat32);
  EXPECT_EQ(*ParseDataType("double"), DataType::kFloat64);
  EXPECT_EQ(*ParseDataType("half"), DataType::kFloat16);
  EXPECT_EQ(*ParseDataType("bf16"), DataType::kBFloat16);
  EXPECT_EQ(*ParseDataType("Float32"), DataType::kFloat32);
  EXPECT_EQ(*ParseReduceOp("avg"), ReduceOp::kAverage);
  EXPECT_EQ(*ParseReduceOp("MAX"), ReduceOp::kMax);
}

TEST(Types, ParseErrorsListTheValidNames) {
  absl::StatusOr<DataType> t = ParseDataType("float128");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("'float128'"));
  EXPECT_THAT(std::string(t.status().message()),
              HasSubstr("uint8, int8, int16, int32, int64, float16, "
                        "bfloat16, float32, float64, bool"));
  EXPECT_FALSE(ParseDataType("").ok());
  absl::StatusOr<ReduceOp> op = ParseReduceOp("median");
  EXPECT_EQ(op.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(op.status().message()),
              HasSubstr("sum, average, min, max, product"));
}

}  // namespace
}  // namespace kolo
