#!/usr/bin/env bash
# C++ operator new/delete (src/cxx/new.cc). With a C++ compiler: the
# library exports all 20 forms (nm -D), and tests/progs/cxx_new.cc passes
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
