#include "lib/core/port_counters.hpp"

#include <fstream>
#include <system_error>

namespace rdmakit {

namespace {

// One number a file, as sysfs writes counters; files that hold anything else (or cannot be
// read: some need privileges) are left out.
void read_folder(const std::filesystem::path& folder, PortCounters& counters) {
  std::error_code error;
  for (std::filesystem::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
    if (!it->is_regular_file(error)) continue;
    std::ifstream in(it->path());
    std::uint64_t value = 0;
    if (in >> value) counters.insert_or_assign(it->path().filename().string(), value);
  }
}

}  // namespace

PortCounters read_port_counters(const std::string& device, unsigned port, const std::filesystem::path& root) {
  const auto port_folder = root / device / "ports" / std::to_string(port);
  PortCounters counters;
  read_folder(port_folder / "counters", counters);
  read_folder(port_folder / "hw_counters", counters);
  return counters;
}

CounterDeltas counter_deltas(const PortCounters& before, const PortCounters& after) {
  CounterDeltas deltas;
  for (const auto& [name, value] : after) {
    const auto old = before.find(name);
    if (old != before.end()) deltas[name] = static_cast<std::int64_t>(value - old->second);
  }
  return deltas;
}

}  // namespace rdmakit
