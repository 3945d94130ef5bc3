// coopsim._native, the package's native module: the library's command line called in-process
// (include/coopsim/cli/command_line.hpp), so that coopsim.run / sweep / minbudget / advise /
// validate run the simulator without spawning a process and answer exactly as the executable
// does (same arguments, same one-line errors, same exit statuses); and the public API
// (coopsim/coopsim.hpp) for the recorder's traces. Built by python/meson.build.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sstream>
#include <string>
#include <vector>

#include "coopsim/cli/command_line.hpp"
#include "coopsim/coopsim.hpp"
#include "coopsim_config.h"

namespace py = pybind11;

PYBIND11_MODULE(_native, m) {
  m.doc() = "coopsim's library, in-process: command_line(args) -> (status, stdout, stderr); write_trace(text, path, name)";
  m.attr("__version__") = COOPSIM_VERSION;
  m.def(
      "command_line",
      [](const std::vector<std::string>& args) {
        std::vector<const char*> argv{"coopsim"};
        for (const std::string& a : args) argv.push_back(a.c_str());
        std::ostringstream out, err;
        int status = 0;
        {
          // Simulations take seconds: other Python threads run meanwhile.
          py::gil_scoped_release release;
          status = coopsim::run_command_line(static_cast<int>(argv.size()), argv.data(), out, err);
        }
        // Bytes: the caller decodes (a quoted input excerpt need not be UTF-8).
        return py::make_tuple(status, py::bytes(out.str()), py::bytes(err.str()));
      },
      py::arg("args"),
      "Runs `coopsim ARGS...` in this process; returns (exit status, stdout bytes, stderr bytes).");
  // The recorder's one way to write a trace: its records, checked by the library's loader and
  // written by the library's writer (so Python and C++ never disagree on the format).
  m.def(
      "write_trace",
      [](const py::bytes& text, const std::string& path, const std::string& name) {
        std::string records = text;
        try {
          py::gil_scoped_release release;
          coopsim::api::Trace::parse(records, name).write(path);
          return std::string();
        } catch (const coopsim::api::Error& e) {
          return std::string(e.what());
        }
      },
      py::arg("text"), py::arg("path"), py::arg("name"),
      "Checks trace v1 text (JSON lines) and writes it to PATH (gzip when it ends in .gz); returns '' "
      "or coopsim's one-line error.");
}
