#include <cstdio>
#include <filesystem>
#include <fstream>

#include "coopsim/commands.hpp"
#include "coopsim/error.hpp"

namespace coopsim {

void write_file_atomic(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw Error(path + ": cannot write output file");
    f << content;
    f.flush();
    if (!f) {
      f.close();
      std::remove(tmp.c_str());
      throw Error(path + ": write failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw Error(path + ": cannot write output file (" + ec.message() + ")");
  }
}

}  // namespace coopsim
