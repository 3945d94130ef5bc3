// The torch a user's Python would import, for `--torch-snapshot-format auto`: the snapshot layout
// that torch's own viewer (torch.cuda._memory_viz) reads.
#pragma once

#include <string>

namespace coopsim::cli {

// The output of `PYTHON -c "import torch; print(torch.__version__)"`, where PYTHON is
// $COOPSIM_PYTHON, else python3 on PATH; "" when there is no such Python, it has no torch, or it
// does not answer within `timeout_ms` (it is then killed: the run never hangs on it).
std::string installed_torch_version(int timeout_ms = 60000);

// "1.13" for a torch 1.x, else "2.x" (torch 2.x, or no torch: pytorch.org/memory_viz reads 2.x).
std::string torch_snapshot_format_for(const std::string& torch_version);

}  // namespace coopsim::cli
