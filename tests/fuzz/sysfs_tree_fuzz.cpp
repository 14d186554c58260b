// diag-bind's sysfs reader on a tree built from the input, then everything downstream of
// it (assessment, diagnosis, text and JSON rendering). read_sysfs promises never to throw
// for a bad tree: it also runs on captured trees (--replay) and on hosts where drivers put
// odd things in sysfs.
//
// Input: one entry per line, paths relative to the tree's root:
//   class/infiniband/rxe0/node_type=1: CA     a file; its content gets sysfs's '\n'
//   class/infiniband/rxe0/ports/1/gids/       an (empty) directory
//   class/infiniband/mlx5_0/device/driver->../../mlx5_core    a symbolic link
// Content escapes: \n \r \\ \xHH. Paths never leave the root (no '..', no '.').

#include <stdlib.h>

#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "fuzz_support.hpp"
#include "lib/base/report.hpp"
#include "lib/diag/diagnosis.hpp"
#include "lib/diag/sysfs.hpp"

namespace {

namespace fs = std::filesystem;
using namespace rdmakit;

constexpr std::size_t max_entries = 96;
constexpr std::size_t max_depth = 12;

// One scratch directory per process (tmpfs where there is one), emptied after each input
// and removed at exit.
struct Scratch {
  fs::path dir;
  Scratch() {
    std::error_code ec;
    const fs::path base = fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
    std::string pattern = (base / "rdmakit-sysfs-fuzz-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    dir = pattern;
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

const fs::path& scratch() {
  static const Scratch instance;
  return instance.dir;
}

std::string unescape(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\' || i + 1 == text.size()) {
      out += text[i];
      continue;
    }
    const char next = text[++i];
    if (next == 'n') {
      out += '\n';
    } else if (next == 'r') {
      out += '\r';
    } else if (next == 'x' && i + 2 < text.size() && std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
               std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(text.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += next;
    }
  }
  return out;
}

// Relative, inside the root, at most max_depth deep; nullopt otherwise.
std::optional<fs::path> inside(std::string_view text) {
  fs::path path;
  std::size_t depth = 0;
  while (!text.empty()) {
    const auto slash = text.find('/');
    const auto part = text.substr(0, slash);
    text = slash == std::string_view::npos ? std::string_view() : text.substr(slash + 1);
    if (part.empty()) continue;
    if (part == "." || part == ".." || ++depth > max_depth) return std::nullopt;
    path /= std::string(part);
  }
  if (path.empty()) return std::nullopt;
  return path;
}

void build_tree(const fs::path& root, std::string_view input) {
  std::error_code ec;
  fs::create_directories(root, ec);
  for (const auto& line : fuzz::split_lines(input, max_entries)) {
    const auto equals = line.find('=');
    const auto arrow = line.find("->");
    if (arrow != std::string::npos && arrow < equals) {
      const auto link = inside(std::string_view(line).substr(0, arrow));
      if (!link) continue;
      fs::create_directories((root / *link).parent_path(), ec);
      fs::create_directory_symlink(line.substr(arrow + 2), root / *link, ec);
    } else if (equals != std::string::npos) {
      const auto file = inside(std::string_view(line).substr(0, equals));
      if (!file) continue;
      fs::create_directories((root / *file).parent_path(), ec);
      std::ofstream(root / *file, std::ios::binary) << unescape(std::string_view(line).substr(equals + 1)) << '\n';
    } else if (const auto dir = inside(line)) {
      fs::create_directories(root / *dir, ec);
    }
  }
}

diag::Attempt attempt_with(int bind_errno) {
  diag::Attempt attempt;
  attempt.steps.push_back({.call = "rdma_create_event_channel", .subject = "", .errnum = 0, .detail = ""});
  attempt.steps.push_back({.call = "rdma_create_id", .subject = "RDMA_PS_TCP", .errnum = 0, .detail = ""});
  attempt.steps.push_back({.call = "rdma_bind_addr", .subject = "10.55.0.1:0", .errnum = bind_errno, .detail = ""});
  if (bind_errno == 0) {
    attempt.device = "rxe0";
    attempt.port = 1;
  }
  return attempt;
}

diag::Verdict check_verdict(const diag::Target& target, const diag::Inventory& inventory,
                            const diag::Attempt& attempt) {
  auto verdict = diag::diagnose(target, inventory, attempt, SiblingNames{});
  FUZZ_CHECK(!verdict.summary.empty());  // its cause is one of its table's, by type
  FUZZ_CHECK(verdict.exit_code == ExitCode::ok || verdict.exit_code == ExitCode::cause_found ||
             verdict.exit_code == ExitCode::unexplained);
  FUZZ_CHECK(!diag::render_text(target, inventory, attempt, verdict).empty());
  return verdict;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto root = scratch() / "sys";
  std::error_code ec;
  fs::remove_all(root, ec);
  build_tree(root, fuzz::as_text(data, size));

  diag::Inventory inventory;
  diag::read_sysfs(root, inventory);
  diag::Inventory again;
  diag::read_sysfs(root, again);
  // Nothing but the tree decides the inventory.
  FUZZ_CHECK(diag::to_json(inventory) == diag::to_json(again));

  for (const auto& device : inventory.kernel_devices) {
    FUZZ_CHECK(!device.name.empty());
    for (const auto& port : device.ports) {
      for (const auto& gid : port.gids) {
        // Unused (all-zero) table entries are skipped, so no GID reads as "::".
        FUZZ_CHECK(!gid.gid.empty() && gid.gid != "::");
      }
    }
  }
  for (const auto& netdev : inventory.netdevs) FUZZ_CHECK(!netdev.name.empty());

  const auto checks = diag::assess(inventory);
  FUZZ_CHECK(!checks.empty());
  for (const auto& check : checks) FUZZ_CHECK(!check.area.empty());  // its status is one of four, by type
  check_verdict(diag::make_target("", 0, "tcp"), inventory, attempt_with(0));
  check_verdict(diag::make_target("10.55.0.1", 0, "tcp"), inventory, attempt_with(0));
  check_verdict(diag::make_target("fd55::1", 0, "tcp"), inventory, attempt_with(EADDRNOTAVAIL));
  const auto verdict = check_verdict(diag::make_target("10.55.0.1", 0, "tcp"), inventory, attempt_with(ENODEV));
  // diag-bind --json puts the whole inventory into the report; names in sysfs are any bytes.
  Report report;
  report.tool = "diag-bind";
  report.add(diag::DiagnosisResult(diag::Diagnosis{
      .target = diag::make_target("10.55.0.1", 0, "tcp"), .inventory = inventory, .attempt = {}, .verdict = verdict}));
  FUZZ_CHECK(!nlohmann::json::parse(json_text(to_json(report)), nullptr, false).is_discarded());
  fs::remove_all(root, ec);
  return 0;
}
