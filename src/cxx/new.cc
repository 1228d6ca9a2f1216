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
 * exists (the C library builds and works without one). */
#include <cstddef>
#include <new>
#include "hpmalloc.h"

#define HPM_CXX_API __attribute__((visibility("default")))

namespace {

/* One attempt: hpmalloc, aligned when align > 0. */
inline void *try_alloc(std::size_t size, std::size_t align) {
    return align ? hpm_memalign(align, size) : hpm_malloc(size);
}

/* The throwing new: retry after the new-handler, else throw bad_alloc. */
void *alloc_or_throw(std::size_t size, std::size_t align) {
    for (;;) {
        void *p = try_alloc(size, align);
        if (__builtin_expect(p != nullptr, 1)) return p;
        std::new_handler handler = std::get_new_handler();
        if (!handler) throw std::bad_alloc();
        handler();
    }
}

/* The nothrow new: as above, NULL instead of bad_alloc. */
void *alloc_or_null(std::size_t size, std::size_t align) noexcept {
    void *p = try_alloc(size, align);
    if (__builtin_expect(p != nullptr, 1)) return p;
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
