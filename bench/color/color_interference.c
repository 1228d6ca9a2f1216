/* color_interference.c: the page-colouring benchmark (BPM's experiment in
 * user space). A cache-sensitive thread chases pointers in random order
 * through 64-byte nodes covering about half the LLC; beside it a streaming
 * thread sweeps a buffer several times the LLC. We measure the sensitive
 * thread's nanoseconds per access in three modes:
 *   alone        no streamer (the baseline);
 *   shared       streamer running, no colours;
 *   partitioned  streamer running, but the streamer's slabs get only a
 *                small colour share (--streamer-colours, default colour 0)
 *                and the sensitive thread the rest, via hpm_thread_colors.
 * Both working sets are small objects (64 B nodes, 1 KiB stream chunks) so
 * that hpmalloc's slab colouring applies. hpm_thread_colors is looked up
 * with dlsym, so the program runs under any allocator; without it the
 * partitioned mode exits 2 ("colours unavailable"), never a made-up time.
 * Checked: the chase visits every node once per lap (a broken cycle exits
 * 3); the streamer's checksum is consumed. Output: one RESULT line. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#include "bench_common.h"

typedef struct node { struct node *next; uint64_t pad[7]; } node_t;   /* one cache line */
typedef int (*colours_fn)(uint64_t);
typedef long (*option_fn)(int);

typedef struct {
    uint64_t llc_bytes, sensitive_bytes, stream_bytes, duration_ms;
    uint64_t streamer_colours;
    const char *mode;
} cfg_t;

static atomic_int stop_flag, streamer_ready;
static colours_fn set_colours;
static unsigned colour_count = 16;

static uint64_t llc_from_sysfs(void) {
    uint64_t best = 0;
    for (int i = 0; i < 8; i++) {
        char path[96], buf[32];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(buf, sizeof buf, f)) {
            uint64_t v;
            buf[strcspn(buf, "\n")] = 0;
            if (bench_parse_size(buf, &v) == 0 && v > best) best = v;
        }
        fclose(f);
    }
    return best ? best : 8ull << 20;
}

typedef struct { const cfg_t *c; uint64_t mask; uint64_t checksum; int ok; } stream_arg_t;

static void *streamer(void *arg) {
    stream_arg_t *a = arg;
    if (a->mask && set_colours(a->mask) != 0) { a->ok = 0; atomic_store(&streamer_ready, 1); return NULL; }
    size_t n = a->c->stream_bytes / 1024;
    char **chunk = bench_scratch_alloc(n * sizeof *chunk);
    for (size_t i = 0; i < n; i++) { chunk[i] = bench_xmalloc(1024); memset(chunk[i], (int)i, 1024); }
    atomic_store(&streamer_ready, 1);
    uint64_t sum = 0;
    while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
        for (size_t i = 0; i < n; i++) {
            uint64_t *w = (uint64_t *)chunk[i];
            for (int k = 0; k < 128; k += 8) sum += w[k];
            w[0] = sum;
        }
    }
    a->checksum = sum;
    for (size_t i = 0; i < n; i++) free(chunk[i]);
    bench_scratch_free(chunk, n * sizeof *chunk);
    a->ok = 1;
    return NULL;
}

/* Builds the sensitive thread's random cycle; returns its start. */
static node_t *build_cycle(size_t n, node_t **nodes) {
    for (size_t i = 0; i < n; i++) nodes[i] = bench_xmalloc(sizeof(node_t));
    bench_rng_t rng;
    bench_rng_seed(&rng, 42);
    for (size_t i = n - 1; i > 0; i--) {   /* Sattolo: one cycle through all */
        size_t j = (size_t)bench_rng_below(&rng, i);
        node_t *t = nodes[i]; nodes[i] = nodes[j]; nodes[j] = t;
    }
    for (size_t i = 0; i < n; i++) nodes[i]->next = nodes[(i + 1) % n];
    return nodes[0];
}

static void parse(int argc, char **argv, cfg_t *c) {
    c->llc_bytes = llc_from_sysfs();
    c->sensitive_bytes = 0;
    c->stream_bytes = 0;
    c->duration_ms = 2000;
    c->streamer_colours = 1;
    c->mode = "shared";
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help")) {
            printf("usage: %s [--mode alone|shared|partitioned] [--llc BYTES] [--sensitive BYTES] [--stream BYTES]\n"
                   "          [--duration-ms N] [--streamer-colours MASK]\n", argv[0]);
            exit(0);
        }
        if (!v) bench_usage_error(argv[0], "%s needs a value", a);
        if (!strcmp(a, "--mode")) c->mode = v;
        else if (!strcmp(a, "--llc")) c->llc_bytes = bench_arg_size(argv[0], a, v, 64 << 10, 1ull << 34);
        else if (!strcmp(a, "--sensitive")) c->sensitive_bytes = bench_arg_size(argv[0], a, v, 4096, 1ull << 34);
        else if (!strcmp(a, "--stream")) c->stream_bytes = bench_arg_size(argv[0], a, v, 4096, 1ull << 36);
        else if (!strcmp(a, "--duration-ms")) c->duration_ms = bench_arg_size(argv[0], a, v, 10, 3600000);
        else if (!strcmp(a, "--streamer-colours")) c->streamer_colours = strtoull(v, NULL, 0);
        else bench_usage_error(argv[0], "unknown option %s", a);
    }
    if (strcmp(c->mode, "alone") && strcmp(c->mode, "shared") && strcmp(c->mode, "partitioned"))
        bench_usage_error(argv[0], "--mode must be alone, shared or partitioned");
    if (!c->sensitive_bytes) c->sensitive_bytes = c->llc_bytes / 2;
    if (!c->stream_bytes) c->stream_bytes = c->llc_bytes * 4;
}

int main(int argc, char **argv) {
    cfg_t c;
    parse(argc, argv, &c);
    set_colours = (colours_fn)dlsym(RTLD_DEFAULT, "hpm_thread_colors");
    option_fn opt = (option_fn)dlsym(RTLD_DEFAULT, "hpm_option_get");
    if (opt) colour_count = (unsigned)opt(9 /* HPM_OPT_COLOR_COUNT */);
    if (colour_count < 2 || colour_count > 64) colour_count = 16;
    uint64_t all = colour_count >= 64 ? ~0ull : (1ull << colour_count) - 1;
    int partitioned = !strcmp(c.mode, "partitioned");
    uint64_t smask = c.streamer_colours & all, mask_sensitive = all & ~smask;
    if (partitioned && !set_colours) {
        fprintf(stderr, "colours unavailable: hpm_thread_colors not found (run under hpmalloc)\n");
        return BENCH_EXIT_USAGE;
    }
    if (partitioned && (!smask || !mask_sensitive)) bench_usage_error(argv[0], "--streamer-colours must leave colours to both threads");
    if (partitioned && set_colours(mask_sensitive) != 0) bench_check_failed("hpm_thread_colors(0x%llx) failed", (unsigned long long)mask_sensitive);
    size_t n = c.sensitive_bytes / sizeof(node_t);
    node_t **nodes = bench_scratch_alloc(n * sizeof *nodes);
    node_t *p = build_cycle(n, nodes);
    pthread_t st;
    stream_arg_t sa = {.c = &c, .mask = partitioned ? smask : 0};
    int with_streamer = strcmp(c.mode, "alone") != 0;
    if (with_streamer) {
        pthread_create(&st, NULL, streamer, &sa);
        while (!atomic_load(&streamer_ready)) usleep(1000);
    }
    for (size_t i = 0; i < n; i++) p = p->next;   /* warm: one lap */
    uint64_t t0 = bench_now_ns(), end = t0 + c.duration_ms * 1000000ull, accesses = 0, laps = 0;
    node_t *start = p;
    while (bench_now_ns() < end) {
        for (size_t i = 0; i < n; i++) p = p->next;
        accesses += n;
        laps++;
        if (p != start) bench_check_failed("the chase did not come back to its start after %zu steps", n);
    }
    double ns = (double)(bench_now_ns() - t0) / (double)accesses;
    atomic_store(&stop_flag, 1);
    if (with_streamer) {
        pthread_join(st, NULL);
        if (!sa.ok) bench_check_failed("streamer could not set its colours");
    }
    for (size_t i = 0; i < n; i++) free(nodes[i]);
    printf("# sensitive %llu B in %zu nodes, stream %llu B, %llu laps; streamer sum %llx\n",
           (unsigned long long)c.sensitive_bytes, n, (unsigned long long)c.stream_bytes,
           (unsigned long long)laps, (unsigned long long)sa.checksum);
    bench_result("color-interference", "mode=%s ns_per_access=%.3f accesses=%llu llc_bytes=%llu colours=%u "
                 "streamer_mask=0x%llx", c.mode, ns, (unsigned long long)accesses, (unsigned long long)c.llc_bytes,
                 colour_count, (unsigned long long)(partitioned ? smask : 0));
    return 0;
}
