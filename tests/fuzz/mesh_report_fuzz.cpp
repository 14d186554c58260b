// rdma_mesh --analyse reads a saved report: a file that may come from anywhere. Whatever it
// holds, the reader takes it or refuses it with a usage error naming the file, never
// allocating what the file does not justify; what it takes is a table whose every direction
// fits its ranks. The input is the file.

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "fuzz_support.hpp"
#include "lib/base/error.hpp"
#include "lib/mesh/mesh_report_read.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rdmakit;
  std::istringstream in(std::string(fuzz::as_text(data, size)));
  try {
    const auto saved = mesh::read_mesh_report(in, "report.json");
    const auto& table = saved.table;
    FUZZ_CHECK(table.ranks >= 0 && table.ranks <= 16384);
    FUZZ_CHECK(table.tests.size() <= 3);
    for (const auto& matrix : table.tests) {
      FUZZ_CHECK(matrix.cell_count() == static_cast<std::size_t>(table.ranks) * static_cast<std::size_t>(table.ranks));
      for (const auto& failure : matrix.failures) {
        FUZZ_CHECK(failure.source >= 0 && failure.source < table.ranks);
        FUZZ_CHECK(failure.destination >= 0 && failure.destination < table.ranks);
      }
    }
  } catch (const UsageError& error) {
    FUZZ_CHECK(std::string(error.what()).starts_with("--analyse report.json: "));
  }
  return 0;
}
