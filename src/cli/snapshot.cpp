// `coopsim snapshot stats|segsum FILE`: what PyTorch's snapshot viewer prints about a memory
// snapshot (torch.cuda._memory_viz), for snapshots of any size: the history streams past
// (coopsim/import/torch_snapshot_summary.hpp). `snapshot timeline FILE -o OUT` and `snapshot diff
// A B`: a recording's memory over time and two recordings compared (docs/snapshot-diff.md).
#include <fmt/format.h>

#include <optional>
#include <ostream>

#include "coopsim/base/error.hpp"
#include "coopsim/base/output_file.hpp"
#include "coopsim/base/params.hpp"
#include "coopsim/cli/commands.hpp"
#include "coopsim/import/torch_snapshot_summary.hpp"
#include "snapshot_commands.hpp"

namespace coopsim {
namespace {

std::optional<SimTime> window_time(const std::string& text, const char* flag) {
  if (text.empty()) return std::nullopt;
  const std::optional<SimTime> t = parse_time(text);
  if (!t || t->count() < 0) {
    throw UsageError(std::string("snapshot ") + flag,
                     "'" + text + "' is not a duration (e.g. 250us, 1.5ms, 2s; a plain number is ns)");
  }
  return t;
}

void expect_inputs(const SnapshotArgs& args, std::size_t n) {
  if (args.inputs.size() != n) {
    throw UsageError("snapshot " + args.action,
                     fmt::format("takes {} input file{} (got {})", n, n == 1 ? "" : "s", args.inputs.size()));
  }
}

// Options that only some actions read must not be given to the others.
void refuse_unused(const SnapshotArgs& args, bool timeline, bool diff) {
  const auto refuse = [&](bool given, const char* flag) {
    if (given) throw UsageError("snapshot " + args.action, std::string(flag) + " is not an option of this action");
  };
  refuse(!timeline && (!args.from.empty() || !args.to.empty()), "--from/--to");
  refuse(!timeline && !diff && !args.output.empty(), "--output");
  refuse(!diff && (!args.svg.empty() || args.json), "--svg/--json");
}

int timeline(const SnapshotArgs& args) {
  expect_inputs(args, 1);
  if (args.output.empty()) throw UsageError("snapshot timeline", "needs --output FILE (the Chrome trace JSON)");
  snapshot_cli::TimeWindow window{window_time(args.from, "--from"), window_time(args.to, "--to")};
  if (window.from && window.to && *window.from > *window.to) {
    throw UsageError("snapshot timeline", "--from " + args.from + " is after --to " + args.to);
  }
  const NamedPath outputs[] = {{"--output", args.output}};
  const NamedPath inputs[] = {{"the input", args.inputs[0]}};
  check_output_paths(outputs, inputs);
  OutputFile file(args.output, OutputFile::Target::Owned);  // refused before the input is read
  const snapshot_cli::MemoryProfile p = snapshot_cli::profile_memory(args.inputs[0]);
  file.write(snapshot_cli::timeline_json(p, args.inputs[0], window));
  file.commit();
  return 0;
}

int diff(const SnapshotArgs& args, std::ostream& out) {
  expect_inputs(args, 2);
  const NamedPath outputs[] = {{"--output", args.output}, {"--svg", args.svg}};
  const NamedPath inputs[] = {{"input A", args.inputs[0]}, {"input B", args.inputs[1]}};
  check_output_paths(outputs, inputs);
  std::optional<OutputFile> json_file, svg_file;
  if (!args.output.empty()) json_file.emplace(args.output, OutputFile::Target::Owned);
  if (!args.svg.empty()) svg_file.emplace(args.svg, OutputFile::Target::Owned);
  const snapshot_cli::MemoryProfile a = snapshot_cli::profile_memory(args.inputs[0]);
  const snapshot_cli::MemoryProfile b = snapshot_cli::profile_memory(args.inputs[1]);
  const snapshot_cli::SnapshotDiff d = snapshot_cli::diff_profiles(a, args.inputs[0], b, args.inputs[1]);
  const auto rows = static_cast<std::size_t>(args.rows);
  if (json_file) json_file->write(snapshot_cli::diff_json(d).dump(2) + "\n");
  if (svg_file) svg_file->write(snapshot_cli::diff_svg(d, rows));
  if (json_file) json_file->commit();
  if (svg_file) svg_file->commit();
  if (args.json) {
    out << snapshot_cli::diff_json(d).dump(2) << "\n";
  } else {
    out << snapshot_cli::diff_text(d, rows);
  }
  return 0;
}

}  // namespace

int command_snapshot(const SnapshotArgs& args, std::ostream& out) {
  refuse_unused(args, args.action == "timeline", args.action == "diff");
  if (args.action == "timeline") return timeline(args);
  if (args.action == "diff") return diff(args, out);
  expect_inputs(args, 1);
  if (args.action == "segsum") {
    out << torch_snapshot::segsum_text(args.inputs[0]) << "\n";  // the viewer print()s the text
  } else if (args.action == "stats") {
    out << torch_snapshot::stats_text(torch_snapshot::snapshot_stats(args.inputs[0]));
  } else {
    throw UsageError("snapshot", "unknown action '" + args.action + "' (valid: stats, segsum, timeline, diff)");
  }
  return 0;
}

}  // namespace coopsim
