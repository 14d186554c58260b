// diag-bind --replay DIR: facts.json supplies what sysfs cannot show (netlink indices,
// the user-space view, device nodes, addresses, memlock, the attempt), applied over a
// captured sysfs tree, then diagnosed and rendered. The input is a facts.json; an
// optional "fixture" member picks the tree from tests/fixtures/diag ("ok" otherwise).

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_support.hpp"
#include "lib/diag.hpp"
#include "lib/error.hpp"
#include "lib/report.hpp"
#include "lib/sysfs.hpp"

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

// nlohmann's get<int>() from a floating-point value is a plain cast, undefined behaviour
// out of int's range; facts files come from capture.sh, which writes integers only.
bool has_float(const nlohmann::json& value) {
  if (value.is_number_float()) return true;
  if (!value.is_structured()) return false;
  for (const auto& item : value) {
    if (has_float(item)) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto facts = nlohmann::json::parse(fuzz::as_text(data, size), nullptr, false);
  if (facts.is_discarded() || !facts.is_object() || has_float(facts)) return 0;

  diag::Inventory inventory = fixture_inventory(facts);
  diag::Attempt attempt;
  std::string address;
  // What diag-bind's replay() does after parsing; the wrong JSON type anywhere throws a
  // json::exception there (see README.md: diag-bind lets it escape).
  try {
    diag::apply_facts(facts, inventory, attempt);
    address = facts.value("address", std::string());
  } catch (const nlohmann::json::exception&) {
    return 0;
  }
  diag::Target target;
  try {
    target = diag::make_target(address, 0, "tcp");
  } catch (const UsageError&) {
    return 0;
  }

  const auto verdict = diag::diagnose(target, inventory, attempt);
  FUZZ_CHECK(!verdict.cause.empty() && !verdict.summary.empty());
  FUZZ_CHECK(verdict.exit_code == 0 || verdict.exit_code == 1 || verdict.exit_code == 3);
  // A verdict of "usable" needs a successful bind on record.
  if (verdict.exit_code == 0) {
    const auto* bind = attempt.find("rdma_bind_addr");
    FUZZ_CHECK(target.host.empty() || (bind != nullptr && bind->ok()));
  }
  FUZZ_CHECK(!diag::render_text(target, inventory, attempt, verdict).empty());
  for (const auto& check : diag::assess(inventory)) FUZZ_CHECK(!check.area.empty());

  Report report;
  report.tool = "diag-bind";
  report.local_address = target.host;
  report.extra["inventory"] = diag::to_json(inventory);
  report.extra["attempt"] = diag::to_json(attempt);
  report.extra["verdict"] = diag::to_json(verdict);
  FUZZ_CHECK(!to_json(report).dump(2).empty());
  return 0;
}
