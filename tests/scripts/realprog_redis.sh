#!/usr/bin/env bash
# realprog_redis.sh: redis-server on 127.0.0.1 (a random high port, a
# temporary directory), once without a preload (the reference) and once
# under LD_PRELOAD=$HPM_LIB with HPM_STATS=1. Each session:
#   - SETs 100k keys through redis-cli --pipe (values of 8 to ~300 bytes,
#     every 1000th 64 KiB), overwrites every 5th key with a longer value and
#     deletes every 10th;
#   - checks DBSIZE (90000) and an MD5 of all values read back with MGET,
#     against the MD5 computed here from the same generator;
#   - BGSAVE (a forked child writes the dump), waits for it to succeed,
#     SHUTDOWN NOSAVE, restarts the server from the dump and checks DBSIZE
#     and the MD5 again.
# On hpmalloc it also checks that libhpmalloc is mapped in the server
# (/proc/PID/maps) and that its exit stats appear on stderr; the two
# sessions' summaries must be identical. Servers are killed on exit.
# Prints "N passed, N failed".
source "$(dirname "$0")/common.bash"
require_lib
require_tool redis-server
require_tool redis-cli
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hpmredis.XXXXXX")
server_pids=()
cleanup() {
    local p
    for p in "${server_pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
export LC_ALL=C
nkeys=100000

# The data: key i holds val(i, 1), every 5th is overwritten with val(i, 2),
# every 10th deleted. mode "resp" prints the commands as Redis protocol,
# "values" the final value of each key in order (empty for deleted keys).
gen() {
    awk -v n="$nkeys" -v mode="$1" '
    function val(i, r) {
        if (i % 1000 == 0) return "big" i "-" r "-" substr(fill, 1, 65536);
        return "v" i "-" r "-" substr(fill, 1 + i % 50, (i * 37) % (r == 1 ? 200 : 300));
    }
    function cmd(a, b, c,   s) {
        s = (c == "" ? "*2\r\n" : "*3\r\n") "$" length(a) "\r\n" a "\r\n$" length(b) "\r\n" b "\r\n";
        if (c != "") s = s "$" length(c) "\r\n" c "\r\n";
        return s;
    }
    BEGIN {
        fill = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
        while (length(fill) < 70000) fill = fill fill;
        if (mode == "resp") {
            for (i = 1; i <= n; i++) printf "%s", cmd("SET", "key:" i, val(i, 1));
            for (i = 5; i <= n; i += 5) printf "%s", cmd("SET", "key:" i, val(i, 2));
            for (i = 10; i <= n; i += 10) printf "%s", cmd("DEL", "key:" i, "");
        } else {
            for (i = 1; i <= n; i++) print (i % 10 == 0 ? "" : val(i, i % 5 == 0 ? 2 : 1));
        }
    }'
}

# Prints one MGET line per 1000 keys, in key order.
mget_lines() { awk -v n="$nkeys" 'BEGIN { for (i = 1; i <= n; i++) printf "%s%s", (i % 1000 == 1 ? "MGET" : ""), " key:" i (i % 1000 == 0 || i == n ? "\n" : "") }'; }

cli() { redis-cli -h 127.0.0.1 -p "$port" "$@"; }

# start_server LABEL PRELOAD: starts redis-server on a free random port
# with its data in $tmp/LABEL; sets port and pid. Returns 1 if it cannot.
start_server() {
    local label=$1 preload=$2 attempt i
    mkdir -p "$tmp/$label"
    for attempt in 1 2 3 4 5; do
        port=$((20000 + RANDOM % 40000))
        if [[ -n $preload ]]; then
            LD_PRELOAD=$preload HPM_STATS=1 redis-server --port "$port" --bind 127.0.0.1 \
                --dir "$tmp/$label" --dbfilename dump.rdb --save '' --appendonly no \
                --logfile "$tmp/$label/redis.log" 2>>"$tmp/$label/stderr" &
        else
            env -u LD_PRELOAD redis-server --port "$port" --bind 127.0.0.1 \
                --dir "$tmp/$label" --dbfilename dump.rdb --save '' --appendonly no \
                --logfile "$tmp/$label/redis.log" 2>>"$tmp/$label/stderr" &
        fi
        pid=$!
        server_pids+=("$pid")
        for i in $(seq 100); do  # up to 10 s, also while it loads the dump
            # PONG from our process (not from another server on that port)
            [[ $(cli ping 2>/dev/null) == PONG ]] &&
                cli info server 2>/dev/null | tr -d '\r' | grep -qx "process_id:$pid" && return 0
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    done
    return 1
}

stop_server() {  # SHUTDOWN NOSAVE; echoes the server's exit status
    cli shutdown nosave >/dev/null 2>&1
    local i
    for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    wait "$pid"
}

values_md5() { mget_lines | cli --raw | md5sum | cut -d' ' -f1; }

bgsave_done() {
    local info; info=$(cli info persistence | tr -d '\r')
    grep -q '^rdb_bgsave_in_progress:0$' <<<"$info" && grep -q '^rdb_changes_since_last_save:0$' <<<"$info"
}

# session LABEL PRELOAD: the whole scenario; summary lines in $tmp/LABEL.summary.
session() {
    local label=$1 preload=$2 sum="$tmp/$1.summary" on=$1
    : >"$sum"
    if ! start_server "$label" "$preload"; then
        t_bad "$on: redis-server did not start; log: $(tail -n 3 "$tmp/$label/redis.log" "$tmp/$label/stderr" 2>/dev/null)"
        return
    fi
    t_ok "$on: redis-server started on port $port"
    if [[ -n $preload ]] && is_hpmalloc; then
        t_check "$on: libhpmalloc is mapped in the server (/proc/$pid/maps)" grep -q libhpmalloc "/proc/$pid/maps"
    fi
    local piped; piped=$(gen resp | cli --pipe 2>&1)
    t_check "$on: --pipe loaded every command without error" grep -q 'errors: 0, replies: 130000' <<<"$piped"
    local dbsize; dbsize=$(cli dbsize)
    t_check "$on: DBSIZE is 90000 (got $dbsize)" test "$dbsize" = 90000
    local md5; md5=$(values_md5)
    t_check "$on: MD5 of the values read back is the expected $expected_md5 (got $md5)" test "$md5" = "$expected_md5"
    echo "dbsize $dbsize md5 $md5" >>"$sum"
    local reply; reply=$(cli bgsave)
    local i; for i in $(seq 300); do bgsave_done && break; sleep 0.1; done
    t_check "$on: BGSAVE ($reply) finished with status ok" bash -c "[[ \$(redis-cli -p $port info persistence | tr -d '\r' | grep '^rdb_last_bgsave_status:') == rdb_last_bgsave_status:ok ]]"
    t_check "$on: dump file written" test -s "$tmp/$label/dump.rdb"
    stop_server; local rc=$?
    t_check "$on: server exited with 0 after SHUTDOWN NOSAVE (rc=$rc)" test "$rc" -eq 0
    if ! start_server "$label" "$preload"; then
        t_bad "$on: redis-server did not restart from the dump"
        return
    fi
    dbsize=$(cli dbsize); md5=$(values_md5)
    t_check "$on: after reload DBSIZE is 90000 (got $dbsize)" test "$dbsize" = 90000
    t_check "$on: after reload the values' MD5 is the expected one (got $md5)" test "$md5" = "$expected_md5"
    echo "reload dbsize $dbsize md5 $md5" >>"$sum"
    stop_server; rc=$?
    t_check "$on: restarted server exited with 0 (rc=$rc)" test "$rc" -eq 0
    [[ -n $preload ]] && check_stats_seen "$tmp/$label/stderr" "redis-server"
}

expected_md5=$(gen values | md5sum | cut -d' ' -f1)
t0=$SECONDS
session reference ""
t1=$SECONDS
session hpmalloc "$HPM_LIB_ABS"
echo "reference session $((t1 - t0)) s, hpmalloc session $((SECONDS - t1)) s"
t_check "the hpmalloc session's summary equals the reference's" cmp -s "$tmp/reference.summary" "$tmp/hpmalloc.summary"
t_done
