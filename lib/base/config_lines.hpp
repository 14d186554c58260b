#pragma once
// The line reader of the small configuration files the tools take (topology.conf, the
// two-column topology, rdma_pingmesh's pinglist): comments and blank lines gone, each entry
// numbered by its first line, so that a message points where the entry starts.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace rdmakit {

struct NumberedLine {
  std::string text;
  std::size_t number = 0;
};

// The non-blank lines of `text`, text after '#' dropped; `join_continued` glues a line ending
// in '\' to the next with nothing between, as slurm.conf's parser does.
std::vector<NumberedLine> entries_of(std::string_view text, bool join_continued);
// The line's words, split at blanks (spaces, tabs, CR).
std::vector<std::string_view> words_in(std::string_view line);
// The whole file; UsageError "PATH: cannot read it" when it cannot be (a folder included).
std::string read_config_text(const std::string& path);

}  // namespace rdmakit
