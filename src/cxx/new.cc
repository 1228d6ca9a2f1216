/* new.cc: C++ operator new and delete on hpmalloc, the whole replaceable
 * family of C++17 (plain, array, nothrow, aligned, sized, sized-aligned:
 * 8 news and 12 deletes), so C++ programs that link or preload the
 * library get sized delete and aligned new from hpmalloc instead of
 * libstdc++'s wrappers around malloc and posix_memalign.
 *
 * Semantics are the standard's: a throwing new retries after calling the
 * installed new-handler and throws std::bad_alloc when there is none; a
 * nothrow new does the same but returns NULL where the throwing one would
 * throw (also when the handler throws bad_alloc). new(0) returns a unique
 * pointer. Only the public API (hpmalloc.h) is used: this file sits above
 * the allocator, like any user of it. Built only when a C++ compiler
 * exists (the C library builds and works without one); the library needs
 * no libstdc++ of its own (see the weak references below). */
#include <cstddef>
#include <cstdlib>
#include <new>
#include <unistd.h>
#include "hpmalloc.h"

#define HPM_CXX_API __attribute__((visibility("default")))

/* The C++ runtime is referenced weakly, so the library does not depend on
 * libstdc++: a C program that preloads hpmalloc does not map it (1.6 MiB
 * of RSS and about 2 ms of start-up per process here, docs/install.md). A C++ program
 * has libstdc++ loaded, and these resolve to it. Without it (a C process
 * calling operator new through dlsym, or a C++ plugin whose libstdc++ was
 * loaded RTLD_LOCAL) a failing throwing new cannot throw: it says so on
 * stderr and aborts. */
namespace std {
__attribute__((weak)) new_handler get_new_handler() noexcept;
}
__asm__(".weak _ZNSt9bad_allocD1Ev\n.weak _ZSt9terminatev\n.weak _ZTISt9bad_alloc\n.weak _ZTVSt9bad_alloc\n"
        ".weak __cxa_allocate_exception\n.weak __cxa_begin_catch\n.weak __cxa_end_catch\n.weak __cxa_throw\n"
        ".weak __gxx_personality_v0\n");

namespace {

[[noreturn]] void no_runtime(std::size_t size) {
    static const char msg[] = "hpmalloc: operator new: out of memory, and no C++ runtime loaded to throw std::bad_alloc\n";
    (void)size;
    if (write(2, msg, sizeof msg - 1) < 0) {}
    abort();
}

/* One attempt: hpmalloc, aligned when align > 0. */
inline void *try_alloc(std::size_t size, std::size_t align) {
    return align ? hpm_memalign(align, size) : hpm_malloc(size);
}

/* The throwing new: retry after the new-handler, else throw bad_alloc. */
void *alloc_or_throw(std::size_t size, std::size_t align) {
    for (;;) {
        void *p = try_alloc(size, align);
        if (__builtin_expect(p != nullptr, 1)) return p;
        if (!&std::get_new_handler) no_runtime(size);
        std::new_handler handler = std::get_new_handler();
        if (!handler) throw std::bad_alloc();
        handler();
    }
}

/* The nothrow new: as above, NULL instead of bad_alloc. */
void *alloc_or_null(std::size_t size, std::size_t align) noexcept {
    void *p = try_alloc(size, align);
    if (__builtin_expect(p != nullptr, 1)) return p;
    if (!&std::get_new_handler) return nullptr;   /* no C++ runtime: no handler either */
    try {
        return alloc_or_throw(size, align);
    } catch (const std::bad_alloc &) {
        return nullptr;
    }
}

inline std::size_t align_of(std::align_val_t a) { return static_cast<std::size_t>(a); }

}  // namespace

/* ---- new ---- */
HPM_CXX_API void *operator new(std::size_t n) { return alloc_or_throw(n, 0); }
HPM_CXX_API void *operator new[](std::size_t n) { return alloc_or_throw(n, 0); }
HPM_CXX_API void *operator new(std::size_t n, const std::nothrow_t &) noexcept { return alloc_or_null(n, 0); }
HPM_CXX_API void *operator new[](std::size_t n, const std::nothrow_t &) noexcept { return alloc_or_null(n, 0); }
HPM_CXX_API void *operator new(std::size_t n, std::align_val_t a) { return alloc_or_throw(n, align_of(a)); }
HPM_CXX_API void *operator new[](std::size_t n, std::align_val_t a) { return alloc_or_throw(n, align_of(a)); }
HPM_CXX_API void *operator new(std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
    return alloc_or_null(n, align_of(a));
}
HPM_CXX_API void *operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
    return alloc_or_null(n, align_of(a));
}

/* ---- delete ---- */
HPM_CXX_API void operator delete(void *p) noexcept { hpm_free(p); }
HPM_CXX_API void operator delete[](void *p) noexcept { hpm_free(p); }
HPM_CXX_API void operator delete(void *p, const std::nothrow_t &) noexcept { hpm_free(p); }
HPM_CXX_API void operator delete[](void *p, const std::nothrow_t &) noexcept { hpm_free(p); }
HPM_CXX_API void operator delete(void *p, std::size_t n) noexcept { hpm_free_sized(p, n); }
HPM_CXX_API void operator delete[](void *p, std::size_t n) noexcept { hpm_free_sized(p, n); }
HPM_CXX_API void operator delete(void *p, std::align_val_t) noexcept { hpm_free(p); }
HPM_CXX_API void operator delete[](void *p, std::align_val_t) noexcept { hpm_free(p); }
HPM_CXX_API void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept { hpm_free(p); }
HPM_CXX_API void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept { hpm_free(p); }
HPM_CXX_API void operator delete(void *p, std::size_t n, std::align_val_t a) noexcept {
    hpm_free_aligned_sized(p, align_of(a), n);
}
HPM_CXX_API void operator delete[](void *p, std::size_t n, std::align_val_t a) noexcept {
    hpm_free_aligned_sized(p, align_of(a), n);
}
