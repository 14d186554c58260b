// diag-bind --replay DIR: facts.json supplies what sysfs cannot show (netlink indices,
// the user-space view, device nodes, addresses, memlock, the attempt), applied over a
// captured sysfs tree, then diagnosed and rendered. The input is a facts.json; an
// optional "fixture" member picks the tree from tests/fixtures/diag ("ok" otherwise).

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_support.hpp"
#include "lib/base/error.hpp"
#include "lib/base/report.hpp"
#include "lib/diag/diagnosis.hpp"
#include "lib/diag/sysfs.hpp"

namespace {

namespace fs = std::filesystem;
using namespace rdmakit;

const diag::Inventory& fixture_inventory(const nlohmann::json& facts) {
  static std::map<std::string, diag::Inventory> cache;
  std::string name = "ok";
  if (const auto it = facts.find("fixture"); it != facts.end() && it->is_string()) {
    const auto wanted = it->get<std::string>();
    std::error_code ec;
    if (wanted.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos &&
        fs::is_directory(fs::path(RDMAKIT_DIAG_FIXTURES) / wanted / "sys", ec)) {
      name = wanted;
    }
  }
  auto [it, fresh] = cache.try_emplace(name);
  if (fresh) diag::read_sysfs(fs::path(RDMAKIT_DIAG_FIXTURES) / name / "sys", it->second);
  return it->second;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto facts = nlohmann::json::parse(fuzz::as_text(data, size), nullptr, false);
  if (facts.is_discarded()) return 0;

  diag::Inventory inventory = fixture_inventory(facts);
  diag::Attempt attempt;
  std::string address;
  // What diag::load_replay() does after parsing. A document that does not fit (the wrong JSON
  // type anywhere, a fractional number) must be a UsageError, which diag-bind reports as a
  // usage error; any other exception, nlohmann's included, escapes and counts as a crash.
  try {
    address = diag::apply_facts(facts, inventory, attempt);
  } catch (const UsageError& error) {
    FUZZ_CHECK(std::string_view(error.what()).find('\n') == std::string_view::npos);
    return 0;
  }
  diag::Target target;
  try {
    target = diag::make_target(address, 0, "tcp");
  } catch (const UsageError&) {
    return 0;
  }

  const auto verdict = diag::diagnose(target, inventory, attempt, SiblingNames{});
  FUZZ_CHECK(!verdict.summary.empty());  // its cause is one of its table's, by type
  FUZZ_CHECK(verdict.exit_code == ExitCode::ok || verdict.exit_code == ExitCode::cause_found ||
             verdict.exit_code == ExitCode::unexplained);
  // A verdict of "usable" needs a successful bind on record.
  if (verdict.exit_code == ExitCode::ok) {
    const auto* bind = attempt.find("rdma_bind_addr");
    FUZZ_CHECK(target.host.empty() || (bind != nullptr && bind->ok()));
  }
  FUZZ_CHECK(!diag::render_text(target, inventory, attempt, verdict).empty());
  for (const auto& check : diag::assess(inventory)) FUZZ_CHECK(!check.area.empty());

  Report report;
  report.tool = "diag-bind";
  report.local_address = target.host;
  report.add(diag::DiagnosisResult(
      diag::Diagnosis{.target = target, .inventory = inventory, .attempt = attempt, .verdict = verdict}));
  FUZZ_CHECK(!nlohmann::json::parse(json_text(to_json(report)), nullptr, false).is_discarded());
  return 0;
}
