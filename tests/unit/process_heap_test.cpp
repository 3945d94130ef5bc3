// dispose_before_exit (include/coopsim/base/process_heap.hpp): destroys at once unless the process
// ends after its command, and then keeps at most one object of a type waiting.
#include <catch2/catch.hpp>

#include <memory>

#include "coopsim/base/process_heap.hpp"

namespace process_heap_test {

using namespace coopsim;

namespace {

int g_alive = 0;

struct Counted {
  int id;
  explicit Counted(int i) : id(i) { ++g_alive; }
  Counted(Counted&& other) noexcept : id(other.id) { ++g_alive; }
  Counted(const Counted&) = delete;
  Counted& operator=(const Counted&) = delete;
  Counted& operator=(Counted&&) = delete;
  ~Counted() { --g_alive; }
};

}  // namespace

TEST_CASE("dispose_before_exit: destroys now unless the process ends after its command", "[base]") {
  REQUIRE_FALSE(ends_after_command());  // only main() sets it
  g_alive = 0;
  dispose_before_exit(std::make_unique<Counted>(1));
  CHECK(g_alive == 0);
  {
    const DisposedBeforeExit<Counted> held(Counted(2));
    CHECK(held.get().id == 2);
    CHECK(g_alive == 1);
  }
  CHECK(g_alive == 0);

  set_ends_after_command(true);
  dispose_before_exit(std::make_unique<Counted>(3));
  CHECK(g_alive == 1);  // left to the exit
  dispose_before_exit(std::make_unique<Counted>(4));
  CHECK(g_alive == 1);  // the one before went: at most one waits
  { const DisposedBeforeExit<Counted> held(Counted(5)); }
  CHECK(g_alive == 1);
  set_ends_after_command(false);
  dispose_before_exit(std::make_unique<Counted>(6));
  CHECK(g_alive == 1);  // destroyed at once again; the one waiting stays until the exit
}

}  // namespace process_heap_test
