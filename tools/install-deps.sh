#!/usr/bin/env bash
# Installs the Debian packages that the tests and the evaluation use, when
# any is missing and we may (root with apt-get). Safe to run again: it does
# nothing when everything is there. Usage: tools/install-deps.sh [test|bench]
set -u
what=${1:-test}
pkgs=(gcc make libc6-dev python3 sqlite3 lua5.4 redis-server redis-tools
      libjemalloc2 libmimalloc2.0 libtcmalloc-minimal4 gnuplot-nox
      clang libclang-rt-14-dev libhiredis-dev file procps)
# packaging and install tests (debian/, make install, C++ operator new),
# and the Prometheus parser of hpm stat --prometheus's test
pkgs+=(g++ pkg-config cmake dpkg-dev debhelper lintian python3-prometheus-client)
# CPython's own regression tests for Debian's python3 (tests/scripts/realprog_cpython.sh)
pyver=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo 3.11)
pkgs+=("libpython$pyver-testsuite")
# the heap census of bench/scripts/rss_by_mapping.py --census (its smoke test)
pkgs+=(gdb)
[[ $what == bench ]] && pkgs+=(hyperfine time)   # time: bench/scripts/rounds.sh's max RSS
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    echo "install-deps: missing ${missing[*]}; install them with apt-get (needs root). Tests that need them will fail or skip." >&2
    exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null 2>&1 || true
apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 || apt-get install -y "${missing[@]}" >&2
exit 0
