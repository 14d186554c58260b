// Stands in for libFuzzer where it is not available (the gcc builds): runs
// LLVMFuzzerTestOneInput once over every file named, or found in a directory named, so
// ctest replays the checked-in corpus and past crashers under whatever sanitizers the
// build has. Fails when it finds no input at all, so a moved corpus cannot pass silently.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;

bool replay(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::cerr << "cannot read " << file << "\n";
    return false;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // An allocation of exactly the input's size, as libFuzzer makes, so ASan sees any read past it.
  const auto copy = std::make_unique<std::uint8_t[]>(bytes.size());
  std::transform(bytes.begin(), bytes.end(), copy.get(), [](char c) { return static_cast<std::uint8_t>(c); });
  std::cerr << "replaying " << file.string() << "\n";
  LLVMFuzzerTestOneInput(copy.get(), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t replayed = 0;
  for (int i = 1; i < argc; ++i) {
    const fs::path path(argv[i]);
    std::vector<fs::path> files;
    if (fs::is_directory(path)) {
      for (const auto& entry : fs::directory_iterator(path)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());
    } else {
      files.push_back(path);
    }
    for (const auto& file : files) {
      if (!replay(file)) return 1;
      ++replayed;
    }
  }
  std::cerr << "replayed " << replayed << " inputs\n";
  return replayed > 0 ? 0 : 1;
}
