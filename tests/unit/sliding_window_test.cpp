// Hand-worked cases for Coop's sliding-window search (rules in sliding_window.hpp).
#include <catch2/catch.hpp>

#include "policy/remat/sliding_window.hpp"

using namespace coopsim;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace sliding_window_test {

namespace {
WindowPiece freep(std::uint64_t size) { return {Bytes{size}, false, 0.0}; }
WindowPiece tensor(std::uint64_t size, double cost) { return {Bytes{size}, false, cost}; }
WindowPiece pinned(std::uint64_t size) { return {Bytes{size}, true, 0.0}; }
}  // namespace

TEST_CASE("window: the cheapest contiguous range that is large enough wins", "[window]") {
  // [A 100 c5][free 50][B 100 c1][C 100 c9][free 200]
  const std::vector<WindowPiece> p{tensor(100, 5), freep(50), tensor(100, 1), tensor(100, 9), freep(200)};
  // Need 250: candidate windows and costs: [A,f,B]=250 c6; [f,B,C]=250 c10; [B,C,f]=400 c10;
  // [C,f]=300 c9; [f] alone 200 < 250. Best: [A,f,B] cost 6 = pieces [0,3).
  auto w = find_min_cost_window(p, Bytes{250});
  REQUIRE(w);
  CHECK(w->first == 0);
  CHECK(w->last == 3);
  CHECK(w->cost == 6.0);
  CHECK(w->bytes.value == 250);
  // Need 200: the free 200-byte piece alone would cost 0, but the scan ends when the right edge
  // passes the last piece while the window is [C, free] (300 B, cost 9): it never shrinks to
  // [free]. The best stays [A, f, B] (cost 6) — the upstream scan's behaviour.
  w = find_min_cost_window(p, Bytes{200});
  REQUIRE(w);
  CHECK(w->first == 0);
  CHECK(w->last == 3);
  CHECK(w->cost == 6.0);
  // With the free piece first in address order it is found at once.
  const std::vector<WindowPiece> q{freep(200), tensor(100, 5)};
  w = find_min_cost_window(q, Bytes{200});
  REQUIRE(w);
  CHECK(w->first == 0);
  CHECK(w->last == 1);
  CHECK(w->cost == 0.0);
}

TEST_CASE("window: barriers split the arena and no window spans them", "[window]") {
  // [A 100 c1][P pinned 10][B 100 c2][C 100 c2]: 200 bytes must come from B+C (cost 4),
  // although A+B would be cheaper without the barrier.
  const std::vector<WindowPiece> p{tensor(100, 1), pinned(10), tensor(100, 2), tensor(100, 2)};
  auto w = find_min_cost_window(p, Bytes{200});
  REQUIRE(w);
  CHECK(w->first == 2);
  CHECK(w->last == 4);
  CHECK(w->cost == 4.0);
  CHECK_FALSE(find_min_cost_window(p, Bytes{201}));
}

TEST_CASE("window: ties go to the first window, keeping zero-cost pieces on the left", "[window]") {
  // [free 50][A 100 c3][B 100 c3]: need 100. Windows found in order: [f,A] (150, c3) — then
  // shrinking gives [A] (100, c3): not strictly cheaper, so [f,A] stays; [B] also c3.
  const std::vector<WindowPiece> p{freep(50), tensor(100, 3), tensor(100, 3)};
  auto w = find_min_cost_window(p, Bytes{100});
  REQUIRE(w);
  CHECK(w->first == 0);
  CHECK(w->last == 2);
  CHECK(w->bytes.value == 150);
}

TEST_CASE("window: the scan stops when the right edge passes the last piece", "[window]") {
  // [A 100 c9][B 100 c1], need 100: [A] c9 is found, then [A,B] (grow? no: A already fits,
  // so the window drops A -> empty, grows to [B] c1). Best [1,2).
  const std::vector<WindowPiece> p{tensor(100, 9), tensor(100, 1)};
  auto w = find_min_cost_window(p, Bytes{100});
  REQUIRE(w);
  CHECK(w->first == 1);
  CHECK(w->cost == 1.0);
  // [A 60 c1][B 60 c5], need 60: [A] c1 first; then shrink to empty, grow [B] c5: worse.
  const std::vector<WindowPiece> q{tensor(60, 1), tensor(60, 5)};
  w = find_min_cost_window(q, Bytes{60});
  REQUIRE(w);
  CHECK(w->first == 0);
  WindowSearchStats stats;
  (void)find_min_cost_window(q, Bytes{60}, &stats);
  CHECK(stats.pieces_examined == 2);
}

TEST_CASE("window: nothing large enough, or an empty arena, gives no window", "[window]") {
  CHECK_FALSE(find_min_cost_window({}, Bytes{1}));
  const std::vector<WindowPiece> p{freep(10), pinned(100), freep(10)};
  CHECK_FALSE(find_min_cost_window(p, Bytes{11}));
}

}  // namespace sliding_window_test
