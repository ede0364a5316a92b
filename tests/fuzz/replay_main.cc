// A libFuzzer target without libFuzzer: the test suite's default (gcc) build and its
// sanitizer builds link each target with this main, so every run of the suite feeds every
// decoder of outside input its checked-in corpus plus a bounded number of deterministic
// mutations of it (bit flips, interesting bytes, erased, repeated and inserted ranges,
// splices of two inputs). Coverage-guided fuzzing stays with libFuzzer: tests/fuzz/run.sh.
//
//   fuzz_requests_replay [--mutations N] [--seed S] CORPUS_DIR_OR_FILE...
//
// An input that crashes the target is written to ./<program>.crash first (from the signal
// or sanitizer death callback); replay it with the libFuzzer build or this binary.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);
// Present in sanitizer builds (ASan/UBSan/TSan runtimes), absent otherwise.
extern "C" __attribute__((weak)) void __sanitizer_set_death_callback(void (*callback)());

namespace {

// The input being run, for the crash handlers (plain globals: read from a signal handler).
const uint8_t* g_current_data = nullptr;
size_t g_current_size = 0;
char g_crash_path[512] = "fuzz.crash";

void SaveCurrentInput() {
  const int fd = open(g_crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  size_t off = 0;
  while (off < g_current_size) {
    const ssize_t n = write(fd, g_current_data + off, g_current_size - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  close(fd);
  const char note[] = "\n*** fuzz replay: the crashing input was written to the .crash file\n";
  (void)!write(2, note, sizeof note - 1);
}

void OnFatalSignal(int sig) {
  SaveCurrentInput();
  signal(sig, SIG_DFL);
  raise(sig);
}

void Run(const std::string& input) {
  g_current_data = reinterpret_cast<const uint8_t*>(input.data());
  g_current_size = input.size();
  LLVMFuzzerTestOneInput(g_current_data, g_current_size);
}

std::string Mutate(std::string s, const std::vector<std::string>& corpus, std::mt19937_64& rng) {
  auto pick = [&rng](size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng() % n); };
  const int steps = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < steps; ++i) {
    switch (rng() % 7) {
      case 0:  // flip a bit
        if (!s.empty()) s[pick(s.size())] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1: {  // an interesting byte
        static constexpr unsigned char kBytes[] = {0x00, 0x01, 0x7f, 0x80, 0xff, '0', '-', '\n'};
        if (!s.empty()) s[pick(s.size())] = static_cast<char>(kBytes[rng() % sizeof kBytes]);
        break;
      }
      case 2: {  // erase a range
        if (s.empty()) break;
        const size_t at = pick(s.size());
        s.erase(at, 1 + pick(s.size() - at));
        break;
      }
      case 3: {  // repeat a range
        if (s.empty() || s.size() > 4096) break;
        const size_t at = pick(s.size());
        const size_t len = 1 + pick(std::min<size_t>(s.size() - at, 64));
        s.insert(at, s.substr(at, len));
        break;
      }
      case 4: {  // insert random bytes
        std::string bytes(1 + pick(8), '\0');
        for (auto& c : bytes) c = static_cast<char>(rng());
        s.insert(pick(s.size() + 1), bytes);
        break;
      }
      case 5: {  // splice: our head, another input's tail
        const std::string& other = corpus[pick(corpus.size())];
        s = s.substr(0, pick(s.size() + 1)) + other.substr(pick(other.size() + 1));
        break;
      }
      default:  // truncate
        s.resize(pick(s.size() + 1));
        break;
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  long mutations = 200;
  uint64_t seed = 1;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--mutations" && i + 1 < argc) {
      mutations = std::atol(argv[++i]);
    } else if (arg == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else {
      paths.push_back(arg);
    }
  }
  std::snprintf(g_crash_path, sizeof g_crash_path, "%s.crash",
                std::filesystem::path(argv[0]).filename().c_str());
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) signal(sig, OnFatalSignal);
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(SaveCurrentInput);
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);

  std::vector<std::string> corpus;
  for (const auto& p : paths) {
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::directory_iterator(p)) files.push_back(e.path());
    } else {
      files.emplace_back(p);
    }
    std::sort(files.begin(), files.end());  // the same order, so the same mutations, each run
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  }
  if (corpus.empty()) {
    std::fprintf(stderr, "no corpus inputs in the paths given\n");
    return 2;
  }
  for (const auto& input : corpus) Run(input);
  std::mt19937_64 rng(seed);
  long runs = 0;
  for (const auto& input : corpus) {
    for (long m = 0; m < mutations; ++m, ++runs) Run(Mutate(input, corpus, rng));
  }
  std::fprintf(stderr,
               "fuzz replay: %zu corpus inputs and %ld mutations of them (seed %llu): no crash\n",
               corpus.size(), runs, static_cast<unsigned long long>(seed));
  return 0;
}
