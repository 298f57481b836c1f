// The ggml graph model and the replay of ggml's graph allocator (estimate/ggml_graph.cpp) on
// small graphs whose layout can be worked out by hand: graph order from expand, inputs first,
// in-place reuse (over a parent the allocator owns, never through a view), best fit among freed
// blocks, merging, outputs kept. The replay on llama.cpp's real graphs is checked against libllama
// in estimate_llamacpp_real_test.cpp.
#include "kvprof/engines/llamacpp/ggml_graph.hpp"

#include <gtest/gtest.h>

namespace kvprof::engines {

namespace {

constexpr uint32_t k_f32 = 0;
constexpr uint32_t k_i32 = 26;

// A row of n floats.
std::array<int64_t, 4> row(int64_t n) {
  return {n, 1, 1, 1};
}

TEST(GgmlGraph, ExpandListsSourcesFirstAndLeafsWhenFirstReached) {
  GgmlGraph g;
  const int32_t w = g.external(GgmlGraph::contiguous(k_f32, row(4)));
  const int32_t in_a = g.input(k_i32, row(4), "a");
  const int32_t in_b = g.input(k_i32, row(4), "b");
  const int32_t x = g.op(GgmlOp::get_rows, k_f32, row(8), {w, in_b});
  // y's first source is the leaf a, its second the node x: a is reached before x's leaf b.
  const int32_t y = g.op(GgmlOp::mul_mat, k_f32, row(8), {in_a, x});
  g.expand(y);
  EXPECT_EQ(g.nodes(), (std::vector<int32_t>{x, y}));
  EXPECT_EQ(g.leafs(), (std::vector<int32_t>{in_a, w, in_b}));
  g.expand(x);  // already listed: nothing changes
  EXPECT_EQ(g.nodes().size(), 2U);
}

TEST(GgmlGraph, ViewsPointAtTheRootTensorAndPermuteSwapsStrides) {
  GgmlGraph g;
  const int32_t a = g.op(GgmlOp::mul_mat, k_f32, {8, 4, 2, 1}, {});
  const int32_t r = g.reshape(a, {8, 8, 1, 1});
  const int32_t p = g.permute(r, {1, 0, 2, 3});
  EXPECT_EQ(g.at(p).view_src, a);
  EXPECT_EQ(g.at(p).ne, (std::array<int64_t, 4>{8, 8, 1, 1}));
  EXPECT_EQ(g.at(p).nb[0], 32U);
  EXPECT_EQ(g.at(p).nb[1], 4U);
  EXPECT_EQ(ggml_tensor_nbytes(g.at(a)), 8U * 4 * 2 * 4);
}

TEST(GgmlAllocReplay, InputsComeFirstAndAnExpandedLoneInputIsNeverFreed) {
  GgmlGraph g;
  const int32_t tokens = g.input(k_i32, row(16), "tokens");             // 64 bytes
  const int32_t x = g.op(GgmlOp::get_rows, k_f32, row(256), {tokens});  // 1 KiB
  g.expand(x);
  g.expand(g.input(k_f32, row(1024), "embd"));  // 4 KiB, used by nothing
  const int32_t y = g.op(GgmlOp::mul_mat, k_f32, row(256), {x});
  g.expand(y);
  // tokens [0, 64), embd [64, 4160), x [4160, 5184); tokens are freed after x, but y (1 KiB)
  // does not fit in their 64 bytes, so it goes on top.
  EXPECT_EQ(ggml_alloc_replay(g, 32), 64U + 4096 + 1024 + 1024);
}

TEST(GgmlAllocReplay, AnOpThatCanRunInPlaceReusesItsOnlyConsumersParent) {
  GgmlGraph g;
  const int32_t a = g.op(GgmlOp::mul_mat, k_f32, row(1024), {});
  const int32_t n = g.op(GgmlOp::rms_norm, k_f32, row(1024), {a});
  const int32_t m = g.op(GgmlOp::mul, k_f32, row(1024), {n});
  g.expand(m);
  EXPECT_EQ(ggml_alloc_replay(g, 32), 4096U);  // one buffer for all three

  GgmlGraph two;  // a has two consumers: the norm cannot overwrite it
  const int32_t b = two.op(GgmlOp::mul_mat, k_f32, row(1024), {});
  const int32_t nb = two.op(GgmlOp::rms_norm, k_f32, row(1024), {b});
  const int32_t sum = two.op(GgmlOp::add, k_f32, row(1024), {nb, b});
  two.expand(sum);
  EXPECT_EQ(ggml_alloc_replay(two, 32), 8192U);

  GgmlGraph glu;  // GLU is not an in-place op
  const int32_t c = glu.op(GgmlOp::mul_mat, k_f32, row(1024), {});
  glu.expand(glu.op(GgmlOp::glu, k_f32, row(1024), {c}));
  EXPECT_EQ(ggml_alloc_replay(glu, 32), 8192U);
}

TEST(GgmlAllocReplay, InPlaceOnlyOverAParentItAllocatedItselfNeverThroughAView) {
  GgmlGraph g;  // matmul -> rope: RoPE runs in the matmul's memory
  const int32_t q = g.op(GgmlOp::mul_mat, k_f32, {8, 8, 8, 1}, {});
  g.expand(g.op(GgmlOp::rope, k_f32, {8, 8, 8, 1}, {q}));
  EXPECT_EQ(ggml_alloc_replay(g, 32), 2048U);

  GgmlGraph view;  // matmul -> reshape -> rope: a view is not the allocator's own, no reuse
  const int32_t q2 = view.op(GgmlOp::mul_mat, k_f32, {64, 8, 1, 1}, {});
  const int32_t r2 = view.reshape(q2, {8, 8, 8, 1});
  view.expand(view.op(GgmlOp::rope, k_f32, {8, 8, 8, 1}, {r2}));
  EXPECT_EQ(ggml_alloc_replay(view, 32), 4096U);
}

TEST(GgmlAllocReplay, FreedBlocksAreReusedBestFitAndMerged) {
  GgmlGraph g;
  // a (1 KiB) and b (2 KiB) die after c; d (1 KiB) then fits a's block, the smallest that fits,
  // not b's; e (3 KiB) fits neither alone, so it grows the buffer.
  const int32_t a = g.op(GgmlOp::mul_mat, k_f32, row(256), {});
  const int32_t keep1 = g.op(GgmlOp::mul_mat, k_f32, row(8), {});
  const int32_t b = g.op(GgmlOp::mul_mat, k_f32, row(512), {});
  const int32_t keep2 = g.op(GgmlOp::mul_mat, k_f32, row(8), {});
  const int32_t c = g.op(GgmlOp::mul_mat, k_f32, row(8), {a, b});
  const int32_t d = g.op(GgmlOp::mul_mat, k_f32, row(256), {c});
  const int32_t e = g.op(GgmlOp::mul_mat, k_f32, row(768), {d, keep1, keep2});
  for (const int32_t t : {a, keep1, b, keep2, e})
    g.expand(t);
  // a [0,1024) keep1 [1024,1056) b [1056,3104) keep2 [3104,3136) c [3136,3168); d reuses
  // [0,1024); c is freed into the top block, where e goes: 3136 + 3072.
  EXPECT_EQ(ggml_alloc_replay(g, 32), 3136U + 3072);

  GgmlGraph m;  // neighbours freed together merge into one block that fits a larger tensor
  const int32_t x = m.op(GgmlOp::mul_mat, k_f32, row(256), {});
  const int32_t y = m.op(GgmlOp::mul_mat, k_f32, row(256), {});
  const int32_t guard = m.op(GgmlOp::mul_mat, k_f32, row(8), {});
  const int32_t z = m.op(GgmlOp::mul_mat, k_f32, row(8), {x, y});
  const int32_t big = m.op(GgmlOp::mul_mat, k_f32, row(512), {z, guard});
  for (const int32_t t : {x, y, guard, big})
    m.expand(t);
  // x [0,1024) y [1024,2048) guard [2048,2080) z [2080,2112); big takes the merged [0,2048).
  EXPECT_EQ(ggml_alloc_replay(m, 32), 2112U);
}

TEST(GgmlAllocReplay, OutputsAreNeverFreedOrReused) {
  GgmlGraph g;
  const int32_t a = g.op(GgmlOp::mul_mat, k_f32, row(256), {});
  g.set_output(a);
  const int32_t b = g.op(GgmlOp::mul, k_f32, row(256), {a});  // may not run over an output
  const int32_t c = g.op(GgmlOp::mul_mat, k_f32, row(256), {b});
  g.expand(c);
  EXPECT_EQ(ggml_alloc_replay(g, 32), 3072U);
}

TEST(GgmlAllocReplay, SizesAreRoundedToTheAlignment) {
  GgmlGraph g;
  const int32_t a = g.op(GgmlOp::mul_mat, k_f32, row(3), {});  // 12 bytes -> 32
  const int32_t b = g.op(GgmlOp::mul_mat, k_f32, row(3), {});
  g.expand(g.op(GgmlOp::add, k_f32, row(3), {a, b}));
  EXPECT_EQ(ggml_alloc_replay(g, 32), 64U);
  EXPECT_EQ(ggml_alloc_replay(g, 64), 128U);
}

}  // namespace
}  // namespace kvprof::engines
