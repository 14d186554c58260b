#pragma once
// A tool whose processes run as one job (rdma_mesh, started by mpirun or srun) sees the
// others only through this: who it is, a barrier, and exchanges of text. The MPI side is
// lib/mpi; this layer and the sessions above it need no MPI headers.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace rdmakit {

class Job {
 public:
  Job() = default;
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;
  Job(Job&&) = delete;
  Job& operator=(Job&&) = delete;
  virtual ~Job() = default;

  // Joins the job (MPI_Init). Called once, after the command line is parsed, so that
  // --help and --bash-completion work outside a job.
  virtual void join() = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The host this process runs on, as the job knows it.
  virtual std::string host() const = 0;
  virtual void barrier() = 0;
  // Every process's `mine`, in rank order, on every process.
  virtual std::vector<std::string> all_gather(const std::string& mine) = 0;
  // Rank 0's `text` on every process.
  virtual std::string broadcast(const std::string& text) = 0;
};

// The processes of a job measure together only with the same settings: throws UsageError,
// on every process alike, naming the first rank whose `arguments` (the report's) differ
// from rank 0's in a key not in `may_differ` (a rank's own address, say).
void require_same_arguments(Job& job, const nlohmann::json& arguments, const std::vector<std::string>& may_differ);

}  // namespace rdmakit
