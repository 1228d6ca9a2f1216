// app.cc: a C++ program built against an installed hpmalloc by
// tests/scripts/install.sh. Prints "on hpmalloc" when new, aligned new and
// std::vector's storage are hpmalloc blocks (hpm_range knows them).
#include <cstdint>
#include <cstdio>
#include <new>
#include <vector>
#include "hpmalloc.h"

static bool ours(const void *p) {
    void *base = nullptr;
    size_t size = 0;
    return hpm_range(p, &base, &size) && base == p;
}

int main() {
    int *a = new int[1000];
    struct alignas(64) line_t { char c[64]; };
    line_t *l = new line_t[10];
    std::vector<double> v(10000, 1.0);
    bool ok = ours(a) && ours(l) && ours(v.data()) && reinterpret_cast<uintptr_t>(l) % 64 == 0;
    std::printf("c++ %s\n", ok ? "on hpmalloc" : "NOT on hpmalloc");
    delete[] l;
    delete[] a;
    return ok ? 0 : 1;
}
