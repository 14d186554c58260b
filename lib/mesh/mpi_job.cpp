#include "lib/mesh/mpi_job.hpp"

#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <numeric>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

namespace rdmakit {

namespace {

// MPI's default handler aborts the job on any error, which is what a failed collective
// should do (a rank that cannot take part would leave the others waiting); this turns the
// code into text first for the one call that returns before that handler is set.
void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw std::runtime_error(fmt::format("{}: {}", call, std::string(text, static_cast<std::size_t>(length))));
}

}  // namespace

MpiJob::~MpiJob() {
  if (joined_) MPI_Finalize();
}

void MpiJob::join() {
  if (joined_) return;
  check_mpi(MPI_Init(&argc_, &argv_), "MPI_Init");
  joined_ = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  // Under Slurm the report names hosts as Slurm does (its node name, which squeue, sinfo
  // and topology.conf use), and that need not be the host's own name.
  if (const char* node = std::getenv("SLURMD_NODENAME"); node != nullptr && *node != '\0') {
    host_ = node;
    return;
  }
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(name, &length);
  host_.assign(name, static_cast<std::size_t>(length));
}

// Open MPI's blocking collectives spin while they wait. A rank that sits out a round (or
// waits for the slowest pair) would then take a core from the ranks that are measuring on
// the same node, so the wait polls a non-blocking barrier and sleeps between polls.
void MpiJob::barrier() {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  int done = 0;
  for (MPI_Test(&request, &done, MPI_STATUS_IGNORE); done == 0; MPI_Test(&request, &done, MPI_STATUS_IGNORE)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::vector<std::string> MpiJob::all_gather(const std::string& mine) {
  barrier();  // every rank has arrived: the exchange below does not spin for long
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<std::size_t>(size_));
  MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::vector<int> offsets(lengths.size());
  std::exclusive_scan(lengths.begin(), lengths.end(), offsets.begin(), 0);
  std::string all(static_cast<std::size_t>(offsets.back() + lengths.back()), '\0');
  MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, MPI_COMM_WORLD);
  std::vector<std::string> texts;
  texts.reserve(lengths.size());
  for (std::size_t rank = 0; rank < lengths.size(); ++rank) {
    texts.push_back(all.substr(static_cast<std::size_t>(offsets[rank]), static_cast<std::size_t>(lengths[rank])));
  }
  return texts;
}

std::string MpiJob::broadcast(const std::string& text) {
  barrier();
  int length = static_cast<int>(text.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string received = rank_ == 0 ? text : std::string(static_cast<std::size_t>(length), '\0');
  MPI_Bcast(received.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
  return received;
}

}  // namespace rdmakit
