// The one list of built-in policies; its order is the order of `coopsim list` and of
// `--policy all`. Each policy lives in its own file (src/policy/<name>.cpp), which defines
// `<name>_policy_entry()` (name, help, parameters, factory); its line here declares that function
// and adds the entry. Adding a policy: one file plus one line here (and the file's name in
// src/policy/meson.build). No static self-registration: static libraries would drop it.
#include "coopsim/policy/registry.hpp"

namespace coopsim {

PolicyRegistry builtin_policies() {
  PolicyRegistry r;
  {
    extern PolicyRegistry::Entry keep_policy_entry();
    r.add(keep_policy_entry());
  }
  {
    extern PolicyRegistry::Entry coop_policy_entry();
    r.add(coop_policy_entry());
  }
  {
    extern PolicyRegistry::Entry dte_policy_entry();
    r.add(dte_policy_entry());
  }
  {
    extern PolicyRegistry::Entry dtr_policy_entry();
    r.add(dtr_policy_entry());
  }
  {
    extern PolicyRegistry::Entry autoswap_policy_entry();
    r.add(autoswap_policy_entry());
  }
  {
    extern PolicyRegistry::Entry vdnn_policy_entry();
    r.add(vdnn_policy_entry());
  }
  {
    extern PolicyRegistry::Entry pooch_policy_entry();
    r.add(pooch_policy_entry());
  }
  {
    extern PolicyRegistry::Entry capuchin_policy_entry();
    r.add(capuchin_policy_entry());
  }
  return r;
}

}  // namespace coopsim
