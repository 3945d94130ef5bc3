// Importers: convert traces recorded by other tools into coopsim traces (v1, in memory).
// Each throws InputError("file:line: problem") (or, for binary inputs, "file:offset N: problem")
// on malformed input and never executes anything found in the input. `limits` caps the bytes
// read (decompressed) and the tensors, events and op fan-in of the result (coopsim/base/limits.hpp).
#pragma once

#include <string>

#include "coopsim/model/trace.hpp"

namespace coopsim {

// DTR prototype logs (JSON Lines: ANNOTATE, CONSTANT, MEMORY, CALL, ALIAS, COPY, RELEASE,
// MUTATE, COPY_FROM), with DTR's semantics (docs/import-dtr.md).
struct DtrOptions {
  // false: MUTATE is an in-place op (the storage keeps its address; DTR's prototype);
  // true: copy-on-write as DTR's reference simulator simrd models it (a fresh storage per
  // mutated argument), which reproduces simrd's no-eviction peak.
  bool copy_on_write = false;
  // The simrd compatibility profile (`--compat simrd`, docs/import-dtr.md): constants are
  // allocated at their CONSTANT record rather than before iteration 0, as simrd's parse_file
  // computes them; implies copy_on_write. Recorded in the header as source.compat.
  bool simrd_compat = false;
};
Trace import_dtr_log(const std::string& path, const DtrOptions& options = {}, const Limits& limits = {});

// torch.cuda.memory._dump_snapshot() pickles (optionally .gz), read by coopsim's own
// allow-list pickle reader (docs/import-torch-snapshot.md).
struct TorchSnapshotOptions {
  // The device whose history and segments become the trace (one trace per device); a device the
  // file does not record is an error listing the recorded ones.
  int device = 0;
};
Trace import_torch_snapshot(const std::string& path, const TorchSnapshotOptions& options, const Limits& limits = {});

// Kineto / PyTorch profiler Chrome traces (.json or .json.gz) with [memory] events (docs/import-kineto.md).
struct KinetoOptions {
  int device = 0;
  // A PyTorch Execution Trace (ET / Chakra host trace JSON, optionally .gz) of the same run:
  // when set, the ops, their input / output tensors and the tensor sizes come from the ET
  // and the durations from the Kineto trace (docs/import-kineto.md, "Dataflow from an
  // Execution Trace"); a pair that is not from one run is refused.
  std::string et;
};
Trace import_kineto(const std::string& path, const KinetoOptions& options, const Limits& limits = {});

}  // namespace coopsim
