#include "lib/smoke/smoke_report.hpp"

#include "lib/smoke/remote.hpp"
#include "lib/smoke/smoke_json.hpp"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>
#include <pugixml.hpp>

namespace rdmakit::smoke {

namespace {

// What a tool wrote on stderr, as much of it as a report should carry: its end.
constexpr std::size_t stderr_tail_bytes = 4096;

std::string tail(const std::string& text) {
  return text.size() <= stderr_tail_bytes ? text : text.substr(text.size() - stderr_tail_bytes);
}

std::string shell_words(const std::vector<std::string>& command) {
  std::string text;
  for (const auto& word : command) {
    if (!text.empty()) text += ' ';
    text += word;
  }
  return text;
}

// XML 1.0 cannot carry most control characters, even escaped, and a UTF-8 character cut
// by a tail would make the file invalid; the tools write ASCII, so anything else becomes '?'.
std::string xml_safe(const std::string& text) {
  std::string safe = text;
  for (auto& c : safe) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && c != '\n' && c != '\t' && c != '\r') || byte >= 0x7f) c = '?';
  }
  return safe;
}

}  // namespace

std::size_t SmokeRun::count(CaseOutcome outcome) const {
  return static_cast<std::size_t>(
      std::ranges::count_if(cases, [outcome](const CaseResult& c) { return c.outcome == outcome; }));
}

namespace {

// A case as the report carries it: each run's stderr cut to its tail.
CaseResult as_reported(CaseResult result) {
  for (auto& run : result.runs) run.outcome.err = tail(run.outcome.err);
  return result;
}

}  // namespace

nlohmann::json to_json(const CaseResult& result) {
  return described::write<SmokeJson>(as_reported(result));
}

nlohmann::json to_json(const SmokeRun& run) {
  SmokeRecord record{.addresses = run.addresses,
                     .cases = {},
                     .passed = run.count(CaseOutcome::passed),
                     .failed = run.count(CaseOutcome::failed),
                     .skipped = run.count(CaseOutcome::skipped),
                     .no_device = run.no_device ? *run.no_device : nlohmann::json(nullptr),
                     .seconds = run.seconds,
                     .unauthenticated = run.unauthenticated};
  for (const auto& result : run.cases) record.cases.push_back(as_reported(result));
  return described::write<SmokeJson>(record);
}

std::vector<described::SchemaShape> smoke_report_shapes() {
  return {{.schema = "rdma_smoke",
           .pointer = "/$defs/case",
           .shape = described::shape<SmokeJson, CaseResult>(),
           .extra_keys = {}},
          {.schema = "rdma_smoke",
           .pointer = "/$defs/smoke",
           .shape = described::shape<SmokeJson, SmokeRecord>(),
           .extra_keys = {}}};
}

std::string render_table(const SmokeRun& run) {
  std::ostringstream out;
  std::size_t name_width = 4;
  std::size_t address_width = 7;
  for (const auto& c : run.cases) {
    name_width = std::max(name_width, c.name.size());
    address_width = std::max(address_width, c.address.size());
  }
  out << fmt::format("{:<{}}  {:<{}}  {:<7}  {:>7}  {}\n", "case", name_width, "address", address_width, "outcome",
                     "time", "reason");
  for (const auto& c : run.cases) {
    out << fmt::format("{:<{}}  {:<{}}  {:<7}  {:>5.1f} s  {}\n", c.name, name_width, c.address, address_width,
                       to_string(c.outcome), c.seconds, c.reason);
    if (!c.hint.empty()) out << fmt::format("{:<{}}  hint: {}\n", "", name_width + address_width + 22, c.hint);
  }
  if (run.no_device && run.no_device->contains("verdict")) {
    const auto& verdict = (*run.no_device)["verdict"];
    out << fmt::format("no RDMA device: {}: {}\n", verdict.value("cause", ""), verdict.value("summary", ""));
  }
  out << fmt::format("{} passed, {} failed, {} skipped in {:.1f} s\n", run.count(CaseOutcome::passed),
                     run.count(CaseOutcome::failed), run.count(CaseOutcome::skipped), run.seconds);
  return out.str();
}

namespace {

void add_testcase(pugi::xml_node suite, const CaseResult& c) {
  auto test = suite.append_child("testcase");
  test.append_attribute("name") = c.name.c_str();
  test.append_attribute("classname") = ("rdma_smoke." + c.tool).c_str();
  test.append_attribute("time") = fmt::format("{:.3f}", c.seconds).c_str();
  if (c.outcome == CaseOutcome::skipped) {
    test.append_child("skipped").append_attribute("message") = xml_safe(c.reason).c_str();
  } else if (c.outcome == CaseOutcome::failed) {
    auto failure = test.append_child("failure");
    failure.append_attribute("message") = xml_safe(c.reason).c_str();
    failure.append_attribute("type") = c.interrupted ? "interrupted" : "failed";
    failure.text().set(xml_safe(c.reason + (c.hint.empty() ? "" : "\nhint: " + c.hint)).c_str());
  }
  std::string out;
  std::string err;
  for (const auto& r : c.runs) {
    out += fmt::format("# {}: {}\n{}\n", r.role, shell_words(r.command),
                       r.report.is_null() ? r.outcome.out : r.report.dump(2));
    if (!r.outcome.err.empty()) err += fmt::format("# {}: {}\n{}", r.role, shell_words(r.command), tail(r.outcome.err));
  }
  test.append_child("system-out").text().set(xml_safe(out).c_str());
  if (!err.empty()) test.append_child("system-err").text().set(xml_safe(err).c_str());
}

void set_counts(pugi::xml_node node, const std::vector<const CaseResult*>& cases, double seconds) {
  auto counted = [&cases](CaseOutcome outcome) {
    return static_cast<unsigned long long>(
        std::ranges::count_if(cases, [outcome](const CaseResult* c) { return c->outcome == outcome; }));
  };
  node.append_attribute("tests") = static_cast<unsigned long long>(cases.size());
  node.append_attribute("failures") = counted(CaseOutcome::failed);
  node.append_attribute("errors") = 0;
  node.append_attribute("skipped") = counted(CaseOutcome::skipped);
  node.append_attribute("time") = fmt::format("{:.3f}", seconds).c_str();
}

}  // namespace

std::string junit_xml(const SmokeRun& run, const std::string& host_name) {
  pugi::xml_document document;
  auto declaration = document.append_child(pugi::node_declaration);
  declaration.append_attribute("version") = "1.0";
  declaration.append_attribute("encoding") = "UTF-8";
  auto suites = document.append_child("testsuites");
  suites.append_attribute("name") = "rdma_smoke";
  std::vector<const CaseResult*> all;
  all.reserve(run.cases.size());
  for (const auto& c : run.cases) all.push_back(&c);
  set_counts(suites, all, run.seconds);
  if (run.aborted) {
    // An error, not zero tests: a CI reporter shows the run as failed.
    suites.attribute("tests") = static_cast<unsigned long long>(all.size()) + 1;
    suites.attribute("errors") = 1;
  }
  // The suites as the cases ran: one per address (a run without a device has one case).
  std::vector<std::string> addresses;
  for (const auto& c : run.cases) {
    if (std::ranges::find(addresses, c.address) == addresses.end()) addresses.push_back(c.address);
  }
  for (const auto& address : addresses) {
    std::vector<const CaseResult*> mine;
    double seconds = 0;
    for (const auto* c : all) {
      if (c->address != address) continue;
      mine.push_back(c);
      seconds += c->seconds;
    }
    auto suite = suites.append_child("testsuite");
    suite.append_attribute("name") = (address.empty() ? std::string("rdma_smoke") : "rdma_smoke " + address).c_str();
    set_counts(suite, mine, seconds);
    suite.append_attribute("hostname") = host_name.c_str();
    for (const auto* c : mine) add_testcase(suite, *c);
    // The schema puts a suite's own output after its cases.
    if (run.no_device) suite.append_child("system-out").text().set(xml_safe(run.no_device->dump(2)).c_str());
  }
  if (run.aborted) {
    auto suite = suites.append_child("testsuite");
    suite.append_attribute("name") = "rdma_smoke";
    set_counts(suite, {}, run.seconds);
    suite.attribute("tests") = 1;
    suite.attribute("errors") = 1;
    suite.append_attribute("hostname") = host_name.c_str();
    auto test = suite.append_child("testcase");
    test.append_attribute("name") = "run";
    test.append_attribute("classname") = "rdma_smoke";
    test.append_attribute("time") = fmt::format("{:.3f}", run.seconds).c_str();
    auto error = test.append_child("error");
    error.append_attribute("message") = xml_safe(*run.aborted).c_str();
    error.append_attribute("type") = "aborted";
    error.text().set(xml_safe(*run.aborted).c_str());
  }
  std::ostringstream text;
  document.save(text, "  ", pugi::format_default, pugi::encoding_utf8);
  return text.str();
}

}  // namespace rdmakit::smoke
