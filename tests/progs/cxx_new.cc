/* cxx_new.cc: C++ operator new/delete on hpmalloc. Built twice: plain
 * (run under LD_PRELOAD) and linked with -lhpmalloc; tests/scripts/cxx_new.sh
 * runs both. It reaches the allocator's API through dlsym so one source
 * serves both ways. Checks, for each of the 8 news and 12 deletes: the
 * block comes from hpmalloc (hpm_range gives its base), aligned forms keep
 * their alignment, every delete gives the bytes back (bytes_in_use returns
 * to where it was); new(0) gives distinct pointers; an allocation that
 * cannot succeed calls the new-handler until it is removed, then throws
 * std::bad_alloc; nothrow new returns NULL, also when the handler throws;
 * and operator new itself lies in the same object as hpm_range (the
 * library, or the program when linked with libhpmalloc.a). */
#include <dlfcn.h>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <vector>
#include "hpmalloc.h"
#include "testhelper.h"

static bool (*range_fn)(const void *, void **, size_t *);
static void (*stats_fn)(hpm_stats_t *);

static uint64_t in_use_bytes() {
    hpm_stats_t s;
    stats_fn(&s);
    return s.bytes_in_use;
}

static bool from_hpmalloc(const void *p) {
    void *base = nullptr;
    size_t size = 0;
    return range_fn(p, &base, &size) && base == p && size > 0;
}

static const size_t kSize = 3000;
static const std::align_val_t kAlign{4096};

static void check_block(void *p, bool aligned, const char *what) {
    CHECK(p != nullptr, "%s returned NULL", what);
    CHECK(from_hpmalloc(p), "%s: %p is not an hpmalloc block", what, p);
    if (aligned) CHECK((uintptr_t)p % 4096 == 0, "%s: %p not 4096-aligned", what, p);
    static_cast<char *>(p)[kSize - 1] = 1;
}

/* Each new form paired with one delete form, the pair's bytes returned. */
static void test_pairs() {
    struct pair_t { const char *name; bool aligned; void *(*make)(); void (*drop)(void *); };
    const pair_t pairs[] = {
        {"new/delete", false, [] { return ::operator new(kSize); }, [](void *p) { ::operator delete(p); }},
        {"new[]/delete[]", false, [] { return ::operator new[](kSize); }, [](void *p) { ::operator delete[](p); }},
        {"new nothrow/delete nothrow", false, [] { return ::operator new(kSize, std::nothrow); },
         [](void *p) { ::operator delete(p, std::nothrow); }},
        {"new[] nothrow/delete[] nothrow", false, [] { return ::operator new[](kSize, std::nothrow); },
         [](void *p) { ::operator delete[](p, std::nothrow); }},
        {"new/delete sized", false, [] { return ::operator new(kSize); }, [](void *p) { ::operator delete(p, kSize); }},
        {"new[]/delete[] sized", false, [] { return ::operator new[](kSize); },
         [](void *p) { ::operator delete[](p, kSize); }},
        {"new aligned/delete aligned", true, [] { return ::operator new(kSize, kAlign); },
         [](void *p) { ::operator delete(p, kAlign); }},
        {"new[] aligned/delete[] aligned", true, [] { return ::operator new[](kSize, kAlign); },
         [](void *p) { ::operator delete[](p, kAlign); }},
        {"new aligned nothrow/delete aligned nothrow", true, [] { return ::operator new(kSize, kAlign, std::nothrow); },
         [](void *p) { ::operator delete(p, kAlign, std::nothrow); }},
        {"new[] aligned nothrow/delete[] aligned nothrow", true,
         [] { return ::operator new[](kSize, kAlign, std::nothrow); },
         [](void *p) { ::operator delete[](p, kAlign, std::nothrow); }},
        {"new aligned/delete sized aligned", true, [] { return ::operator new(kSize, kAlign); },
         [](void *p) { ::operator delete(p, kSize, kAlign); }},
        {"new[] aligned/delete[] sized aligned", true, [] { return ::operator new[](kSize, kAlign); },
         [](void *p) { ::operator delete[](p, kSize, kAlign); }},
    };
    for (const pair_t &t : pairs) {
        uint64_t before = in_use_bytes();
        void *p = t.make();
        check_block(p, t.aligned, t.name);
        CHECK(in_use_bytes() >= before + kSize, "%s: bytes_in_use %llu -> %llu", t.name,
              (unsigned long long)before, (unsigned long long)in_use_bytes());
        t.drop(p);
        CHECK(in_use_bytes() == before, "%s: bytes_in_use %llu after delete, %llu before", t.name,
              (unsigned long long)in_use_bytes(), (unsigned long long)before);
    }
}

static int handler_calls;
static void count_then_give_up() {
    if (++handler_calls == 3) std::set_new_handler(nullptr);
}
static void throw_bad_alloc() { throw std::bad_alloc(); }

static void test_failure() {
    const size_t huge = (size_t)1 << 62;
    bool thrown = false;
    try {
        void *p = ::operator new(huge);
        ::operator delete(p);
    } catch (const std::bad_alloc &) {
        thrown = true;
    }
    CHECK(thrown, "new(2^62) did not throw bad_alloc");
    handler_calls = 0, thrown = false;
    std::set_new_handler(count_then_give_up);
    try {
        void *p = ::operator new[](huge, kAlign);
        ::operator delete[](p);
    } catch (const std::bad_alloc &) {
        thrown = true;
    }
    CHECK(thrown && handler_calls == 3, "handler loop: thrown %d after %d calls (want 3)", thrown, handler_calls);
    CHECK(::operator new(huge, std::nothrow) == nullptr, "nothrow new(2^62) not NULL");
    CHECK(::operator new[](huge, kAlign, std::nothrow) == nullptr, "nothrow aligned new[](2^62) not NULL");
    std::set_new_handler(throw_bad_alloc);
    CHECK(::operator new(huge, std::nothrow) == nullptr, "nothrow new with a throwing handler not NULL");
    std::set_new_handler(nullptr);
}

static void test_ordinary_use() {
    void *a = ::operator new(0), *b = ::operator new(0);
    CHECK(a && b && a != b, "new(0) gave %p and %p", a, b);
    ::operator delete(a);
    ::operator delete(b);
    struct alignas(256) wide_t { char c[300]; };
    std::unique_ptr<wide_t> w(new wide_t());
    CHECK((uintptr_t)w.get() % 256 == 0 && from_hpmalloc(w.get()), "alignas(256) object at %p", (void *)w.get());
    std::vector<std::string> v;
    for (int i = 0; i < 10000; i++) v.push_back(std::string(40 + i % 100, 'x'));
    CHECK(from_hpmalloc(v.data()) && from_hpmalloc(v[9999].data()), "vector/string storage not from hpmalloc");
    Dl_info new_info, api_info;
    void *sym = dlsym(RTLD_DEFAULT, "_Znwm");
    bool same = sym && dladdr(sym, &new_info) && dladdr((void *)range_fn, &api_info) &&
                new_info.dli_fbase == api_info.dli_fbase;
    CHECK(same, "operator new lies in %s, hpm_range in %s", sym && dladdr(sym, &new_info) ? new_info.dli_fname : "?",
          dladdr((void *)range_fn, &api_info) ? api_info.dli_fname : "?");
}

int main() {
    range_fn = (bool (*)(const void *, void **, size_t *))dlsym(RTLD_DEFAULT, "hpm_range");
    stats_fn = (void (*)(hpm_stats_t *))dlsym(RTLD_DEFAULT, "hpm_stats_get");
    CHECK(range_fn && stats_fn, "hpmalloc is not in the process (run under LD_PRELOAD or link it)");
    if (!range_fn || !stats_fn) return TEST_DONE();
    test_pairs();
    test_failure();
    test_ordinary_use();
    return TEST_DONE();
}
