#include "lib/send_bw/port_counters.hpp"

#include <fstream>
#include <memory>
#include <system_error>
#include <utility>

namespace rdmakit {

namespace {

// hw_counters/lifespan: a setting, not a counter.
constexpr const char* lifespan_file = "lifespan";

std::filesystem::path port_folder(const std::filesystem::path& root, const std::string& device, unsigned port) {
  return root / device / "ports" / std::to_string(port);
}

// One number a file, as sysfs writes counters; files that hold anything else (or cannot be
// read: some need privileges) are left out.
void read_folder(const std::filesystem::path& folder, PortCounters& counters) {
  std::error_code error;
  for (std::filesystem::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
    if (!it->is_regular_file(error) || it->path().filename() == lifespan_file) continue;
    std::ifstream in(it->path());
    std::uint64_t value = 0;
    if (in >> value) counters.insert_or_assign(it->path().filename().string(), value);
  }
}

}  // namespace

PortCounters read_port_counters(const std::string& device, unsigned port, const std::filesystem::path& root) {
  const auto folder = port_folder(root, device, port);
  PortCounters counters;
  read_folder(folder / "counters", counters);
  read_folder(folder / "hw_counters", counters);
  return counters;
}

std::chrono::milliseconds counters_lifespan(const std::string& device, unsigned port,
                                            const std::filesystem::path& root) {
  std::ifstream in(port_folder(root, device, port) / "hw_counters" / lifespan_file);
  long long milliseconds = 0;
  return in >> milliseconds && milliseconds > 0 ? std::chrono::milliseconds(milliseconds)
                                                : std::chrono::milliseconds(0);
}

CounterDeltas counter_deltas(const PortCounters& before, const PortCounters& after) {
  CounterDeltas deltas;
  for (const auto& [name, value] : after) {
    const auto old = before.find(name);
    if (old != before.end()) deltas[name] = static_cast<std::int64_t>(value - old->second);
  }
  constexpr std::int64_t bytes_per_word = 4;
  for (const auto& [words, bytes] :
       {std::pair{"port_xmit_data", "port_xmit_bytes"}, {"port_rcv_data", "port_rcv_bytes"}}) {
    if (const auto found = deltas.find(words); found != deltas.end()) deltas[bytes] = found->second * bytes_per_word;
  }
  return deltas;
}

std::function<bool()> counters_moved(const std::string& device, unsigned port) {
  auto last = std::make_shared<PortCounters>(read_port_counters(device, port));
  if (last->empty()) return {};
  return [device, port, last] {
    auto now = read_port_counters(device, port);
    const bool moved = now != *last;
    *last = std::move(now);
    return moved;
  };
}

}  // namespace rdmakit
