// The OOM explanation (memory_viz's segsum view) and PyTorch's names for the peaks, on a
// hand-worked PyTorch caching allocator sequence (docs/models/pytorch-caching-allocator.md rules: requests of
// 10 MiB and more get a segment of their size rounded to 2 MiB; a cached block is split when
// more than 1 MiB would remain; a split segment cannot be given back).
#include <catch2/catch.hpp>

#include <sstream>

#include "coopsim/alloc/pytorch.hpp"
#include "coopsim/engine/engine.hpp"
#include "coopsim/output/oom_verdict.hpp"
#include "coopsim/output/report_writers.hpp"
#include "coopsim/policy/keep.hpp"
#include "trace_builder.hpp"

using namespace coopsim;
using coopsim::test::TraceBuilder;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace oom_explain_test {

namespace {
constexpr std::uint64_t MiB = 1ULL << 20;
}

TEST_CASE("an OOM is explained: fragmentation, pools and the largest holders", "[oom][report]") {
  TraceBuilder b;
  const auto w = b.tensor(16 * MiB, TensorRole::Parameter, "w");
  const auto x = b.tensor(16 * MiB, TensorRole::Activation, "x");
  const auto y = b.tensor(12 * MiB, TensorRole::Activation, "y");
  const auto z = b.tensor(30 * MiB, TensorRole::Activation, "z");
  const auto mk_y = b.op("make_y", 10, {w}, {y});
  const auto mk_z = b.op("make_z", 10, {y}, {z});
  // w: segment 1 (16 MiB); x: segment 2 (16 MiB), freed (cached whole); y: x's cached block,
  // split into 12 MiB + 4 MiB free; z (30 MiB): 32 MiB reserved + 30 > 60 MiB, nothing can be
  // released (segment 2 is split): OOM after one release-and-retry.
  b.alloc(w).alloc(x).free(x).alloc(y).compute(mk_y).alloc(z).compute(mk_z);
  PyTorchCachingAllocator alloc(Bytes{60 * MiB});
  KeepPolicy keep;
  EngineOptions o;
  o.budget = Bytes{60 * MiB};
  o.paranoid = true;
  Report r;
  run_engine(b.trace(), alloc, keep, o, r);
  REQUIRE(r.status == RunStatus::OutOfMemory);
  REQUIRE(r.oom);
  const OomSegsum& s = r.oom->segsum;
  CHECK(r.oom->requested == Bytes{30 * MiB});
  CHECK(r.oom->reserved == Bytes{32 * MiB});
  CHECK(r.oom->allocated == Bytes{28 * MiB});
  CHECK(s.requested_live == Bytes{28 * MiB});
  CHECK(s.internal_fragmentation == Bytes{0});
  CHECK(s.cached_free == Bytes{4 * MiB});
  CHECK(s.inactive_split == Bytes{4 * MiB});
  REQUIRE(s.pools.size() == 1);
  CHECK(s.pools[0].pool == "large");
  CHECK(s.pools[0].segments == 2);
  CHECK(s.pools[0].reserved == Bytes{32 * MiB});
  CHECK(s.pools[0].allocated == Bytes{28 * MiB});
  CHECK(s.pools[0].largest_free == Bytes{4 * MiB});
  REQUIRE(s.holders.size() == 2);
  CHECK(s.holders[0].name == "w");
  CHECK(s.holders[0].role == "parameter");
  CHECK(s.holders[0].op_name.empty());
  CHECK(s.holders[0].size == Bytes{16 * MiB});
  CHECK(s.holders[1].name == "y");
  CHECK(s.holders[1].op_name == "make_y");
  CHECK(s.holders[1].size == Bytes{12 * MiB});
  // PyTorch's names: one release-and-retry (num_alloc_retries), one failed malloc (num_ooms).
  CHECK(r.counters.alloc_retries == 1);
  CHECK(r.counters.ooms == 1);
  const auto j = to_json(r);
  CHECK(j["pytorch_memory_stats"]["max_memory_allocated"] == 32 * MiB);  // w and x, before x is freed
  CHECK(j["pytorch_memory_stats"]["max_memory_reserved"] == 32 * MiB);
  CHECK(j["pytorch_memory_stats"]["num_alloc_retries"] == 1);
  CHECK(j["pytorch_memory_stats"]["num_ooms"] == 1);
  CHECK(j["oom"]["segsum"]["inactive_split_bytes"] == 4 * MiB);
  CHECK(j["oom"]["segsum"]["largest_holders"][1]["op_name"] == "make_y");
  // The verdict: 60 - 28 = 32 MiB free >= 30 MiB requested, yet no block of 30 MiB: fragmentation.
  r.budget = o.budget;  // the simulation layer fills it in a run
  const OomVerdict v = oom_verdict(*r.oom, r.budget);
  CHECK(v.kind == OomVerdict::Kind::Fragmentation);
  CHECK(v.free == Bytes{32 * MiB});
  CHECK(v.line ==
        "fragmentation OOM: 32.00 MiB free (4.00 MiB cached in segments, 28.00 MiB not reserved), but no free block "
        "of 30.00 MiB (largest 4.00 MiB)");
  const auto jv = to_json(r)["oom"]["verdict"];
  CHECK(jv["kind"] == "fragmentation");
  CHECK(jv["free_bytes"] == 32 * MiB);
}

TEST_CASE("an OOM verdict: capacity, with the bytes short", "[oom][report]") {
  TraceBuilder b;
  const auto w = b.tensor(16 * MiB, TensorRole::Parameter, "w");
  const auto z = b.tensor(50 * MiB, TensorRole::Activation, "z");
  const auto mk_z = b.op("make_z", 10, {w}, {z});
  b.alloc(w).alloc(z).compute(mk_z);  // 16 + 50 > 60: 6 MiB short
  PyTorchCachingAllocator alloc(Bytes{60 * MiB});
  KeepPolicy keep;
  EngineOptions o;
  o.budget = Bytes{60 * MiB};
  Report r;
  run_engine(b.trace(), alloc, keep, o, r);
  REQUIRE(r.oom);
  r.budget = o.budget;
  const OomVerdict v = oom_verdict(*r.oom, r.budget);
  CHECK(v.kind == OomVerdict::Kind::Capacity);
  CHECK(v.short_by == Bytes{6 * MiB});
  CHECK(v.line == "capacity OOM: 6.00 MiB short (16.00 MiB live + 50.00 MiB requested > budget 60.00 MiB)");
  std::ostringstream text;
  write_text(text, r);
  CHECK(text.str().find("  oom verdict                    capacity OOM: 6.00 MiB short") != std::string::npos);
  CHECK(to_json(r)["oom"]["verdict"]["short_bytes"] == 6 * MiB);
}

}  // namespace oom_explain_test
