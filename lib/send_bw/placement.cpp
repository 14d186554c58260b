#include "lib/send_bw/placement.hpp"

#include <linux/mempolicy.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "lib/base/error.hpp"
#include "lib/base/text_file.hpp"

namespace rdmakit {

namespace {

std::optional<int> parse_int(std::string_view text) {
  int value = 0;
  const auto* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || stop != end) return std::nullopt;
  return value;
}

std::set<int> allowed_cores() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  std::set<int> cores;
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) return cores;
  for (int core = 0; core < CPU_SETSIZE; ++core) {
    if (CPU_ISSET(core, &mask)) cores.insert(core);
  }
  return cores;
}

}  // namespace

std::optional<std::set<int>> parse_cpulist(const std::string& text) {
  std::set<int> cores;
  std::string_view rest = text;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const auto item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const auto dash = item.find('-');
    const auto first = parse_int(item.substr(0, dash));
    const auto last = dash == std::string_view::npos ? first : parse_int(item.substr(dash + 1));
    if (!first || !last || *first < 0 || *last < *first || *last - *first > CPU_SETSIZE) return std::nullopt;
    for (int core = *first; core <= *last; ++core) cores.insert(core);
  }
  return cores;
}

std::optional<int> device_numa_node(const std::string& device, const std::filesystem::path& root) {
  const auto text = read_first_line(root / "class/infiniband" / device / "device/numa_node");
  if (!text) return std::nullopt;
  const auto node = parse_int(*text);
  if (!node || *node < 0) return std::nullopt;
  return node;
}

std::optional<int> core_numa_node(int core, const std::filesystem::path& root) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(root / "devices/system/node", error)) {
    const auto name = entry.path().filename().string();
    if (name.rfind("node", 0) != 0) continue;
    const auto node = parse_int(std::string_view(name).substr(4));
    const auto list = read_first_line(entry.path() / "cpulist");
    if (!node || !list) continue;
    if (const auto cores = parse_cpulist(*list); cores && cores->contains(core)) return node;
  }
  return std::nullopt;
}

nlohmann::json Placement::to_json() const {
  nlohmann::json placed = {{"core", core}, {"memory_on_device_node", memory_on_device_node}};
  placed["core_numa_node"] = core_node ? nlohmann::json(*core_node) : nlohmann::json(nullptr);
  placed["device_numa_node"] = device_node ? nlohmann::json(*device_node) : nlohmann::json(nullptr);
  return placed;
}

void check_core_allowed(int core) {
  const auto cores = allowed_cores();
  if (!cores.contains(core)) {
    throw UsageError(fmt::format("--pin-core {}: this process may run on cores {}", core, fmt::join(cores, ",")));
  }
}

Placement place_on_core(int core, const std::string& device, const std::filesystem::path& root) {
  check_core_allowed(core);
  cpu_set_t mask;
  CPU_ZERO(&mask);
  CPU_SET(core, &mask);
  if (sched_setaffinity(0, sizeof mask, &mask) != 0) {
    throw RdmaError("sched_setaffinity", fmt::format("core {}", core), errno);
  }
  Placement placement{.core = core,
                      .core_node = core_numa_node(core, root),
                      .device_node = device_numa_node(device, root),
                      .memory_on_device_node = false};
  if (placement.device_node) {
    const auto node = static_cast<std::size_t>(*placement.device_node);
    constexpr std::size_t bits_per_word = 8 * sizeof(unsigned long);
    std::vector<unsigned long> nodes(node / bits_per_word + 1, 0);
    nodes[node / bits_per_word] |= 1UL << (node % bits_per_word);
    // The kernel reads maxnode - 1 bits of the mask.
    if (syscall(SYS_set_mempolicy, MPOL_PREFERRED, nodes.data(), nodes.size() * bits_per_word + 1) != 0) {
      throw RdmaError("set_mempolicy", fmt::format("MPOL_PREFERRED node {}", node), errno);
    }
    placement.memory_on_device_node = true;
  }
  if (placement.device_node && placement.core_node && *placement.device_node != *placement.core_node) {
    spdlog::warn("--pin-core {}: the core is on NUMA node {}, {} on node {}: the run crosses nodes", core,
                 *placement.core_node, device, *placement.device_node);
  }
  return placement;
}

}  // namespace rdmakit
