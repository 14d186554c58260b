// What a job's processes must agree on before they measure together (lib/tool/job).

#include "lib/tool/job.hpp"

#include <gtest/gtest.h>

#include "lib/base/error.hpp"

namespace rdmakit {
namespace {

// A job whose other ranks sent `others` (rank 1 on; each has dropped its own keys that may
// differ, as require_same_arguments does before it sends); this process is rank 0.
class RecordedJob final : public Job {
 public:
  explicit RecordedJob(std::vector<nlohmann::json> others) : others_(std::move(others)) {}
  void join() override {}
  int rank() const override { return 0; }
  int size() const override { return static_cast<int>(others_.size()) + 1; }
  std::string host() const override { return "here"; }
  void barrier() override {}
  std::vector<std::string> all_gather(const std::string& mine) override {
    std::vector<std::string> all{mine};
    for (const auto& other : others_) all.push_back(other.dump());
    return all;
  }
  std::string broadcast(const std::string& text) override { return text; }

 private:
  std::vector<nlohmann::json> others_;
};

const nlohmann::json mine = {{"size", 4096}, {"tests", {"bw"}}, {"bind", "10.0.0.1"}};

TEST(RequireSameArguments, OwnAddressesMayDiffer) {
  RecordedJob job(std::vector<nlohmann::json>{{{"size", 4096}, {"tests", {"bw"}}}});
  EXPECT_NO_THROW(require_same_arguments(job, mine, {"bind"}));
}

TEST(RequireSameArguments, NamesTheFirstRankAndTheKeysThatDiffer) {
  RecordedJob job(
      std::vector<nlohmann::json>{{{"size", 4096}, {"tests", {"bw"}}}, {{"size", 65536}, {"tests", {"bw", "lat"}}}});
  try {
    require_same_arguments(job, mine, {"bind"});
    FAIL() << "no UsageError";
  } catch (const UsageError& error) {
    EXPECT_STREQ(error.what(), "rank 2's options differ from rank 0's in size, tests: every rank must measure alike");
  }
}

TEST(RequireSameArguments, AKeyOnlyOneSideHasDiffers) {
  RecordedJob job(std::vector<nlohmann::json>{{{"size", 4096}, {"tests", {"bw"}}, {"extra", true}}});
  EXPECT_THROW(require_same_arguments(job, mine, {"bind"}), UsageError);
}

}  // namespace
}  // namespace rdmakit
