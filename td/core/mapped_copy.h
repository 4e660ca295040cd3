// Copies out of memory-mapped files that turn SIGBUS into a return value.
//
// NOTE [ SIGBUS guard ]
// Reading a page of a mapped file past the file's end (the file shrank after it was mapped:
// another process truncated it) is not an error the read can return: the kernel sends SIGBUS to
// the reading thread, and the process dies. The library's own copies out of mapped files
// (td::data::BatchLoader's gathers from a memory-mapped TensorDict, load_consolidated's copies
// of unaligned leaves) run inside GuardedCopy, which turns that SIGBUS into `false`, and the
// caller throws a named error instead:
//  * a SIGBUS handler is installed once per process (the first GuardedCopy), remembering the
//    handler it replaces;
//  * each thread has its own jump buffer (thread_local, set only while that thread is inside
//    GuardedCopy); the handler jumps back (siglongjmp) when the faulting thread is inside a
//    guarded copy, and otherwise hands the signal to the previous handler (or, for the default
//    action, restores it and returns, so the access faults again and the process ends as it
//    would have without us);
//  * because the jump skips whatever the copy was doing, the guarded code must be plain loads
//    and stores: memcpy, loops over raw pointers; no allocation, lock, LibTorch call or object
//    with a destructor (those would be skipped, leaking memory or leaving a lock held).
// Only the thread that runs the copy is protected: a copy handed to other threads (an ATen
// kernel's intra-op parallelism) is not, which is why the guarded copies are our own loops.
// Direct access to a mapped tensor by the caller (t.sum(), t.clone(), printing) is never
// guarded; see docs/memmap.md ("After a truncation").
#pragma once

#include <type_traits>

namespace td::internal {

// Runs fn(arg) on the calling thread under the SIGBUS guard (see the NOTE above for what fn may
// do). Returns true when it finished, false when a SIGBUS ended it part-way (what it wrote
// until then is partial). Guards nest.
bool RunGuardedCopy(void (*fn)(void*), void* arg);

// The same with any callable (called once, by reference).
//   bool ok = td::internal::GuardedCopy([&] { std::memcpy(dst, mapped, n); });
template <class F>
bool GuardedCopy(F&& f) {
  return RunGuardedCopy([](void* p) { (*static_cast<std::remove_reference_t<F>*>(p))(); },
                        static_cast<void*>(&f));
}

}  // namespace td::internal
