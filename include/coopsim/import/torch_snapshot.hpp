// PyTorch CUDA memory snapshots (torch.cuda.memory._dump_snapshot) as coopsim traces, and what a
// simulation needs to check itself against the recording. The entry point for files is
// import_torch_snapshot() in coopsim/import/importers.hpp; the mapping, the reconstruction of the
// initial allocator state and their limits are described in docs/import-torch-snapshot.md.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "coopsim/alloc/pytorch.hpp"
#include "coopsim/base/limits.hpp"
#include "coopsim/alloc/allocator.hpp"
#include "coopsim/import/importers.hpp"
#include "coopsim/formats/pickle.hpp"
#include "coopsim/model/memory_cap.hpp"
#include "coopsim/model/report.hpp"
#include "coopsim/model/trace.hpp"

namespace coopsim::torch_snapshot {

// Converts an already parsed snapshot (the dict _snapshot() returns). `path` names the input in
// error messages ("<path>: <key>: problem") and in the trace's header. Throws coopsim::Error.
// What it builds is counted in `memory` (limits.max_memory; without it, a budget of the
// default), after what the pickle's values already hold.
Trace import_value(const pickle::Value& root, const std::string& path, const TorchSnapshotOptions& options);
Trace import_value(const pickle::Value& root, const std::string& path, const TorchSnapshotOptions& options,
                   MemoryCap& memory);

// The same from a pickle's bytes, read as import_torch_snapshot() reads a file: the history
// streams into the importer's records instead of being built as a tree (pickle_stream.hpp).
Trace import_bytes(std::string_view bytes, const std::string& path, const TorchSnapshotOptions& options,
                   std::uint64_t max_memory = Limits::default_max_memory());

// The `pytorch` model's options for a recorded `allocator_settings` dict (as the importer keeps
// it in the header): max_split_size (-1 = off), max_non_split_rounding_size,
// garbage_collection_threshold, expandable_segments and the per-bucket roundup_power2_divisions
// (keys "1" .. "32768", MiB). Null or absent settings give the defaults. Throws ConfigError
// ("allocator_settings.<key>: problem") on values the model cannot take.
PyTorchOptions allocator_options(const nlohmann::json& allocator_settings);

// The recorded end-of-snapshot segments (header extra "final_segments" of an imported trace),
// with streams in the trace's dense numbering; nullopt when the trace carries none.
std::optional<std::vector<SeedSegment>> final_segments(const Trace& trace);

// Segment-by-segment comparison of a model's end state with the recorded one. Adjacent free
// blocks are merged on both sides first (a snapshot and a model may cut free space differently
// only where nothing can tell them apart). The result is the report's EndStateCheck
// (coopsim/model/report.hpp).
EndStateCheck compare_end_state(const std::vector<SeedSegment>& recorded, const std::vector<SeedSegment>& model);

// The `pytorch` model's config overrides ("pytorch.key=value", for SimConfig's apply_override)
// that replay a trace with its recorded allocator settings (header extra "allocator_settings";
// expandable segments also when the trace's segments are expandable). A setting --set cannot
// express (roundup_power2_divisions that differ per interval) is left at its default and
// described in `notes` when given.
std::vector<std::string> replay_overrides(const Trace& trace, std::vector<std::string>* notes = nullptr);

// What `coopsim import torch-snapshot` prints after writing `output`: the `coopsim run` line that
// simulates it with the recorded allocator settings (`--set pytorch.…` for every non-default one;
// run does not read them from the header), the budget at which each recorded OOM recurs, and the
// other devices of a multi-device snapshot.
std::vector<std::string> simulation_hints(const Trace& trace, const std::string& output);

}  // namespace coopsim::torch_snapshot
