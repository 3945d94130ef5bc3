// coop.compat=oneflow and bestfit's small-piece area, hand-worked from OneFlow's rules
// (Oneflow-Inc/oneflow @25c8978c1c, oneflow/core/vm/remat/allocator.cpp; docs/models/coop.md,
// "compat=oneflow"): which ops are expensive, where parameters go, the small-piece area's
// placement and that eviction never serves it, and OOM without a per-tensor fallback.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "alloc/bestfit.hpp"
#include "alloc_steps.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/engine/engine.hpp"
#include "policy/coop.hpp"
#include "remat_steps.hpp"
#include "trace_builder.hpp"

using namespace coopsim;
using coopsim::test::must_alloc;
using coopsim::test::must_free;
using coopsim::test::TraceBuilder;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace coop_oneflow_test {

namespace {

constexpr std::uint64_t kMiB = 1ULL << 20;

EngineOptions options(std::uint64_t budget) { return test::checked_options(budget); }
std::unique_ptr<Policy> coop(const nlohmann::json& params) { return test::coop_policy(params); }

std::unique_ptr<Allocator> bestfit(const nlohmann::json& params, std::uint64_t capacity) {
  return BestFitAllocator::create(Params("bestfit", params, BestFitAllocator::param_docs()), Bytes{capacity});
}

struct R {
  std::uint64_t addr, size;
  bool free;
  std::uint64_t segment;
  friend bool operator==(const R&, const R&) = default;
};

std::vector<R> layout(const Allocator& a) {
  std::vector<R> out;
  for (const auto& r : a.ranges()) out.push_back(R{r.addr, r.size.value, r.free, r.segment});
  return out;
}

}  // namespace

TEST_CASE("oneflow: the expensive ops are OneFlow's six and the ATen ops it runs as them", "[coop][oneflow]") {
  for (const char* name : {"conv2d", "conv_data_grad", "conv_filter_grad", "add_n", "matmul", "batch_matmul",
                           "aten::convolution", "aten::convolution_backward", "aten::mm", "aten::bmm.out"}) {
    CHECK(CoopPolicy::oneflow_expensive_op_name(name));
  }
  // A Linear with bias is OneFlow's fused_matmul_bias, cheap there; coopsim's default counts it.
  for (const char* name : {"aten::addmm", "aten::baddbmm", "aten::linear", "aten::add.Tensor", "aten::relu_"}) {
    CHECK_FALSE(CoopPolicy::oneflow_expensive_op_name(name));
  }
  CHECK(CoopPolicy::expensive_op_name("aten::addmm"));
  CHECK_THROWS_WITH(coop({{"compat", "oneflow"}, {"partition", "cost-density"}}),
                    "coop.partition: compat=oneflow classifies tensors by OneFlow's op names (op-name)");
}

TEST_CASE("oneflow: parameters and cheap outputs take the high end, expensive outputs the low end",
          "[coop][oneflow]") {
  // bestfit arena 4 MiB, 1 MiB tensors. OneFlow (group_num 2): the parameter P (made by an
  // initializer or a copy, cheap) takes the high end [3, 4); the convolution output the low end
  // of the hole [0, 3) -> 0; the addmm output (fused_matmul_bias, cheap) the high end of [1, 3)
  // -> 2 MiB; the mm output (matmul, expensive) the low end of [1, 2) -> 1 MiB. coopsim's default
  // puts P at 0, the convolution at 1, addmm (expensive there) at 2, mm at 3. Address 0 cannot be
  // recorded (it means "none"), so P, addmm and mm are checked: the default misses P and mm.
  TraceBuilder b;
  const auto p = b.tensor(kMiB, TensorRole::Parameter), conv = b.tensor(kMiB), lin = b.tensor(kMiB),
             mm = b.tensor(kMiB);
  b.alloc(p);
  b.alloc(conv).compute(b.op("aten::convolution", 5, {p}, {conv}));
  b.alloc(lin).compute(b.op("aten::addmm", 5, {conv, p}, {lin}));
  b.alloc(mm).compute(b.op("aten::mm", 5, {lin, p}, {mm}));
  auto& ev = b.mutable_trace().events;
  ev[0].addr = 3 * kMiB;
  ev[3].addr = 2 * kMiB;
  ev[5].addr = kMiB;
  for (const bool compat : {true, false}) {
    auto policy = coop({{"compat", compat ? "oneflow" : "none"}});
    BestFitAllocator a(Bytes{4 * kMiB});
    Report r;
    run_engine(b.trace(), a, *policy, options(4 * kMiB), r);
    CHECK(r.status == RunStatus::Completed);
    CHECK(r.addresses.checked == 3);
    CHECK(r.addresses.mismatches == (compat ? 0U : 2U));
  }
}

TEST_CASE("bestfit small-piece area: small requests there only, low end, best fit", "[bestfit][oneflow]") {
  // Arena 8192 B at 512 B alignment; the top 2048 B are the small-piece area for rounded
  // requests <= 1024 B: normal pieces tile [0, 6144), small ones [6144, 8192) (segment 1).
  auto a = bestfit({{"small_area", 2048}, {"small_threshold", 1024}}, 8192);
  CHECK(layout(*a) == std::vector<R>{{0, 6144, true, 0}, {6144, 2048, true, 1}});
  CHECK(a->reclaimable_end() == 6144);
  std::vector<std::uint64_t> starts;
  a->segment_starts(starts);
  CHECK(starts == std::vector<std::uint64_t>{0, 6144});
  // 600 B -> 1024: the small area's low end, even when asked for the high end.
  const Block s1 = must_alloc(*a, AllocRequest{Bytes{600}, 0, TensorId{1}, true});
  CHECK(s1.addr == 6144);
  CHECK(s1.size.value == 1024);
  // 1100 B -> 1536 > 1024: the normal area, high end when asked (6144 - 1536).
  const Block n1 = must_alloc(*a, AllocRequest{Bytes{1100}, 0, TensorId{2}, true});
  CHECK(n1.addr == 4608);
  const Block s2 = must_alloc(*a, AllocRequest{Bytes{1000}, 0, TensorId{3}, false});
  CHECK(s2.addr == 7168);
  // The small area is full: a 1-byte request fails although the normal area has 4608 B free.
  CHECK_FALSE(a->allocate(AllocRequest{Bytes{1}, 0, TensorId{4}, false}).has_value());
  a->check_invariants();
  CHECK(a->stats().allocated.value == 1024 + 1536 + 1024);
  CHECK(a->stats().footprint.value == 8192);
  // Freed small pieces coalesce inside the area, and best fit places the next one there.
  must_free(*a, s1);
  const Block s3 = must_alloc(*a, AllocRequest{Bytes{512}, 0, TensorId{5}, false});
  CHECK(s3.addr == 6144);
  CHECK(layout(*a) == std::vector<R>{{0, 4608, true, 0},
                                     {4608, 1536, false, 0},
                                     {6144, 512, false, 1},
                                     {6656, 512, true, 1},
                                     {7168, 1024, false, 1}});
  must_free(*a, s2);
  must_free(*a, s3);
  must_free(*a, n1);
  CHECK(layout(*a) == std::vector<R>{{0, 6144, true, 0}, {6144, 2048, true, 1}});
  CHECK(a->stats().footprint.value == 0);
  a->check_invariants();
}

TEST_CASE("bestfit small-piece area: off by default, and refused when it does not fit", "[bestfit][oneflow]") {
  auto plain = bestfit({}, 8192);
  CHECK(plain->reclaimable_end() == Allocator::kEveryAddress);
  CHECK_THROWS_WITH(bestfit({{"small_area", 1000}}, 8192),
                    "bestfit.small_area: must be a multiple of alignment (512 B)");
  CHECK_THROWS_WITH(bestfit({{"small_area", 8192}}, 8192),
                    "bestfit.small_area: 8192 B leaves no room below it in an arena of 8192 B");
}

TEST_CASE("oneflow: eviction never serves the small-piece area, and no window means OOM", "[coop][oneflow]") {
  // Arena 5120 B: normal [0, 4096), small-piece area [4096, 5120) for requests <= 512 B.
  // I (1024, an input: unevictable) at 0, A (2048, relu of I) at 1024; s1 and s2 (512 each) fill
  // the small area. s3 (512) finds it full. The window search walks the normal area only and
  // finds the free [3072, 4096) with nothing to evict. OneFlow then fails the allocation
  // (EvictAndFindPieceOnce has no per-tensor fallback): OOM with no eviction. coopsim's default
  // falls back to the per-tensor loop, which may take A (the small area's tensors are never
  // candidates) before it runs out of candidates too: OOM after one eviction.
  TraceBuilder b;
  const auto in = b.tensor(1024, TensorRole::Input), act = b.tensor(2048), s1 = b.tensor(512), s2 = b.tensor(512),
             s3 = b.tensor(512);
  b.alloc(in);
  b.alloc(act).compute(b.op("aten::relu", 10, {in}, {act}));
  b.alloc(s1).compute(b.op("aten::sum", 10, {act}, {s1}));
  b.alloc(s2).compute(b.op("aten::mean", 10, {act}, {s2}));
  b.alloc(s3).compute(b.op("aten::add", 10, {s1, s2}, {s3}));
  for (const bool compat : {true, false}) {
    auto policy = coop({{"compat", compat ? "oneflow" : "none"}});
    BestFitAllocator a(Bytes{5120}, BestFitOptions{512, 1024, 512});
    Report r;
    run_engine(b.trace(), a, *policy, options(5120), r);
    CHECK(r.status == RunStatus::OutOfMemory);
    CHECK(r.counters.forced_evictions == (compat ? 0U : 1U));
  }
}

}  // namespace coop_oneflow_test
