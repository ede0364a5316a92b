// A feed-server process in cluster mode for the cluster fault tests: started, SIGKILLed,
// paused (SIGSTOP) and resumed, stopped and restarted with the same node id, port and data
// directory, so that a restart is the same node coming back.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <deque>
#include <fstream>
#include <string>
#include <vector>

extern char** environ;

namespace feed::cluster_test {

class NodeProcess {
 public:
  NodeProcess(std::string binary, std::string node_id, int port, std::string data_dir,
              std::vector<std::string> cluster_args)
      : binary_(std::move(binary)),
        node_id_(std::move(node_id)),
        address_("127.0.0.1:" + std::to_string(port)),
        data_dir_(std::move(data_dir)),
        cluster_args_(std::move(cluster_args)) {}
  NodeProcess(const NodeProcess&) = delete;
  NodeProcess& operator=(const NodeProcess&) = delete;
  ~NodeProcess() { Kill(); }

  bool Start() {
    std::vector<std::string> args = {binary_,  "--cluster-node-id", node_id_,  "--listen",
                                     address_, "--data-dir",        data_dir_, "--metrics-listen",
                                     "",       "--log-rpcs",        "false",   "--log-format",
                                     "json"};
    args.insert(args.end(), cluster_args_.begin(), cluster_args_.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // Its log goes to <data_dir>.log (appended across restarts).
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    const std::string log = data_dir_ + ".log";
    posix_spawn_file_actions_addopen(&files, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&files, 1, 2);
    const bool ok = posix_spawn(&pid_, argv[0], &files, nullptr, argv.data(), environ) == 0;
    posix_spawn_file_actions_destroy(&files);
    if (!ok) pid_ = 0;
    return ok;
  }
  // SIGKILL: the node vanishes without a word to the group.
  void Kill() { Signal(SIGKILL, /*reap=*/true); }
  // SIGTERM: the graceful stop (static membership: it still does not leave the group).
  void Terminate() { Signal(SIGTERM, /*reap=*/true); }
  void Pause() { Signal(SIGSTOP, false); }
  void Resume() { Signal(SIGCONT, false); }
  bool running() const { return pid_ > 0; }
  // True once the process ended by itself (e.g. it could not bind its port); reaps it.
  bool Exited() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
    pid_ = 0;
    return true;
  }
  // The last lines of its log, for a failing test's output (CI keeps no files).
  std::string LogTail(size_t lines) const {
    std::ifstream in(log_file());
    std::deque<std::string> tail;
    for (std::string line; std::getline(in, line);) {
      tail.push_back(std::move(line));
      if (tail.size() > lines) tail.pop_front();
    }
    std::string out;
    for (const auto& line : tail) out += "  " + line + "\n";
    return out;
  }
  const std::string& address() const { return address_; }
  const std::string& node_id() const { return node_id_; }
  std::string log_file() const { return data_dir_ + ".log"; }

 private:
  void Signal(int sig, bool reap) {
    if (pid_ <= 0) return;
    kill(pid_, sig);
    if (reap) {
      waitpid(pid_, nullptr, 0);
      pid_ = 0;
    }
  }

  const std::string binary_, node_id_, address_, data_dir_;
  const std::vector<std::string> cluster_args_;
  pid_t pid_ = 0;
};

}  // namespace feed::cluster_test
