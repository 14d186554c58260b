// rdma_smoke's control connection: each side reads frames (lib/net/sealed_frames) from the
// other, parses each as JSON (lib/base/untrusted_json) and reads the serving side's plan or a
// side's runs from it (lib/smoke/remote). The input is the byte stream as it arrives.
//
// Invariants: a frame reader takes no frame over its limit and nothing a keyed writer did not
// seal (what a keyed reader takes re-seals to the very bytes it took); a message it parses is
// nested no deeper than max_control_depth; a plan it accepts is within its ranges and plans
// cases or says why not; a run it accepts has the role asked for and re-reads as itself.

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_support.hpp"
#include "lib/base/error.hpp"
#include "lib/base/untrusted_json.hpp"
#include "lib/net/sealed_frames.hpp"
#include "lib/smoke/remote.hpp"

namespace {

using namespace rdmakit;

void read_message(const std::string& payload) {
  const auto message =
      fuzz::decoded([&] { return parse_untrusted_json(payload, smoke::max_control_depth, "the peer's message"); });
  if (!message || !message->is_object()) return;
  FUZZ_CHECK(json_nesting_depth(payload) <= smoke::max_control_depth);
  if (message->contains("plan")) {
    const auto peer = IpAddress::parse("10.0.0.2");
    if (const auto plan =
            fuzz::decoded([&] { return smoke::plan_from_request(message->at("plan"), "10.0.0.1", peer); })) {
      FUZZ_CHECK(plan->forward.timeout_s > 0 && plan->forward.timeout_s <= 3600);
      FUZZ_CHECK(plan->forward.tools.size() <= 64 && plan->forward.skip.size() <= 64);
      FUZZ_CHECK(plan->run_forward || plan->run_reverse);
      FUZZ_CHECK(IpAddress::parse(plan->forward.local_address) == peer);
      // Unknown tools, or none left: a UsageError the serving side sends back as its refusal.
      try {
        FUZZ_CHECK(smoke::peer_cases(*plan).size() <= 64);
      } catch (const UsageError&) {
      }
    }
  }
  const auto runs = message->find("runs");
  if (runs == message->end() || !runs->is_array()) return;
  for (const auto& item : *runs) {
    for (const char* role : {"server", "client"}) {
      if (const auto run = fuzz::decoded([&] { return smoke::tool_run_from_json(item, role); })) {
        FUZZ_CHECK(run->role == role && run->command.size() <= 64);
        FUZZ_CHECK(run->report.is_object() || run->report.is_null());
        const auto again = smoke::tool_run_from_json(smoke::to_json(*run), role);
        FUZZ_CHECK(again.command == run->command && again.outcome.err == run->outcome.err);
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string stream(reinterpret_cast<const char*>(data), size);
  // Unkeyed, with a small limit so that the fuzzer meets it.
  {
    sealed::FrameReader reader(std::nullopt, 4096, "the peer");
    std::string buffered = stream;
    for (;;) {
      const auto payload = fuzz::decoded([&] { return reader.take(buffered); });
      if (!payload || !*payload) break;
      FUZZ_CHECK((*payload)->size() <= 4096);
      read_message(**payload);
    }
  }
  // Keyed: whatever is taken is exactly what a writer with the key sealed, in order.
  {
    sealed::MessageKey key{};
    key.fill(0x5a);
    sealed::FrameReader reader(key, smoke::max_control_bytes, "the peer");
    sealed::FrameWriter writer(key);
    std::string buffered = stream;
    std::size_t consumed = 0;
    for (;;) {
      const auto before = buffered.size();
      const auto payload = fuzz::decoded([&] { return reader.take(buffered); });
      if (!payload || !*payload) break;
      const auto resealed = writer.seal(**payload);
      FUZZ_CHECK(stream.compare(consumed, before - buffered.size(), resealed) == 0);
      consumed += before - buffered.size();
    }
  }
  return 0;
}
