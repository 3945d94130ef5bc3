// Plan checker and export refusals: corrupted plans (a read after a swap-out without its
// swap-in, a missing dependency, overlap, budget, arena, frees, versions) are rejected with the
// step named; runs that cannot be replayed on one arena are refused at export.
#include <catch2/catch.hpp>

#include <fstream>

#include "coopsim/base/error.hpp"
#include "coopsim/replay/replay_plan.hpp"
#include "plan_scenarios.hpp"
#include "test_paths.hpp"

using namespace coopsim;
using namespace coopsim::gpu;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace plan_check_test {

namespace {

// The message of the Error `f` throws, or "no error".
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

std::string check_error(const Plan& p) {
  return error_of([&] { check_plan(p, "t.plan.json"); });
}

std::string export_error(const test::LogScenario& s) {
  return error_of([&] { (void)test::plan_of(s); });
}

}  // namespace

TEST_CASE("plan checker: a read after a swap-out without its swap-in is rejected with the step named") {
  // Without the swap-in and its allocation, h reads w where no block is any more.
  const Plan p = test::plan_of(test::swap_scenario({test::kSwapInAlloc, test::kSwapIn}));
  CHECK(check_error(p) ==
        "t.plan.json: steps[10] (op 2 'h'): reads tensor 0 'w' at offset 0, but no block is allocated there: it was "
        "swapped out at steps[7] and not swapped in since");
  // Through a file, as replay-gpu loads it.
  const auto dir = test::scratch_dir("plan-corrupt");
  const std::string path = (dir / "corrupt.plan.json").string();
  std::ofstream(path) << plan_to_text(p);
  CHECK_THROWS_WITH(load_plan(path), path +
                                         ": steps[10] (op 2 'h'): reads tensor 0 'w' at offset 0, but no block is "
                                         "allocated there: it was swapped out at steps[7] and not swapped in since");
  CHECK_NOTHROW(load_plan(path, /*check=*/false));
  // Without the swap-in only, the block is there but holds nothing.
  CHECK(check_error(test::plan_of(test::swap_scenario({test::kSwapIn}))) ==
        "t.plan.json: steps[11] (op 2 'h'): reads tensor 0 'w' version 0 at offset 0, but the block holds nothing yet "
        "(allocated at steps[10] and not written since)");
}

TEST_CASE("plan checker: conflicting steps on different streams need a dependency") {
  Plan p = test::plan_of(test::swap_scenario());
  p.steps[11].after.clear();
  CHECK(check_error(p) ==
        "t.plan.json: steps[11] (swap_in of tensor 0 'w'): reads the host copy of tensor 0 'w' that steps[7] "
        "(swap_out of tensor 0 'w') on stream d2h also uses, but nothing orders this step after it (it needs 7 in its "
        "after list)");
  p.steps[11].after = {StepId{7}};
  CHECK(check_error(p) ==
        "t.plan.json: steps[11] (swap_in of tensor 0 'w'): writes arena bytes [0, 1024) that steps[10] (alloc of "
        "tensor 0 'w') on stream compute also uses, but nothing orders this step after it (it needs 10 in its after "
        "list)");
  Plan q = test::plan_of(test::swap_scenario());
  q.steps[12].after.clear();  // h would read w before the copy lands
  CHECK(check_error(q) ==
        "t.plan.json: steps[12] (op 2 'h'): reads arena bytes [0, 1024) that steps[11] (swap_in of tensor 0 'w') on "
        "stream h2d also uses, but nothing orders this step after it (it needs 11 in its after list)");
  Plan r = test::plan_of(test::swap_scenario());
  r.steps[10].after.clear();  // w's new block would be written while the swap-out still reads it
  CHECK(check_error(r) ==
        "t.plan.json: steps[10] (alloc of tensor 0 'w'): writes arena bytes [0, 1024) that steps[7] (swap_out of "
        "tensor 0 'w') on stream d2h also uses, but nothing orders this step after it (it needs 7 in its after list)");
}

TEST_CASE("plan checker: arena, budget, overlap, frees and versions") {
  const Plan good = test::plan_of(test::swap_scenario());
  Plan p = good;
  p.steps[5].block.offset = 0;  // z on top of w
  CHECK(check_error(p) ==
        "t.plan.json: steps[5] (alloc of tensor 3 'z'): block [0, 1024) of tensor 3 'z' overlaps "
        "the live block [0, 1024) of tensor 0 'w' (allocated at steps[0])");
  p = good;
  p.header.budget = Bytes{2048};
  CHECK(check_error(p) ==
        "t.plan.json: steps[2] (alloc of tensor 2 'y'): live blocks would hold 3072 bytes, over the "
        "budget of 2048");
  p = good;
  p.header.arena_size = Bytes{2048};
  CHECK(check_error(p) ==
        "t.plan.json: steps[2] (alloc of tensor 2 'y'): block [2048, 3072) is outside the arena of "
        "2048 bytes");
  p = good;
  p.steps[4].block.size = Bytes{512};
  CHECK(check_error(p) ==
        "t.plan.json: steps[4] (free of tensor 1 'x'): frees tensor 1 'x' at offset 1024 as 512 "
        "bytes, but its block has 1024 bytes");
  p = good;
  p.steps[9].block.tensor = TensorId{3};
  CHECK(check_error(p) ==
        "t.plan.json: steps[9] (free of tensor 3 'z'): frees tensor 3 'z' at offset 2048, but the "
        "block there belongs to tensor 2 'y' (allocated at steps[2])");
  p = good;
  p.steps[11].block.version = 1;
  CHECK(check_error(p) ==
        "t.plan.json: steps[11] (swap_in of tensor 0 'w'): swaps in tensor 0 'w' version 1, but the "
        "host copy holds version 0");
  p = good;
  p.steps[6].reads[0].version = 2;
  CHECK(check_error(p) ==
        "t.plan.json: steps[6] (op 1 'g'): reads tensor 2 'y' version 2 at offset 2048, but the "
        "block holds version 1");
  p = good;
  p.steps[0].fill = false;  // f would read w's version 0 that nobody wrote
  CHECK(check_error(p) ==
        "t.plan.json: steps[3] (op 0 'f'): reads tensor 0 'w' version 0 at offset 0, but the block "
        "holds nothing yet (allocated at steps[0] and not written since)");
}

TEST_CASE("plan checker: a recompute restores an evicted value; without it the access is rejected") {
  CHECK(check_error(test::plan_of(test::remat_scenario())) == "no error");
  CHECK(check_error(test::plan_of(test::remat_scenario(/*drop_recompute=*/true))) ==
        "t.plan.json: steps[6] (access of tensor 1 'y'): accesses tensor 1 'y' version 1 at offset 3072, but the block "
        "holds nothing yet (allocated at steps[5] and not written since)");
  Plan p = test::plan_of(test::remat_scenario());
  p.steps[4] = p.steps[3];  // read y after its eviction instead of freeing it
  p.steps[4].kind = StepKind::Access;
  CHECK(check_error(p) ==
        "t.plan.json: steps[4] (access of tensor 1 'y'): accesses tensor 1 'y' version 1 at offset "
        "2048, but it was evicted at steps[3]");
}

TEST_CASE("plan export: runs that cannot be replayed on one arena are refused") {
  auto s = test::swap_scenario();
  s.report.status = RunStatus::OutOfMemory;
  CHECK(export_error(s) == "--plan: the run ended in oom: only a completed run has a plan to replay");
  s = test::swap_scenario();
  s.log.address_aware = false;
  s.report.allocator = "fungible";
  CHECK(export_error(s) ==
        "--plan: allocator fungible does not place blocks at addresses; a plan needs an "
        "address-aware allocator such as bestfit");
  // Device addresses of a caching allocator: offsets count from the lowest address.
  s = test::swap_scenario();
  constexpr std::uint64_t kBase = 0x7f0000000000ULL;
  for (auto& r : s.log.refs) r.addr += kBase;
  s.report.allocator = "cnmem";
  const Plan p = test::plan_of(s);
  CHECK(p.header.address_base == kBase);
  CHECK(p.steps[12].reads[1].offset == 0);
  CHECK(check_error(p) == "no error");
  // A block beyond one budget's arena from the lowest address.
  s.log.refs[s.log.records[5].first].addr = kBase + 4096;
  CHECK(export_error(s) ==
        "--plan: allocator cnmem placed tensor 3 at addresses [0x7f0000001000, 0x7f0000001400), "
        "beyond one arena of the budget (3072 bytes) from 0x7f0000000000; a plan needs blocks that "
        "fit one arena (e.g. --allocator bestfit)");
}

TEST_CASE("plan checker: the GPU suite's in-place scenario is sound, and its wrong read is rejected") {
  // tests/gpu replays both: the device must agree with the checker on the same plans.
  CHECK(check_error(test::plan_of(test::in_place_scenario(40))) == "no error");
  const std::string bad = check_error(test::plan_of(test::in_place_scenario(40, 17)));
  CHECK(bad.find("t.plan.json") != std::string::npos);
  CHECK(bad.find("version") != std::string::npos);
}

}  // namespace plan_check_test
