// Catch2 v2 main plus a TAP reporter with one line per test case ("casetap"), so Meson counts
// test cases (Catch2's own TAP reporter emits a line per assertion: millions here).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <sstream>

namespace {

class CaseTapReporter : public Catch::StreamingReporterBase<CaseTapReporter> {
 public:
  explicit CaseTapReporter(Catch::ReporterConfig const& config) : StreamingReporterBase(config) {}
  static std::string getDescription() { return "TAP with one line per test case"; }

  void assertionStarting(Catch::AssertionInfo const&) override {}

  bool assertionEnded(Catch::AssertionStats const& stats) override {
    const Catch::AssertionResult& r = stats.assertionResult;
    if (r.isOk()) return true;
    failures_ << "# " << r.getSourceInfo() << ": ";
    if (r.hasExpression()) failures_ << r.getExpressionInMacro() << " with expansion " << r.getExpandedExpression();
    if (!r.getMessage().empty()) failures_ << " " << r.getMessage();
    for (const auto& m : stats.infoMessages) failures_ << " [" << m.message << "]";
    failures_ << "\n";
    return true;
  }

  void testCaseEnded(Catch::TestCaseStats const& stats) override {
    ++count_;
    const bool ok = stats.totals.assertions.failed == 0;
    stream << (ok ? "ok " : "not ok ") << count_ << " - " << stats.testInfo.name << "\n";
    if (!ok) stream << failures_.str();
    failures_.str("");
    stream.flush();
    StreamingReporterBase::testCaseEnded(stats);
  }

  void testRunEnded(Catch::TestRunStats const& stats) override {
    stream << "1.." << count_ << "\n";
    StreamingReporterBase::testRunEnded(stats);
  }

 private:
  std::ostringstream failures_;
  int count_ = 0;
};

}  // namespace

CATCH_REGISTER_REPORTER("casetap", CaseTapReporter)
