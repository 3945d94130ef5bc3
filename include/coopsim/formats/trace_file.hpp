// Trace files in coopsim's own format v1 (docs/trace-format.md): the streaming, validating loader
// and the writer.
#pragma once

#include <string>
#include <string_view>

#include "coopsim/base/limits.hpp"
#include "coopsim/model/trace.hpp"

namespace coopsim {

// Load a v1 trace (.jsonl or .jsonl.gz, detected by magic bytes). Streams line by line and
// validates as it goes; throws InputError("file:line: problem") on the first problem, including
// a cap of `limits` exceeded ("file:line: more than N tensors (limits.max_tensors)").
Trace load_trace(const std::string& path, const Limits& limits = {});
// The same for trace text held in memory (plain, not gzip): the Python recorder hands its records
// here, so that every trace file is written by write_trace. `name` stands for the path in errors
// ("name:line: problem") and in Trace::path.
Trace parse_trace(std::string_view text, const std::string& name, const Limits& limits = {});

// Write a trace in v1 form (gzip when path ends in .gz) through an OutputFile
// (coopsim/output_file.hpp), so no partial output is left on error. The second form writes to
// an OutputFile the caller opened earlier (commands open their outputs before the long work)
// and commits it.
class OutputFile;
void write_trace(const Trace& trace, const std::string& path);
void write_trace(const Trace& trace, OutputFile& out);

}  // namespace coopsim
