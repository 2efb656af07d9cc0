// The --parallel spec: what it accepts and the one message a bad item gets.
#include <gtest/gtest.h>

#include "core/parallel/parallel_spec.h"
#include "tests/support/input_error.h"

using namespace remat;
using remat::testing::input_error_of;

TEST(ParallelSpec, ParsesEveryKey) {
  const ParallelSpec p = parse_parallel_spec("tp=8,sp,pp=4,schedule=interleaved:2,micro-batches=16,dp=64,zero=3");
  EXPECT_EQ(p.tp, 8);
  EXPECT_TRUE(p.sp);
  EXPECT_EQ(p.pp, 4);
  EXPECT_EQ(p.schedule, PipelineSchedule::Interleaved);
  EXPECT_EQ(p.chunks, 2);
  EXPECT_EQ(p.micro_batches, 16);
  EXPECT_EQ(p.dp, 64);
  EXPECT_EQ(p.zero, 3);
  EXPECT_EQ(parallel_spec_text(p), "tp=8,sp,pp=4,schedule=interleaved:2,micro-batches=16,dp=64,zero=3");
  const ParallelSpec q = parse_parallel_spec("pp=2,schedule=zb-h2,micro-batches=4");
  EXPECT_EQ(q.tp, 1);
  EXPECT_EQ(q.schedule, PipelineSchedule::ZbH2);
  EXPECT_EQ(parse_parallel_spec("tp=2").schedule, PipelineSchedule::OneFOneB);  // Megatron-LM's default
  const ParallelSpec r = parse_parallel_spec("pp=3,stages=3:5:4");
  EXPECT_EQ(r.stages, (std::vector<int>{3, 5, 4}));
  EXPECT_EQ(parallel_spec_text(r), "tp=1,pp=3,schedule=1f1b,micro-batches=1,dp=1,zero=0,stages=3:5:4");
}

TEST(ParallelSpec, BadItemsNameThemselves) {
  const std::string grammar =
      " (tp=T[,sp],pp=P[,schedule=gpipe|1f1b|interleaved:V|zb-h1|zb-h2],micro-batches=M[,dp=D,zero=0|1|2|3][,stages=N0:N1:...])";
  EXPECT_EQ(input_error_of([] { parse_parallel_spec("tp=2,pp=2,schedule=dualpipe"); }),
            "--parallel: 'schedule=dualpipe': unknown schedule 'dualpipe'" + grammar);
  EXPECT_EQ(input_error_of([] { parse_parallel_spec("tp=2,tp=4"); }), "--parallel: 'tp=4': 'tp' is given twice" + grammar);
  EXPECT_EQ(input_error_of([] { parse_parallel_spec("sp,pp=2"); }),
            "--parallel: 'sp': sequence parallelism splits along the tensor-parallel group: it needs tp=T with T > 1" + grammar);
  EXPECT_EQ(input_error_of([] { parse_parallel_spec("pp=4,schedule=interleaved:2,micro-batches=6"); }),
            "--parallel: 'schedule=interleaved:2': Megatron's interleaved schedule needs micro-batches (6) to be a multiple "
            "of pp (4)" + grammar);
  EXPECT_EQ(input_error_of([] { parse_parallel_spec("ep=2"); }), "--parallel: 'ep=2': unknown key 'ep'" + grammar);
  EXPECT_EQ(input_error_of([] { parse_parallel_spec("zero=4"); }), "--parallel zero must be between 0 and 3, got 4");
  EXPECT_EQ(input_error_of([] { parse_parallel_spec("pp=2,stages=3:0"); }),
            "--parallel stages (blocks of a stage) must be between 1 and 100000, got 0");
}
