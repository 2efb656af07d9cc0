// Building a preset allocates a fixed number of blocks, whatever its length:
// nothing per op (names fit std::string's inline buffer, short lists sit in
// the op, attributes left at their defaults hold nothing, the ops' array is
// reserved once). Counted with a replaced global operator new, which is why
// this is a program of its own.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "core/model/model.h"
#include "core/model/presets.h"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

long allocations_to_build(const std::string& spec) {
  const long before = g_allocations.load();
  const remat::Model m = remat::make_preset(spec);
  const long after = g_allocations.load();
  EXPECT_GT(m.size(), 2);
  return after - before;
}

}  // namespace

// Specs of the same length: the spec's text goes into a few messages' context
// strings, whose capacity depends on it.
TEST(ModelAllocations, AChainAllocatesTheSameBlocksAtAnyLength) {
  const long small = allocations_to_build("chain:10000");
  EXPECT_GT(small, 0);  // the counter sees the model's arrays
  EXPECT_EQ(allocations_to_build("chain:90000"), small);
}

TEST(ModelAllocations, AnMlpAllocatesTheSameBlocksAtAnyDepth) {
  // Names such as "l123.relu" are built per op, inside std::string's buffer.
  const long small = allocations_to_build("mlp:100:8:2");
  EXPECT_EQ(allocations_to_build("mlp:900:8:2"), small);
}
