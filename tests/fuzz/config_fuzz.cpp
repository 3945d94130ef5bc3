// libFuzzer harness: the config loader. The input is a config file for load_config +
// check_config; a first line starting with "--set " is applied as an override after loading
// (the rest of the input is the file), so that apply_override is fuzzed as well.
#include "coopsim/base/limits.hpp"
#include "coopsim/sim/simulation.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace coopsim;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string override_text;
  if (text.substr(0, 6) == "--set ") {
    const auto nl = text.find('\n');
    override_text = std::string(text.substr(6, nl == std::string_view::npos ? text.npos : nl - 6));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
  }
  const std::string path =
      fuzz::write_temp("config.json", reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
  try {
    SimConfig cfg = load_config(path);
    if (!override_text.empty()) apply_override(cfg, override_text);
    check_config(cfg);
    (void)config_limits(cfg);
  } catch (const Error& e) {
    fuzz::check_message(e);
  }
  return 0;
}
