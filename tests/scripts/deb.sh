#!/usr/bin/env bash
# The Debian packages (debian/): dpkg-buildpackage builds libhpmalloc0,
# libhpmalloc-dev and hpmalloc-tools from a clean copy of the tree; lintian
# reports no error; `apt-get install ./*.deb` installs them; then, from the
# installed packages only: `hpm run python3 -c pass` runs on hpmalloc, the
# library preloads by its soname, a C program builds with pkg-config and a
# CMake project with find_package(hpmalloc), and both run on hpmalloc.
# The packages are purged at the end unless they were installed before.
source "$(dirname "$0")/common.bash"
for t in dpkg-buildpackage lintian apt-get pkg-config cmake; do require_tool "$t"; done
[[ $(id -u) -eq 0 ]] || t_abort "installing a .deb needs root"
t_tmpdir
src=$tmp/hpmalloc
mkdir -p "$src"
git ls-files -co --exclude-standard | tar -cf - -T - | tar -xf - -C "$src"
if (cd "$src" && dpkg-buildpackage -us -uc) >"$tmp/build.log" 2>&1; then
    t_ok "dpkg-buildpackage builds the packages"
else
    tail -n 30 "$tmp/build.log"; t_abort "dpkg-buildpackage failed"
fi
debs=()
for p in libhpmalloc0 libhpmalloc-dev hpmalloc-tools; do
    d=$(ls "$tmp"/${p}_*.deb 2>/dev/null | head -n 1)
    t_check "built $p" test -n "$d"
    [[ -n $d ]] && debs+=("$d")
done
lintian "$tmp"/hpmalloc_*.changes >"$tmp/lintian.log" 2>&1
sed 's/^/lintian: /' "$tmp/lintian.log"
t_check "lintian reports no error" bash -c "! grep -q '^E:' '$tmp/lintian.log'"

was_installed=$(dpkg-query -W -f='${Status}' libhpmalloc0 2>/dev/null | grep -c "install ok installed")
if apt-get install -y -q -o DPkg::Lock::Timeout=300 --reinstall --allow-downgrades "${debs[@]}" >"$tmp/apt.log" 2>&1; then
    t_ok "apt-get install ./*.deb"
else
    tail -n 20 "$tmp/apt.log"; t_abort "apt-get install of the packages failed"
fi
purge() {
    [[ $was_installed -eq 0 ]] &&
        apt-get purge -y -q -o DPkg::Lock::Timeout=300 hpmalloc-tools libhpmalloc-dev libhpmalloc0 >/dev/null 2>&1
    rm -rf "$tmp"
}
trap purge EXIT

t_check "/usr/bin/hpm is installed" test -x /usr/bin/hpm
for py in python3 /usr/bin/python3; do
    command -v "$py" >/dev/null || continue
    err=$(cd / && HPM_STATS=1 /usr/bin/hpm run "$py" -c pass 2>&1); rc=$?
    t_check "hpm run $py -c pass exits 0 (rc=$rc)" test "$rc" -eq 0
    t_check "hpm run $py -c pass ran on the installed hpmalloc" grep -q '^hpmalloc: stats' <<<"$err"
done
t_check "ld.so finds libhpmalloc.so.0 (ldconfig -p)" bash -c "ldconfig -p | grep -q 'libhpmalloc.so.0 '"
err=$(HPM_STATS=1 LD_PRELOAD=libhpmalloc.so.0 /usr/bin/hpm --version 2>&1)
t_check "LD_PRELOAD=libhpmalloc.so.0 (by soname) works" grep -q '^hpmalloc: stats' <<<"$err"
if cc -O2 tests/install/app.c $(pkg-config --cflags --libs hpmalloc) -o "$tmp/app" 2>"$tmp/cc.log"; then
    out=$("$tmp/app"); echo "pkg-config app: $out"
    t_check "a program built with the system pkg-config runs on hpmalloc" grep -q "on hpmalloc" <<<"$out"
else
    cat "$tmp/cc.log"; t_bad "cc with pkg-config --cflags --libs hpmalloc failed"
fi
if cmake -S tests/install -B "$tmp/cm" >"$tmp/cm.log" 2>&1 && cmake --build "$tmp/cm" >>"$tmp/cm.log" 2>&1; then
    out=$("$tmp/cm/app_cxx"); echo "CMake app_cxx: $out"
    t_check "a C++ program built with find_package(hpmalloc) runs on hpmalloc" grep -q "on hpmalloc" <<<"$out"
else
    tail -n 20 "$tmp/cm.log"; t_bad "CMake project with the installed package failed"
fi
t_done
