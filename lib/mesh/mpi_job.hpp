#pragma once
// The Job of rdma_mesh's processes over MPI: mpirun or srun starts them, MPI_Init joins
// them, and the collectives below are all the tool asks of MPI. Every measured byte goes
// over rdma_cm, never through MPI.

#include <string>
#include <vector>

#include "lib/tool/job.hpp"

namespace rdmakit {

class MpiJob final : public Job {
 public:
  MpiJob(int& argc, char**& argv) : argc_(argc), argv_(argv) {}
  MpiJob(const MpiJob&) = delete;
  MpiJob& operator=(const MpiJob&) = delete;
  MpiJob(MpiJob&&) = delete;
  MpiJob& operator=(MpiJob&&) = delete;
  // MPI_Finalize, when joined.
  ~MpiJob() override;

  void join() override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string host() const override { return host_; }
  void barrier() override;
  std::vector<std::string> all_gather(const std::string& mine) override;
  std::string broadcast(const std::string& text) override;

 private:
  int& argc_;
  char**& argv_;
  bool joined_ = false;
  int rank_ = 0;
  int size_ = 1;
  std::string host_;
};

}  // namespace rdmakit
