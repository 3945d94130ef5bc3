// The writers of a run's Report (coopsim/model/report.hpp): JSON, human text, CSV and the
// comparison table. Plain formatting; nothing here computes a figure.
#pragma once

#include <nlohmann/json.hpp>

#include <ostream>
#include <string>
#include <vector>

#include "coopsim/model/report.hpp"

namespace coopsim {

nlohmann::ordered_json to_json(const Report& r);
void write_text(std::ostream& os, const Report& r);
// CSV: a fixed header (documented in docs/architecture.md) and one row per report.
std::string csv_header();
std::string csv_row(const Report& r);
// A compact comparison table of several runs (one row each), for quickstart and `run` over lists.
void write_summary_table(std::ostream& os, const std::vector<Report>& reports);

}  // namespace coopsim
