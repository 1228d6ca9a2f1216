#!/usr/bin/env bash
# C++ operator new/delete (src/cxx/new.cc). With a C++ compiler: the
# library exports all 20 forms (nm -D) without depending on libstdc++ (a C
# program does not map it; from C, a failing throwing new aborts with a
# message), and tests/progs/cxx_new.cc passes
# under LD_PRELOAD, linked with -lhpmalloc, and linked with libhpmalloc.a
# (each run checks every new/delete pair, the new-handler loop, bad_alloc
# and nothrow failure). Without one: the library still builds and exports
# no operator new, which is checked instead.
source "$(dirname "$0")/common.bash"
require_lib
t_tmpdir
cxx=${CXX:-c++}
if ! command -v "$cxx" >/dev/null; then
    t_check "no C++ compiler: the library exports no operator new" \
        bash -c "! nm -D '$HPM_LIB_ABS' | grep -q ' T _Znwm'"
    t_done; exit
fi
forms=("operator new(unsigned long)" "operator new[](unsigned long)"
       "operator new(unsigned long, std::nothrow_t const&)" "operator new[](unsigned long, std::nothrow_t const&)"
       "operator new(unsigned long, std::align_val_t)" "operator new[](unsigned long, std::align_val_t)"
       "operator new(unsigned long, std::align_val_t, std::nothrow_t const&)"
       "operator new[](unsigned long, std::align_val_t, std::nothrow_t const&)"
       "operator delete(void*)" "operator delete[](void*)"
       "operator delete(void*, std::nothrow_t const&)" "operator delete[](void*, std::nothrow_t const&)"
       "operator delete(void*, unsigned long)" "operator delete[](void*, unsigned long)"
       "operator delete(void*, std::align_val_t)" "operator delete[](void*, std::align_val_t)"
       "operator delete(void*, std::align_val_t, std::nothrow_t const&)"
       "operator delete[](void*, std::align_val_t, std::nothrow_t const&)"
       "operator delete(void*, unsigned long, std::align_val_t)"
       "operator delete[](void*, unsigned long, std::align_val_t)")
nm -DC --defined-only "$HPM_LIB_ABS" | sed 's/^[0-9a-f]* T //' >"$tmp/syms"
for f in "${forms[@]}"; do
    t_check "nm -D shows $f" grep -qxF "$f" "$tmp/syms"
done
t_check "exactly 20 operator new/delete forms exported" \
    test "$(grep -c '^operator \(new\|delete\)' "$tmp/syms")" -eq 20
t_check "the library does not depend on libstdc++" bash -c "! readelf -d '$HPM_LIB_ABS' | grep -q 'NEEDED.*libstdc++'"

# A C program on hpmalloc maps no libstdc++; operator new reached from C
# (no C++ runtime) gives memory, nothrow new of too much gives NULL, and a
# throwing new that fails says why and aborts (it cannot throw).
cat >"$tmp/cnew.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    void *(*new_fn)(unsigned long) = (void *(*)(unsigned long))dlsym(RTLD_DEFAULT, "_Znwm");
    void *(*new_nt)(unsigned long, const void *) = (void *(*)(unsigned long, const void *))dlsym(RTLD_DEFAULT, "_ZnwmRKSt9nothrow_t");
    void (*del)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "_ZdlPv");
    char maps[256], line[512];
    int stdcxx = 0;
    snprintf(maps, sizeof maps, "/proc/self/maps");
    FILE *f = fopen(maps, "r");
    while (f && fgets(line, sizeof line, f)) stdcxx |= strstr(line, "libstdc++") != NULL;
    if (f) fclose(f);
    if (!new_fn || !new_nt || !del) return 2;
    void *p = new_fn(100);
    printf("stdcxx=%d small=%d nothrow_huge=%d\n", stdcxx, p != NULL, new_nt(1ul << 62, NULL) == NULL);
    fflush(stdout);
    del(p);
    if (argc > 1) new_fn(1ul << 62);   /* aborts */
    return 0;
}
C
if cc -O1 -o "$tmp/cnew" "$tmp/cnew.c" -ldl; then
    out=$(LD_PRELOAD=$HPM_LIB_ABS "$tmp/cnew" 2>&1); rc=$?
    echo "C program: $out"
    t_check "C program: no libstdc++ mapped, operator new works, nothrow too-much is NULL" \
        test "$rc.$out" = "0.stdcxx=0 small=1 nothrow_huge=1"
    LD_PRELOAD=$HPM_LIB_ABS "$tmp/cnew" fail >"$tmp/cnew.out" 2>&1; rc=$?
    t_check "C program: a failing throwing new aborts (rc=$rc, 134 expected)" test "$rc" -eq 134
    t_check "C program: ... saying there is no C++ runtime" grep -q 'no C++ runtime loaded' "$tmp/cnew.out"
else
    t_bad "cannot build the C caller of operator new"
fi

# run_case LABEL CMD...: the test program passes, its last line is 0 failed.
run_case() {
    local label=$1; shift
    "$@" >"$tmp/out" 2>&1
    local rc=$? last; last=$(tail -n 1 "$tmp/out")
    echo "$label: $last"
    [[ $rc -eq 0 ]] || head -n 20 "$tmp/out"
    t_check "$label: exits 0 and reports no failure" test "$rc" -eq 0 -a "${last#* passed, }" = "0 failed"
}
pre=$(require_prog cxx_new) || t_abort "cannot build build/tests/progs/cxx_new"
linked=$(require_prog cxx_new_linked) || t_abort "cannot build build/tests/progs/cxx_new_linked"
run_case "under LD_PRELOAD" env LD_PRELOAD="$HPM_LIB_ABS" "$pre"
t_check "linked program needs libhpmalloc.so.0" bash -c "readelf -d '$linked' | grep -q 'NEEDED.*libhpmalloc.so.0'"
run_case "linked with -lhpmalloc" "$linked"
# the program reaches hpm_range/hpm_stats_get through dlsym, so the static
# link must be told to keep them (-u), as a direct call would
if "$cxx" -O2 -std=c++17 -rdynamic -Wl,-u,hpm_range,-u,hpm_stats_get -Iinclude -Itests tests/progs/cxx_new.cc \
        build/libhpmalloc.a -pthread -ldl \
        -o "$tmp/cxx_static"; then
    t_ok "links with libhpmalloc.a"
    run_case "linked with libhpmalloc.a" "$tmp/cxx_static"
else
    t_bad "cannot link tests/progs/cxx_new.cc with build/libhpmalloc.a"
fi
t_done
