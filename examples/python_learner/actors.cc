// C++ actors feeding a Python learner with Python tensordict's own wire protocol
// (td/distributed/python_wire.h). Rank 0 is learner.py (Python, plain torch); ranks 1..kActors
// are C++ processes. Each round an actor receives the policy's parameters from the learner
// (recv_py: Python's td.send), rolls the policy out in a toy environment and sends the rollout
// back (send_py with pseudo-random tags from 1000: Python's td.recv(init_tag=1000,
// pseudo_rand=True)); the learner takes an SGD step on it.
//
//   // actor (C++)                                    # learner (Python)
//   dist::recv_py(pg, params, 0);                     params.send(pg, actor)
//   dist::send_py(pg, rollout, 0, dist::PythonWire()   rollout.recv(pg, actor, init_tag=1000,
//                     .init_tag(1000).pseudo_rand(true));            pseudo_rand=True)
//
// Run as is (bazel run //examples/python_learner), it starts the learner with /usr/bin/python3
// and forks the actors itself (Gloo over a FileStore in a temp dir), waits at most kDeadline for
// all of them and exits non-zero unless every process succeeded (the learner checks that its
// loss fell). Arguments: [path of learner.py] [path of python_peer.py].
#include <ATen/ATen.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "td/core/tensordict.h"
#include "td/distributed/python_wire.h"

namespace dist = td::distributed;

constexpr int kActors = 2;
constexpr int kRounds = 20;
constexpr int kSteps = 32;  // transitions per rollout
constexpr int kObs = 6;
constexpr int kAct = 2;
constexpr std::chrono::seconds kDeadline(180);

// The environment's expert: a fixed linear map the learner imitates.
at::Tensor Expert(const at::Tensor& obs) {
  at::Tensor w = at::arange(kObs * kAct, at::kFloat).view({kAct, kObs}).sin();
  return at::matmul(obs, w.t());
}

td::TensorDict Collect(const td::TensorDict& params, int actor, int round) {
  at::manual_seed(1000 * actor + round);
  at::Tensor obs = at::randn({kSteps, kObs});
  at::Tensor action =
      at::matmul(obs, params.get("weight").t()) + params.get("bias") + 0.1 * at::randn({kSteps, kAct});
  at::Tensor expert = Expert(obs);
  at::Tensor reward = -(action - expert).pow(2).sum(-1, /*keepdim=*/true);
  at::Tensor done = at::zeros({kSteps, 1}, at::kBool);
  done.index_put_({kSteps - 1}, true);
  return td::TensorDict({{"observation", obs},
                         {"action", action},
                         {"expert_action", expert},
                         {"next", td::TensorDict({{"reward", reward}, {"done", done}}, {kSteps})},
                         {"step", at::full({kSteps}, round, at::kLong)}},
                        {kSteps});
}

int RunActor(const dist::ProcessGroupPtr& pg) {
  const int rank = pg->getRank();
  td::TensorDict params({{"weight", at::zeros({kAct, kObs})}, {"bias", at::zeros({kAct})}}, {});
  for (int round = 0; round < kRounds; ++round) {
    dist::recv_py(pg, params, 0);
    td::TensorDict rollout = Collect(params, rank, round);
    dist::send_py(pg, rollout, 0, dist::PythonWire().init_tag(1000).pseudo_rand(true));
  }
  pg->barrier()->wait();
  std::cout << "actor " << rank << ": sent " << kRounds << " rollouts" << std::endl;
  return 0;
}

int main(int argc, char** argv) {
  const std::string learner = argc > 1 ? argv[1] : "examples/python_learner/learner.py";
  const std::string peer = argc > 2 ? argv[2] : "td/distributed/python_peer.py";
  char dir[] = "/tmp/td_python_learner_XXXXXX";
  if (::mkdtemp(dir) == nullptr) return 1;
  const std::string store = std::string(dir) + "/store";
  const int world = kActors + 1;
  std::fflush(stdout);
  std::vector<pid_t> pids;
  const pid_t parent = ::getpid();
  for (int r = 0; r < world; ++r) {
    pid_t pid = ::fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) std::_Exit(3);
      if (r == 0) {
        ::setenv("GLOO_SOCKET_IFNAME", "lo", 1);
        const std::vector<std::string> args = {
            "/usr/bin/python3",         learner,
            peer,                       store,
            std::to_string(world),      std::to_string(kRounds),
            std::to_string(kSteps),     std::to_string(kObs),
            std::to_string(kAct)};
        std::vector<char*> c;
        for (const auto& a : args) c.push_back(const_cast<char*>(a.c_str()));
        c.push_back(nullptr);
        ::execv(c[0], c.data());
        std::perror("execv /usr/bin/python3");
        std::_Exit(127);
      }
      int code = 1;
      try {
        code = RunActor(dist::init_process_group(dist::GroupOptions()
                                                     .rank(r)
                                                     .world_size(world)
                                                     .file_store_path(store)
                                                     .timeout(std::chrono::seconds(60))));
      } catch (const std::exception& e) {
        std::cerr << "actor " << r << ": " << e.what() << std::endl;
      }
      std::fflush(stdout);
      std::_Exit(code);
    }
    pids.push_back(pid);
  }
  // Wait for every process, at most kDeadline in all; kill the rest then.
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  int failed = 0;
  size_t left = pids.size();
  std::vector<bool> done(pids.size(), false);
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      int status = 0;
      if (done[i] || ::waitpid(pids[i], &status, WNOHANG) != pids[i]) continue;
      done[i] = true;
      --left;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::cerr << (i == 0 ? "learner" : "actor " + std::to_string(i)) << " failed" << std::endl;
        ++failed;
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (done[i]) continue;
        ::kill(pids[i], SIGKILL);
        ::waitpid(pids[i], nullptr, 0);
        std::cerr << "rank " << i << " killed at the deadline" << std::endl;
        ++failed;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return failed == 0 ? 0 : 1;
}
