// The one list of importers (include/coopsim/import/registry.hpp). Each importer's file defines
// `<name>_importer_entry()`; its line here declares that function and adds the entry. Adding an
// importer: one file plus one line here (and the file's name in src/import/meson.build).
#include "coopsim/import/registry.hpp"

namespace coopsim {

ImporterRegistry builtin_importers() {
  ImporterRegistry r;
  {
    extern ImporterEntry dtr_importer_entry();
    r.add(dtr_importer_entry());
  }
  {
    extern ImporterEntry torch_snapshot_importer_entry();
    r.add(torch_snapshot_importer_entry());
  }
  {
    extern ImporterEntry kineto_importer_entry();
    r.add(kineto_importer_entry());
  }
  return r;
}

}  // namespace coopsim
