#include "lib/send_bw/perftest_flags.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "lib/base/error.hpp"
#include "lib/tool/cli_checks.hpp"

namespace rdmakit {

namespace {

// perftest's flags that send_bw does not have, and why (or what to use instead). `names` in
// CLI11's form; `valued`: the flag takes a value (so that the value is not read as the server).
struct Absent {
  const char* names;
  bool valued;
  const char* why;
};

constexpr Absent absent_flags[] = {
    {"-f,--margin", true, "rows measure the whole run; -D runs for a time"},
    {"-g,--mcg", false, "for multicast use mckey"},
    {"-M,--MGID", true, "for multicast use mckey"},
    {"-l,--post_list", true, "one work request per post"},
    {"--recv_post_list", true, "one receive per post"},
    {"-L,--hop_limit", true, "rdma_cm sets the hop limit from the route"},
    {"-O,--dualport", false, "one port per run; run one send_bw per port"},
    {"-Q,--cq-mod", true, "one request in -t/2 (at most 64) is signalled; the report's test.signal_every"},
    {"-r,--rx-depth", true, "the server posts -t receives"},
    {"-S,--sl", true, "on RoCE the service level follows --tclass"},
    {"-V", false, "use --version"},
    {"-w,--limit_bw", true, "use --expect-bw (MiB/s)"},
    {"-y,--limit_msgrate", true, "use --expect-rate (Mpps)"},
    {"-W,--report-counters", true, "use --counters (every counter of the port)"},
    {"-X,--vector", true, "the completion vector is the device's first"},
    {"--dlid", true, "rdma_cm resolves the path"},
    {"--dont_xchg_versions", false, "the hello in rdma_connect always carries its version"},
    {"--force-link", true, "the link type is the device's"},
    {"--inline_recv", true, "receives are never inline"},
    {"--use-srq", false, "each queue pair has its own receive queue"},
    {"--ipv6", false, "the address family follows the address"},
    {"--mmap", true, "buffers are anonymous memory (--use-hugepages for huge pages)"},
    {"--mmap-offset", true, "buffers are anonymous memory"},
    {"--mr_per_qp", false, "each queue pair registers its own buffers already"},
    {"--odp", false, "buffers are registered up front"},
    {"--output", true, "--json gives every figure to a script"},
    {"--use_old_post_send", false, "send_bw posts with ibv_post_send"},
    {"--pkey_index", true, "rdma_cm chooses the partition key"},
    {"--report-both", false, "-b reports both directions in one row"},
    {"--report-per-port", false, "one port per run"},
    {"--reversed", false, "the client sends; swap the hosts to reverse"},
    {"--wait_destroy", true, "resources are freed at the end of the run"},
    {"--burst_size", true, "the pacing of --rate-limit spreads messages evenly"},
    {"--typical_pkt_size", true, "the pacing of --rate-limit is in software"},
    {"--log_dci_streams", true, "-c DC is not supported (RC or UD)"},
    {"--log_active_dci_streams", true, "-c DC is not supported (RC or UD)"},
    {"--aes_xts", false, "no crypto offload"},
    {"--encrypt_on_tx", false, "no crypto offload"},
    {"--sig_before", false, "no crypto offload"},
    {"--aes_block_size", true, "no crypto offload"},
    {"--data_enc_keys_number", true, "no crypto offload"},
    {"--kek_path", true, "no crypto offload"},
    {"--credentials_path", true, "no crypto offload"},
    {"--data_enc_key_app_path", true, "no crypto offload"},
};

// perftest's flags whose job is done already here: accepted, with a note.
constexpr std::pair<const char*, const char*> ignored_flags[] = {
    {"-F,--CPU-freq", "-F: send_bw gives no CPU-frequency warning to silence"},
    {"-R,--rdma_cm", "-R: send_bw connects through rdma_cm (unless --oob)"},
    {"-z,--com_rdma_cm", "-z: send_bw connects through rdma_cm (unless --oob)"},
    {"-N,--noPeak", "-N: the peak costs nothing to measure; it stays in the rows"},
    {"--perform_warm_up", "--perform_warm_up: every size is warmed up (--warmup)"},
};

// The flag as the user would have typed it: its first name.
std::string first_name(const CLI::Option& option) {
  const auto& shorts = option.get_snames();
  return shorts.empty() ? "--" + option.get_lnames().front() : "-" + shorts.front();
}

}  // namespace

CLI::Validator connection_type() {
  return CLI::Validator(
      [](std::string& text) {
        std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::toupper(c); });
        if (text == "RC" || text == "UD") return std::string();
        return fmt::format("{}: send_bw runs RC or UD (perftest's XRC, UC, DC and SRD are not in send_bw)", text);
      },
      "RC|UD", "connection type");
}

PerftestFlags::PerftestFlags(CLI::App& app, BwOptions& o) {
  constexpr const char* hidden = "";  // CLI11's group for options --help leaves out
  for (const auto& flag : absent_flags) {
    auto* option = flag.valued ? app.add_option(flag.names)->type_name("VALUE") : app.add_flag(flag.names);
    refused_.push_back({option->group(hidden), flag.why});
  }
  for (const auto& [names, note] : ignored_flags) ignored_.emplace_back(app.add_flag(names)->group(hidden), note);
  rate_limit_ = app.add_option("--rate_limit", rate_limit_gbits_)->check(FiniteNumber())->group(hidden);
  rate_limit_type_ = app.add_option("--rate_limit_type", rate_limit_type_value_)->group(hidden);
  out_json_ = app.add_flag("--out_json")->group(hidden);
  run_infinitely_ = app.add_flag("--run_infinitely", o.run_forever)->group(hidden);
}

namespace {

// The notes of the accepted no-op flags given; perftest's -R and -z say rdma_cm, which is
// what --oob leaves out, so with it they are a usage error.
std::vector<std::string> accepted_notes(const std::vector<std::pair<CLI::Option*, std::string>>& ignored,
                                        bool out_of_band) {
  std::vector<std::string> notes;
  for (const auto& [option, note] : ignored) {
    if (option->count() == 0) continue;
    const auto name = first_name(*option);
    if (out_of_band && (name == "-R" || name == "-z")) {
      throw UsageError(fmt::format(
          "{} and --oob: perftest's {} is its rdma_cm mode, --oob its default TCP exchange; give one", name, name));
    }
    notes.emplace_back(note);
  }
  return notes;
}

}  // namespace

std::vector<std::string> PerftestFlags::apply(BwOptions& o, bool& duration_given, bool iterations_given,
                                              bool rate_units_given) const {
  for (const auto& [option, why] : refused_) {
    if (option->count() > 0) {
      throw UsageError(fmt::format("{}: perftest's flag is not in send_bw: {}", first_name(*option), why));
    }
  }
  if (rate_limit_type_->count() > 0 && rate_limit_type_value_ != "SW") {
    throw UsageError(fmt::format("--rate_limit_type {}: send_bw paces in software only (SW)", rate_limit_type_value_));
  }
  auto notes = accepted_notes(ignored_, o.settings.out_of_band);
  if (rate_limit_->count() > 0) {
    if (o.rate_limit > 0) throw UsageError("--rate_limit and --rate-limit: give one");
    o.rate_limit = rate_limit_gbits_;
    // perftest's unit for its own spelling is Gb/s.
    if (!rate_units_given) o.settings.rate_units = 'g';
  }
  o.out_json = out_json_->count() > 0;
  if (o.run_forever && !o.settings.server.empty()) {
    if (o.settings.test == bw::Test::latency) throw UsageError("--run_infinitely runs a bandwidth test, not --lat");
    if (iterations_given) throw UsageError("--run_infinitely runs until stopped: -n does not apply");
    if (o.measure.sweep) throw UsageError("--run_infinitely runs one size: -a does not apply");
    // perftest's -D is the interval of a run without end.
    o.interval_s = duration_given ? o.measure.duration_s : perftest_default_interval_s;
    o.measure.duration_s = run_forever_s;
    duration_given = true;
  }
  return notes;
}

}  // namespace rdmakit
