// NOTE [ SIGBUS guard ] in td/core/mapped_copy.h.
#include "td/core/mapped_copy.h"

#include <setjmp.h>
#include <signal.h>

#include <mutex>

namespace td::internal {
namespace {

// The jump buffer of the guarded copy this thread is in, or null. Initial-exec TLS: reading it
// from the signal handler never allocates (a dynamic TLS block may be allocated on first use).
__attribute__((tls_model("initial-exec"))) thread_local sigjmp_buf* t_jump = nullptr;

struct sigaction g_previous;

void OnSigbus(int sig, siginfo_t* info, void* context) {
  if (sigjmp_buf* jump = t_jump) {
    t_jump = nullptr;
    siglongjmp(*jump, 1);
  }
  // Not in a guarded copy: what would have happened without us.
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if ((g_previous.sa_flags & SA_SIGINFO) == 0 && g_previous.sa_handler != SIG_DFL &&
      g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  // The default action: restore it; the faulting access runs again and ends the process.
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGBUS, &dfl, nullptr);
}

void InstallOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa = {};
    sa.sa_sigaction = OnSigbus;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_previous);
  });
}

}  // namespace

bool RunGuardedCopy(void (*fn)(void*), void* arg) {
  InstallOnce();
  sigjmp_buf jump;
  sigjmp_buf* const outer = t_jump;
  if (sigsetjmp(jump, /*savemask=*/1) != 0) {
    t_jump = outer;
    return false;
  }
  t_jump = &jump;
  fn(arg);
  t_jump = outer;
  return true;
}

}  // namespace td::internal
