#include "coopsim/policy.hpp"

namespace coopsim {

std::string_view to_string(Residency r) {
  switch (r) {
    case Residency::NotAllocated: return "not_allocated";
    case Residency::Resident: return "resident";
    case Residency::SwappingOut: return "swapping_out";
    case Residency::SwappedOut: return "swapped_out";
    case Residency::SwappingIn: return "swapping_in";
  }
  return "?";
}

}  // namespace coopsim
