// write_file_atomic (coopsim/base/output_file.hpp): one whole file through an OutputFile.
#include "coopsim/base/output_file.hpp"

namespace coopsim {

void write_file_atomic(const std::string& path, const std::string& content, OutputFile::Target target) {
  OutputFile f(path, target);
  f.write(content);
  f.commit();
}

}  // namespace coopsim
