#!/usr/bin/env bash
# realprog_cpython.sh: a slice of CPython's own regression tests (Debian's
# libpython3.X-testsuite, which tools/install-deps.sh installs, and the
# tests of the python3 on PATH when it is another build with its own, as
# pyenv's are: the two allocate differently) run on
# hpmalloc with PYTHONMALLOC=malloc, so that every object, small ones
# included, comes from malloc, realloc and free. The modules are the ones
# that allocate most and in most ways: containers, strings and bytes,
# the garbage collector and weak references, mmap and buffers, pickling
# and JSON, regular expressions, decimal and ctypes, compression, email
# and XML, threads, fork and subprocess.
#
# The same modules run first without the preload (the reference, with
# the same PYTHONMALLOC). Each module must pass on hpmalloc, or give the
# reference's result (a module that fails in the reference as well, as
# some do in a sandbox without network or with another locale, counts as
# passed with a note): one check each. The reference must pass most of
# them (else the slice proves nothing), the interpreter must really run
# on hpmalloc (its /proc/self/maps), and the slice must catch a broken
# realloc (a shim over glibc's that flips a bit now and then). Prints
# "N passed, N failed".
source "$(dirname "$0")/common.bash"
require_lib
t_tmpdir

# Each python3 with its test package: Debian's, and the one on PATH when
# it is another build.
pys=() reals=()
for cand in /usr/bin/python3 "$(command -v python3 2>/dev/null)"; do
    [[ -x $cand ]] || continue
    real=$("$cand" -c 'import os, sys; print(os.path.realpath(sys.executable))' 2>/dev/null) || continue
    [[ -n $real && " ${reals[*]} " != *" $real "* ]] || continue   # the same interpreter twice (a link or a shim)
    reals+=("$real")
    if "$cand" -c 'import test.support, test.libregrtest' 2>/dev/null; then pys+=("$cand")
    else echo "note: $cand has no test package"; fi
done
[[ ${#pys[@]} -gt 0 ]] || t_abort "no python3 with its test package (libpython3.X-testsuite; tools/install-deps.sh test installs it)"

all_modules=(test_dict test_list test_set test_tuple test_deque test_bytes test_unicode
         test_array test_memoryview test_mmap test_gc test_weakref test_collections
         test_json test_pickle test_re test_sqlite3 test_struct test_long test_zlib
         test_thread test_threading_local test_queue test_fork1 test_bigmem
         test_io test_os test_capi test_ctypes test_decimal test_tracemalloc test_sys
         test_itertools test_functools test_descr test_builtin test_compile test_ast
         test_marshal test_hashlib test_bz2 test_lzma test_csv test_xml_etree
         test_email test_subprocess)

# run_suite OUT ENV...: $py's tests $modules, two at a time, each in a
# worker process of its own (regrtest -j2), with a per-module timeout.
run_suite() {
    local out=$1; shift
    timeout 1200 env -u LD_PRELOAD "$@" PYTHONMALLOC=malloc \
        "$py" -m test -j2 --timeout 300 --ignore "*SignalsTest*" "${modules[@]}" >"$out" 2>&1
}

# result_of LOG MODULE: passed, failed, skipped, ... as regrtest's progress
# line says, or "missing".
result_of() {
    local r
    r=$(grep -E "\] $2 [a-z]" "$1" | tail -n 1 | sed -E "s/.*\] $2 ([a-z ]+).*/\1/" | awk '{print $1}')
    echo "${r:-missing}"
}

for py in "${pys[@]}"; do
    ver=$("$py" -c 'import platform; print(platform.python_version())')
    # Only the modules this python's test package has (Debian's has no
    # test_sqlite3 and no test_capi).
    modules=()
    testdir=$("$py" -c 'import os, test; print(os.path.dirname(test.__file__))')
    for m in "${all_modules[@]}"; do
        if [[ -e $testdir/$m.py || -d $testdir/$m ]]; then modules+=("$m"); else echo "note: $py has no $m"; fi
    done
    t0=$SECONDS
    run_suite "$tmp/ref.log"
    t1=$SECONDS
    run_suite "$tmp/hpm.log" LD_PRELOAD="$HPM_LIB_ABS"
    echo "$py ($ver): reference $((t1 - t0)) s, hpmalloc $((SECONDS - t1)) s, ${#modules[@]} modules"
    ref_passed=0
    for m in "${modules[@]}"; do
        r=$(result_of "$tmp/ref.log" "$m"); h=$(result_of "$tmp/hpm.log" "$m")
        [[ $r == passed ]] && ref_passed=$((ref_passed + 1))
        if [[ $h == passed ]]; then
            t_ok "$ver $m passed on hpmalloc"
        elif [[ $h == "$r" ]]; then
            t_ok "$ver $m: $h on hpmalloc, as in the reference"
        else
            t_bad "$ver $m: $h on hpmalloc, $r in the reference"
            grep -A 12 -E "^test $m (failed|crashed)|\] $m (failed|crashed)" "$tmp/hpm.log" | head -n 20
        fi
    done
    t_check "$ver: the reference passes at least $(( ${#modules[@]} - 4 )) of ${#modules[@]} modules ($ref_passed)" \
        test "$ref_passed" -ge $(( ${#modules[@]} - 4 ))
    grep -q "hpmalloc" <(env LD_PRELOAD="$HPM_LIB_ABS" PYTHONMALLOC=malloc "$py" -c 'print(open("/proc/self/maps").read())') &&
        t_ok "$py runs on hpmalloc (libhpmalloc in its maps)" || t_bad "$py did not load $HPM_LIB_ABS"
done

# The slice can fail: under an allocator whose realloc now and then loses
# a bit of a block it grows (a shim over glibc's), some modules must not pass.
cat >"$tmp/shim.c" <<'SHIM'
#include <stddef.h>
extern void *__libc_realloc(void *, size_t);
static unsigned long count;
void *realloc(void *p, size_t n) {   /* after 5000, every 50th growth past 4 KiB */
    void *q = __libc_realloc(p, n);
    if (q && p && n > 4096 && ++count > 5000 && count % 50 == 0) ((unsigned char *)q)[100] ^= 4;
    return q;
}
SHIM
if gcc -shared -fPIC -O1 -o "$tmp/shim.so" "$tmp/shim.c"; then
    py=${pys[0]}
    modules=(test_bytes test_pickle test_unicode)
    run_suite "$tmp/shim.log" LD_PRELOAD="$tmp/shim.so"
    n_bad=0
    for m in "${modules[@]}"; do [[ $(result_of "$tmp/shim.log" "$m") == passed ]] || n_bad=$((n_bad + 1)); done
    t_check "a realloc that corrupts blocks fails $n_bad of ${#modules[@]} modules (at least 1)" test "$n_bad" -ge 1
else
    t_bad "gcc could not build the broken-realloc shim"
fi
t_done
