/* bench_cases.c: the cases of the default suites (micro, macro,
 * throughput, real): which program runs with which arguments at each scale
 * (tiny for tests, quick, full), which result-line metrics it reports
 * (the first is the headline of the report's main table) and how long one
 * run is expected to take (for the ETA only). Sizes are chosen so that the
 * quick suite runs in about 12 minutes on 2 cores with 8 allocators and 3
 * repetitions (about 25 s per allocator per repetition; the ten standard
 * workloads take about 1 s each), and the full one in about an hour with 7
 * (about 68 s per allocator per repetition,
 * measured: most of it the 2 GiB random memaccess sweep; the sequential
 * sweep stops at 1 GiB to stay in budget). */
#include <string.h>
#include "bench_int.h"

const hpm_bench_case_t hpm_bench_cases[] = {
    {"glibc-st", "micro", "glibc_thread",
     {"--mode st --blocks 100 --iters 20", "--mode st --min 16 --max 1024 --blocks 1000 --iters 3000",
      "--mode st --min 16 --max 1024 --blocks 1000 --iters 12000"},
     "ns_per_op,mops", {0.05, 0.2, 0.8}, 0,
     "glibc malloc benchmark, one thread, blocks of 16..1024 bytes: FIFO half free, LIFO full free"},
    {"glibc-mt", "micro", "glibc_thread",
     {"--mode mt --threads 2 --blocks 100 --iters 20",
      "--mode mt --threads 2 --min 16 --max 1024 --blocks 1000 --iters 3000",
      "--mode mt --threads 2 --min 16 --max 1024 --blocks 1000 --iters 12000"},
     "ns_per_op,mops", {0.05, 0.3, 1.0}, 0, "the same with 2 threads at once"},
    {"glibc-emu", "micro", "glibc_thread",
     {"--mode emu --blocks 100 --iters 20", "--mode emu --min 16 --max 1024 --blocks 1000 --iters 3000",
      "--mode emu --min 16 --max 1024 --blocks 1000 --iters 12000"},
     "ns_per_op,mops", {0.05, 0.2, 0.8}, 0,
     "emulated threads: one worker while an idle thread exists (no single-thread shortcuts)"},
    {"glibc-large", "micro", "glibc_thread",
     {"--mode st --min 1K --max 64K --blocks 20 --iters 10",
      "--mode st --min 1K --max 64K --blocks 200 --iters 1000",
      "--mode st --min 1K --max 64K --blocks 200 --iters 4000"},
     "ns_per_op,mops", {0.05, 0.3, 1.0}, 0, "the glibc pattern with blocks of 1..64 KiB"},
    {"memaccess-seq", "micro", "memaccess",
     {"--order seq --alloc both --min 16K --max 256K --visits 10K",
      "--order seq --alloc both --min 16K --max 256M --visits 1M",
      "--order seq --alloc both --min 16K --max 1G --visits 1M"},
     "nodes_ns_gmean,calloc_ns_gmean,nodes_ns@*,calloc_ns@*", {0.1, 2.0, 9.0}, 1,
     "linked list in allocation order, working set 16 KiB doubling up; ns per node visited"},
    {"memaccess-rand", "micro", "memaccess",
     {"--order rand --alloc both --min 16K --max 256K --visits 10K",
      "--order rand --alloc both --min 16K --max 256M --visits 1M",
      "--order rand --alloc both --min 16K --max 2G --visits 1M"},
     "nodes_ns_gmean,calloc_ns_gmean,nodes_ns@*,calloc_ns@*", {0.1, 4.0, 32.0}, 1,
     "linked list in random order, working set 16 KiB doubling up; ns per node visited"},
    {"memaccess-tlb", "micro", "memaccess",
     {"--order rand --alloc nodes --ws 1M --visits 10K", "--order rand --alloc nodes --ws 1G --visits 2M",
      "--order rand --alloc nodes --ws 1G --visits 4M"},
     "nodes_ns_gmean", {0.1, 4.0, 6.0}, 1,
     "TLB reach: random walk over a 1 GiB list of malloc'd 64-byte nodes; ns per node"},
    {"kmeans", "macro", "kmeans",
     {"--sweep-list 4,16 --points 256 --dims 4 --threads 2 --iters 4",
      "--sweep --points 8192 --dims 8 --threads 2 --iters 8",
      "--sweep --points 16384 --dims 8 --threads 2 --iters 10"},
     "total_ms,ms_k*", {0.1, 1.2, 2.5}, 1,
     "pthreads k-means, cluster counts 16, 64, 256, 1000, 2000; ms per cluster count"},
    {"richards", "macro", "richards",
     {"--reps 2", "--reps 200", "--reps 800"}, "us_per_rep", {0.05, 0.3, 1.0}, 0,
     "Richards task scheduler, tasks and packets malloc'd, every packet sent is a fresh copy"},
    /* The standard workloads (bench/throughput, docs/bench.md "Workloads")
     * at about 1 s each, at quick and full scale alike (the full suite has no
     * time left for more); bench/scripts/standard.sh runs the published sizes. */
    {"larson", "throughput", "larson",
     {"--threads 2 --blocks 100 --rounds 10 --seconds 0.2", "--threads 2 --seconds 1", "--threads 2 --seconds 1"},
     "ns_per_op,mops", {0.3, 1.3, 1.3}, 0,
     "Larson server: 8..1000 B, 5000 blocks a thread, each thread hands its blocks to a new thread"},
    {"xmalloc", "throughput", "xmalloc",
     {"--threads 1 --batch 256 --seconds 0.2", "--threads 2 --seconds 1", "--threads 2 --seconds 1"},
     "ns_per_free,mfrees_per_s", {0.3, 1.2, 1.2}, 0,
     "xmalloc-test: 2 threads malloc 64 B objects in batches, 2 others free them"},
    {"rptest", "throughput", "rptest",
     {"--threads 2 --loops 20 --slots 100 --runs 1", "--threads 2 --runs 10", "--threads 2 --runs 10"},
     "ns_per_op,mops", {0.05, 0.8, 0.8}, 0,
     "rpmalloc's benchmark: random sizes 8..16000 B, a batch freed by another thread every 2nd loop"},
    {"mstress", "throughput", "mstress",
     {"--threads 2 --scale 2 --iters 2", "--threads 2 --scale 50 --iters 25", "--threads 2 --scale 50 --iters 25"},
     "wall_ms,ns_per_block", {0.05, 0.7, 0.7}, 1,
     "mimalloc's test-stress: threads allocate, trade blocks, exit, and new threads start"},
    {"alloc-test1", "throughput", "alloc_test",
     {"--iters 10000 --slots 4096", "--iters 10000000", "--iters 10000000"},
     "ns_per_op", {0.05, 1.0, 1.0}, 0, "OLogN's alloc-test, 1 thread: Pareto-picked slots, sizes to 1 KiB, memset and read"},
    {"alloc-testN", "throughput", "alloc_test",
     {"--threads 2 --iters 10000 --slots 4096", "--threads 2 --iters 5000000", "--threads 2 --iters 5000000"},
     "ns_per_op", {0.05, 1.2, 1.2}, 0, "the same with 2 threads"},
    {"cache-thrash", "throughput", "cache_thrash",
     {"--threads 2 --iterations 10 --repetitions 1000", "--threads 2 --repetitions 400000",
      "--threads 2 --repetitions 400000"},
     "wall_ms", {0.05, 0.7, 0.7}, 0, "Hoard's cache-thrash: active false sharing between 2 threads on 1-byte objects"},
    {"cache-scratch", "throughput", "cache_scratch",
     {"--threads 2 --iters 200 --repeat 10", "--threads 2 --iters 1000 --objsize 1 --repetitions 400000",
      "--threads 2 --iters 1000 --objsize 1 --repetitions 400000"},
     "wall_ms,ns_per_iter", {0.05, 0.7, 0.7}, 0,
     "Hoard's cache-scratch: passive false sharing, objects handed from the main thread to 2 threads"},
    {"glibc-thread", "throughput", "glibc_bench",
     {"--threads 2 --blocks 64 --seconds 0.1", "--threads 2 --seconds 1", "--threads 2 --seconds 1"},
     "ns_per_iter,mops", {0.2, 1.1, 1.1}, 0,
     "glibc bench-malloc-thread: 2 threads replace random blocks of 4..32768 B (mostly small), write all bytes"},
    {"glibc-thr-large", "throughput", "glibc_bench",
     {"--threads 2 --blocks 64 --min 1K --max 64K --dist uniform --touch page --seconds 0.1",
      "--threads 2 --min 1K --max 64K --dist uniform --touch page --seconds 1",
      "--threads 2 --min 1K --max 64K --dist uniform --touch page --seconds 1"},
     "ns_per_iter,mops", {0.2, 1.1, 1.1}, 1,
     "the same with blocks of 1..64 KiB (one byte per page written)"},
    {"glibc-simple", "throughput", "glibc_simple",
     {"--iters 20000", "--iters 500000", "--iters 2000000"},
     "wall_ms,ns_per_pair", {0.1, 0.3, 1.0}, 0,
     "glibc bench-malloc-simple: steps of 25..1600 blocks of 16, 32, 64 B malloc'd, written, freed in order"},
    {"sh6bench", "throughput", "sh6bench",
     {"--threads 2 --calls 50", "--calls 10000", "--calls 10000"},
     "wall_ms,ns_per_malloc", {0.1, 1.2, 1.2}, 1,
     "MicroQuill's sh6bench: 2 threads a core malloc blocks under 1000 B, free them by thousands in and against order"},
    {"malloc-large", "throughput", "malloc_large",
     {"--iters 50", "--iters 2000", "--iters 5000"},
     "wall_ms,us_per_block", {0.1, 0.3, 0.6}, 0,
     "mimalloc-bench's malloc-large: 2 MiB blocks, each written whole and freed"},
    {"mleak", "throughput", "mleak",
     {"--rounds 20", "--rounds 200", "--rounds 500"},
     "wall_ms,us_per_thread", {0.1, 0.3, 0.5}, 1,
     "mimalloc-bench's mleak: 10 threads a round each leave one 128-byte block behind and exit"},
    {"aging", "throughput", "aging",
     {"--peak 4M --rounds 2 --sleep-ms 100", "--peak 256M --rounds 4", "--peak 512M --rounds 6"},
     "rss_kib,thp_pct,rss_over_live,churn_ms", {0.3, 3.0, 5.0}, 1,
     "heap grows to the peak, frees 80%, changes its size mix; RSS and huge pages after malloc_trim + 1.5 s"},
    /* Real programs from Debian's packages (bench/real/realprog.c), each
     * left out with a note when not installed (bench_main.c). */
    {"real-lua", "real", "realprog", {"--program lua --size 8", "--program lua --quick", "--program lua"},
     "wall_ms", {0.1, 0.4, 1.7}, 0, "lua5.4: binary trees and a long string join, all through realloc and free"},
    {"real-sqlite", "real", "realprog", {"--program sqlite --size 2000", "--program sqlite --quick", "--program sqlite"},
     "wall_ms", {0.1, 0.3, 1.2}, 0, "sqlite3 :memory:: rows inserted, indexed, grown, deleted and grouped"},
    {"real-python", "real", "realprog", {"--program python --size 2000", "--program python --quick", "--program python"},
     "wall_ms", {0.1, 0.6, 1.7}, 0, "Debian's python3: a dict to JSON and back, compared and sorted"},
    {"real-perl", "real", "realprog", {"--program perl --size 2000", "--program perl --quick", "--program perl"},
     "wall_ms", {0.1, 0.3, 0.8}, 0, "perl: a hash of strings, half deleted, then arrays from a map (a growing stack)"},
    {"real-redis", "real", "realprog", {"--program redis --size 2000", "--program redis --quick", "--program redis"},
     "ns_per_req,wall_ms", {0.5, 1.0, 3.0}, 0,
     "redis-server under the allocator, mimalloc-bench's redis-benchmark lpush/lrange command"},
};

const int hpm_bench_n_cases = (int)(sizeof hpm_bench_cases / sizeof hpm_bench_cases[0]);

const hpm_bench_case_t *hpm_bench_case_find(const char *name) {
    for (int i = 0; i < hpm_bench_n_cases; i++)
        if (!strcmp(hpm_bench_cases[i].name, name)) return &hpm_bench_cases[i];
    return NULL;
}

int hpm_bench_metric_higher_better(const char *metric) {
    static const char *const higher[] = {"mops", "thp_pct", "thp_peak_pct", "writes_per_s", "instructions"};
    for (size_t i = 0; i < sizeof higher / sizeof higher[0]; i++)
        if (!strcmp(metric, higher[i])) return 1;
    return 0;
}

const char *hpm_bench_metric_unit(const char *metric) {
    static const struct { const char *prefix, *unit; } units[] = {
        {"ns_per_op", "ns per malloc+free (or per replacement)"}, {"mops", "million operations per second"},
        {"nodes_ns_gmean", "ns per node, geometric mean over sizes, one malloc per node"},
        {"calloc_ns_gmean", "ns per node, geometric mean over sizes, one calloc"},
        {"nodes_ns@", "ns per node at this working set, one malloc per node"},
        {"calloc_ns@", "ns per node at this working set, one calloc"},
        {"total_ms", "ms for the whole cluster sweep"}, {"ms_k", "ms for this cluster count"},
        {"us_per_rep", "us per scheduler run"}, {"ns_per_block", "ns per block produced and freed"},
        {"ns_per_iter", "ns per malloc/write/free iteration"}, {"ns_per_free", "ns per free by the freeing threads"},
        {"mfrees_per_s", "million frees per second"}, {"wall_ms", "wall-clock ms of the whole run"}, {"rss_kib", "RSS at the end, KiB"},
        {"thp_pct", "AnonHugePages / Anonymous at the end, %"}, {"rss_over_live", "RSS / live bytes at the end"},
        {"churn_ms", "ms of grow/shrink rounds"}, {"wall_s", "wall-clock seconds"}, {"user_s", "user CPU seconds"},
        {"sys_s", "system CPU seconds"}, {"maxrss_kib", "peak RSS, KiB"}, {"minflt", "minor page faults"},
        {"majflt", "major page faults"}, {"thp_peak_pct", "peak AnonHugePages / Anonymous, %"},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strncmp(metric, units[i].prefix, strlen(units[i].prefix))) return units[i].unit;
    return "";
}
