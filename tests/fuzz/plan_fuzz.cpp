// libFuzzer harness: the plan loader (parse_plan) and the plan checker. A plan that parses must
// print (plan_to_text) to text that parses back to the same plan.
#include "coopsim/replay/replay_plan.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace coopsim;
  const std::string text(reinterpret_cast<const char*>(data), size);
  gpu::Plan plan;
  try {
    plan = gpu::parse_plan(text, "fuzz.plan.json", fuzz::fuzz_limits());
  } catch (const Error& e) {
    fuzz::check_message(e);
    return 0;
  }
  gpu::Plan back;
  try {
    back = gpu::parse_plan(gpu::plan_to_text(plan), "fuzz.plan.json");
  } catch (const Error& e) {
    fuzz::die("a printed plan does not parse", e.what());
  }
  fuzz::require(back == plan, "plan round trip changed the plan");
  try {
    gpu::check_plan(plan, "fuzz.plan.json");
  } catch (const Error& e) {
    fuzz::check_message(e);
  }
  return 0;
}
