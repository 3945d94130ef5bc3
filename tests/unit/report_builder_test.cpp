// ReportBuilder: the derived figures it works out from what it is told (peaks, fragmentation,
// overhead ratios, memory ratios) on hand-worked numbers.
#include <catch2/catch.hpp>

#include <vector>

#include "coopsim/engine/report_builder.hpp"
#include "trace_builder.hpp"

using namespace coopsim;
using coopsim::test::TraceBuilder;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace report_builder_test {

namespace {

AllocatorStats stats(std::uint64_t allocated, std::uint64_t reserved, std::uint64_t requested) {
  AllocatorStats s;
  s.allocated = Bytes{allocated};
  s.reserved = Bytes{reserved};
  s.requested = Bytes{requested};
  s.footprint = Bytes{reserved};
  return s;
}

}  // namespace

TEST_CASE("report builder: identity and the budget as a fraction of the no-eviction peak", "[report]") {
  TraceBuilder b("toy");
  const auto x = b.tensor(300), y = b.tensor(500);
  b.alloc(x).alloc(y).free(x).free(y);
  ReportBuilder rb;
  rb.identify(b.trace(), "bestfit", "keep", Bytes{400}, nlohmann::ordered_json{{"budget", 400}});
  CHECK(rb.allocator_name() == "bestfit");
  const Report r = std::move(rb).take();
  CHECK(r.trace_path == "<builder>");
  CHECK(r.model == "toy");
  CHECK((r.allocator == "bestfit" && r.policy == "keep"));
  CHECK(r.budget == Bytes{400});
  CHECK(r.config.dump() == R"({"budget":400})");
  CHECK(r.trace_peak_live == Bytes{800});
  CHECK(r.memory_ratio_of_peak == 0.5);
  CHECK(!r.coopsim_version.empty());

  TraceBuilder empty;
  ReportBuilder none;
  none.identify(empty.trace(), "bestfit", "keep", Bytes{400}, {});
  CHECK(std::move(none).take().memory_ratio_of_peak == 0.0);  // no peak: no ratio
}

TEST_CASE("report builder: peaks, the allocated bytes at the reserved peak, fragmentation", "[report]") {
  ReportBuilder rb;
  rb.observed(stats(100, 400, 90));
  rb.observed(stats(300, 400, 250));  // same reserved peak: the larger allocated figure counts
  rb.observed(stats(200, 300, 200));
  rb.finished(stats(0, 300, 0), {}, std::nullopt, false);
  const Report r = std::move(rb).take();
  CHECK(r.memory.peak_allocated == Bytes{300});
  CHECK(r.memory.peak_reserved == Bytes{400});
  CHECK(r.memory.peak_requested == Bytes{250});
  CHECK(r.memory.peak_internal_waste == Bytes{50});
  CHECK(r.memory.allocated_at_reserved_peak == Bytes{300});
  CHECK(r.memory.reserved_fragmentation == 0.25);  // 1 - 300/400
  CHECK(r.memory.final_reserved == Bytes{300});
}

TEST_CASE("report builder: Coop's fragmentation is the mean free fraction when room was made", "[report]") {
  ReportBuilder rb;
  rb.allocated();                                            // at once: no sample
  rb.allocated_after_making_room(Bytes{1000}, Bytes{750});   // 0.25 free
  rb.allocated_after_making_room(Bytes{1000}, Bytes{1250});  // over the budget counts as 0 free
  rb.allocated_after_making_room(Bytes{0}, Bytes{0});        // no budget: 0
  rb.allocated_after_making_room(Bytes{1000}, Bytes{0});     // all free
  const Report r = std::move(rb).take();
  CHECK(r.counters.allocs == 5);
  CHECK(r.memory.coop_fragmentation_samples == 4);
  CHECK(r.memory.coop_fragmentation == Approx(0.3125));
}

TEST_CASE("report builder: overheads from the clocks, thrash and address points", "[report]") {
  ReportBuilder rb;
  rb.stalled(SimTime{20});
  rb.recomputed(SimTime{30});
  rb.recomputed(SimTime{10});
  CHECK(rb.delay() == SimTime{60});
  rb.thrashed_at(EventId{7}, 2, SimTime{80});
  rb.stopped(RunStatus::Thrashed);
  rb.address_checked(0x100, 0x100, EventId{1});
  rb.address_checked(0x200, 0x300, EventId{4});
  rb.address_checked(0x400, 0x500, EventId{9});  // only the first mismatch is kept
  rb.finished(stats(0, 0, 0), {SimTime{150}, SimTime{100}, SimTime{80}}, std::nullopt, false);
  const Report r = std::move(rb).take();
  CHECK(r.status == RunStatus::Thrashed);
  CHECK(r.time.recomputes == 2);
  CHECK(r.time.compute_overhead == 1.5);
  CHECK(r.time.recompute_overhead == 1.5);  // (80 + 40) / 80
  REQUIRE(r.thrash);
  CHECK((r.thrash->event == EventId{7} && r.thrash->iteration == 2));
  CHECK(r.thrash->recompute_time == SimTime{40});
  CHECK(r.thrash->op_time == SimTime{80});
  CHECK(r.addresses.checked == 3);
  CHECK(r.addresses.mismatches == 2);
  CHECK((r.addresses.first_mismatch_event == EventId{4} && r.addresses.first_expected == 0x200 &&
         r.addresses.first_got == 0x300));
  CHECK(!r.search_latency);

  ReportBuilder idle;  // no time at all: overheads are 1
  idle.finished(stats(0, 0, 0), {}, std::nullopt, true);
  const Report i = std::move(idle).take();
  CHECK((i.time.compute_overhead == 1.0 && i.time.recompute_overhead == 1.0));
  CHECK(i.search_latency == SimTime{0});
}

TEST_CASE("report builder: memory ratio of the sweep's largest budget", "[report]") {
  std::vector<Report> reports(3);
  reports[0].budget = Bytes{500};
  reports[1].budget = Bytes{2000};
  reports[2].budget = Bytes{1000};
  ReportBuilder::place_in_sweep(reports);
  CHECK(reports[0].memory_ratio_of_sweep_max == 0.25);
  CHECK(reports[1].memory_ratio_of_sweep_max == 1.0);
  CHECK(reports[2].memory_ratio_of_sweep_max == 0.5);

  std::vector<Report> zero(2);  // budgets of 0 bytes: each run is its own sweep
  ReportBuilder::place_in_sweep(zero);
  CHECK((zero[0].memory_ratio_of_sweep_max == 1.0 && zero[1].memory_ratio_of_sweep_max == 1.0));
  Report one;
  one.budget = Bytes{300};
  ReportBuilder::place_in_sweep(one, Bytes{1200});
  CHECK(one.memory_ratio_of_sweep_max == 0.25);
}

}  // namespace report_builder_test
