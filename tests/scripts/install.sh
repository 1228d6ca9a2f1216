#!/usr/bin/env bash
# make install / make uninstall into a temporary prefix, as a user of the
# installed library would use it: the files are where they belong (the
# versioned soname and its links, the static library, the header, hpm, the
# pkg-config file, the CMake package, the man page and docs); a C and a C++
# program (tests/install/app.{c,cc}) build with `pkg-config --cflags
# --libs hpmalloc` (shared and --static) and with a CMake project using
# find_package(hpmalloc) (hpmalloc::hpmalloc and hpmalloc::hpmalloc_static),
# and every one of them runs on hpmalloc; the installed hpm runs a program
# on the installed library; DESTDIR stages the same tree; `make uninstall`
# leaves no file behind.
source "$(dirname "$0")/common.bash"
require_tool pkg-config
require_tool cmake
t_tmpdir
cxx=${CXX:-c++}
p=$tmp/prefix
make -s install PREFIX="$p" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; t_abort "make install PREFIX=$p failed"; }
soname=$(readelf -d "$p/lib/libhpmalloc.so.0" 2>/dev/null | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
t_check "installed libhpmalloc.so.0 has soname libhpmalloc.so.0 (got '$soname')" test "$soname" = libhpmalloc.so.0
t_check "libhpmalloc.so -> libhpmalloc.so.0" test "$(readlink "$p/lib/libhpmalloc.so")" = libhpmalloc.so.0
t_check "libhpmalloc.so.0 -> the versioned file" test -f "$p/lib/$(readlink "$p/lib/libhpmalloc.so.0")"
for f in lib/libhpmalloc.a include/hpmalloc.h bin/hpm lib/pkgconfig/hpmalloc.pc lib/cmake/hpmalloc/hpmalloc-config.cmake \
         lib/cmake/hpmalloc/hpmalloc-config-version.cmake share/man/man1/hpm.1 share/doc/hpmalloc/README.md \
         share/doc/hpmalloc/options.md; do
    t_check "installed $f" test -s "$p/$f"
done

# run_app LABEL BIN [ENV...]: BIN exits 0 and says it ran on hpmalloc.
run_app() {
    local label=$1 bin=$2; shift 2
    local out; out=$(env "$@" "$bin" 2>&1)
    echo "$label: $out"
    t_check "$label runs on hpmalloc" grep -q "on hpmalloc" <<<"$out"
}
export PKG_CONFIG_PATH=$p/lib/pkgconfig
version=$(sed -n 's/^#define HPM_VERSION "\(.*\)"/\1/p' include/hpmalloc.h)
t_check "pkg-config --modversion is the header's version ($version)" test "$(pkg-config --modversion hpmalloc)" = "$version"
flags=$(pkg-config --cflags --libs hpmalloc) sflags=$(pkg-config --cflags hpmalloc)
slibs="$p/lib/libhpmalloc.a $(pkg-config --static --libs-only-other --libs-only-l hpmalloc | sed 's/-lhpmalloc//')"
t_check "cc builds app.c with pkg-config" cc -O2 tests/install/app.c $flags -o "$tmp/app_pc"
run_app "pkg-config C program" "$tmp/app_pc" LD_LIBRARY_PATH="$p/lib"
t_check "cc builds app.c statically with pkg-config --static" cc -O2 tests/install/app.c $sflags $slibs -o "$tmp/app_pcs"
t_check "the static build needs no libhpmalloc.so" bash -c "! readelf -d '$tmp/app_pcs' | grep -q libhpmalloc"
run_app "static pkg-config C program" "$tmp/app_pcs"
t_check "$cxx builds app.cc with pkg-config" "$cxx" -O2 tests/install/app.cc $flags -o "$tmp/app_pcxx"
run_app "pkg-config C++ program" "$tmp/app_pcxx" LD_LIBRARY_PATH="$p/lib"

cm=$tmp/cmake
if cmake -S tests/install -B "$cm" -DCMAKE_PREFIX_PATH="$p" >"$tmp/cmake.log" 2>&1 &&
   cmake --build "$cm" >>"$tmp/cmake.log" 2>&1; then
    t_ok "CMake project with find_package(hpmalloc 0.1) configures and builds"
    for a in app_c app_cxx app_c_static app_cxx_static; do run_app "CMake $a" "$cm/$a"; done
else
    t_bad "CMake project with find_package(hpmalloc) failed"; tail -n 20 "$tmp/cmake.log"
fi
# find_version VERSION: a CMake project asking for hpmalloc VERSION configures.
find_version() {
    mkdir -p "$tmp/v$1"
    printf 'cmake_minimum_required(VERSION 3.13)\nproject(v C)\nfind_package(hpmalloc %s REQUIRED)\n' "$1" \
        >"$tmp/v$1/CMakeLists.txt"
    cmake -S "$tmp/v$1" -B "$tmp/v$1/b" -DCMAKE_PREFIX_PATH="$p" >/dev/null 2>&1
}
t_check "find_package(hpmalloc 0) is accepted" find_version 0
refuses_version() { ! find_version "$1"; }
t_check "find_package(hpmalloc $version) is accepted" find_version "$version"
t_check "find_package(hpmalloc 9.0) is refused" refuses_version 9.0
t_check "find_package(hpmalloc 0.2) is refused (0.x minor differs)" refuses_version 0.2
out=$(HPM_STATS=1 "$p/bin/hpm" run "$p/bin/hpm" --version 2>&1)
t_check "installed hpm runs a program on the installed library" grep -q '^hpmalloc:' <<<"$out"
t_check "installed hpm --version" grep -q '^hpm ' <<<"$("$p/bin/hpm" --version)"

make -s install PREFIX=/usr DESTDIR="$tmp/stage" >/dev/null 2>&1
t_check "DESTDIR stages under DESTDIR/usr" test -x "$tmp/stage/usr/bin/hpm" -a -f "$tmp/stage/usr/lib/libhpmalloc.a"
t_check "the staged .pc names the final prefix" grep -qx 'prefix=/usr' "$tmp/stage/usr/lib/pkgconfig/hpmalloc.pc"
make -s uninstall PREFIX=/usr DESTDIR="$tmp/stage" >/dev/null 2>&1
left=$(find "$tmp/stage" \( -type f -o -type l \) | wc -l)
t_check "make uninstall with DESTDIR leaves no file ($left left)" test "$left" -eq 0
make -s uninstall PREFIX="$p" >/dev/null 2>&1
left=$(find "$p" \( -type f -o -type l \) | wc -l)
t_check "make uninstall leaves no file ($left left)" test "$left" -eq 0
t_done
