/* sim_trace.c: the trace format and the record/replay round trip. A
 * workload run with recording, replayed from its trace under the same
 * policy, must end in identical statistics and an identical time series;
 * malformed lines must be rejected with their line number; the ID map
 * must survive heavy churn; runs must be deterministic for a seed. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "hpmsim.h"
#include "testhelper.h"

static void parse_cases(void) {
    sim_op_t op;
    char err[160];
    CHECK(sim_trace_parse_line("a 17 3 U\n", &op, err, sizeof err) == 1 && op.kind == 'a' && op.id == 17 &&
          op.order == 3 && op.type == SIM_UNMOVABLE, "a line");
    CHECK(sim_trace_parse_line("a 4294967294 0 movable", &op, err, sizeof err) == 1 && op.id == 4294967294u &&
          op.type == SIM_MOVABLE, "long type name, largest id");
    CHECK(sim_trace_parse_line("  f\t9", &op, err, sizeof err) == 1 && op.kind == 'f' && op.id == 9, "blanks");
    CHECK(sim_trace_parse_line("r 1", &op, err, sizeof err) == 1 && op.kind == 'r', "r");
    CHECK(sim_trace_parse_line("h 2", &op, err, sizeof err) == 1 && op.kind == 'h', "h");
    CHECK(sim_trace_parse_line("c", &op, err, sizeof err) == 1 && op.kind == 'c', "c");
    CHECK(sim_trace_parse_line("k", &op, err, sizeof err) == 1 && op.kind == 'k', "k");
    CHECK(sim_trace_parse_line("t 123456789012", &op, err, sizeof err) == 1 && op.n == 123456789012ull, "t");
    CHECK(sim_trace_parse_line("# comment", &op, err, sizeof err) == 0, "comment");
    CHECK(sim_trace_parse_line("   \n", &op, err, sizeof err) == 0, "blank");
    const char *bad[] = {"x 1", "a 1 2", "a 1 11 U", "a 1 2 Q", "a -1 0 U", "f", "f 1 2", "c 1", "t", "t -5",
                         "a 4294967295 0 U", "f 12a", "aa 1", "t 99999999999999999999999", "h 1 2 3 4 5 6 7"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        CHECK(sim_trace_parse_line(bad[i], &op, err, sizeof err) == -1 && err[0], "'%s' rejected (%s)", bad[i], err);
    }
    /* write then parse gives the same op */
    sim_op_t ops[] = {{.kind = 'a', .id = 5, .order = 10, .type = SIM_RECLAIMABLE}, {.kind = 'h', .id = 6},
                      {.kind = 't', .n = 77}, {.kind = 'c'}, {.kind = 'k'}, {.kind = 'r', .id = 5}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        char buf[128];
        FILE *f = fmemopen(buf, sizeof buf, "w");
        sim_trace_write_op(f, &ops[i]);
        fclose(f);
        sim_op_t back;
        CHECK(sim_trace_parse_line(buf, &back, err, sizeof err) == 1 && back.kind == ops[i].kind &&
              back.id == ops[i].id && back.order == ops[i].order && back.type == ops[i].type && back.n == ops[i].n,
              "round trip of '%s'", buf);
    }
}

static int same_result(const sim_result_t *a, const sim_result_t *b) {
    if (memcmp(&a->stats, &b->stats, sizeof a->stats)) return 0;
    if (a->series.n != b->series.n) return 0;
    return !memcmp(a->series.v, b->series.v, a->series.n * sizeof *a->series.v);
}

static void round_trip(const char *workload, enum sim_policy p) {
    char path[] = "/tmp/hpmsim_trace_XXXXXX", err[256] = "";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    FILE *rec = fdopen(fd, "w");
    sim_config_t cfg = {.mem_mib = 64, .policy = p, .prudence = p != SIM_LINUX, .rcu_grace_ops = 500};
    sim_workload_t w = {.name = workload, .seed = 7, .rounds = 3, .kernel_bp = 8000, .keep_per_block = 2, .cache_fill = 1, .dcache_end_pct = 10,
                        .ops = 300000, .rcu_pct = 50, .hp_every_ops = 500, .sample_every_ops = 5000};
    sim_result_t orig, again, replay;
    CHECK(sim_run_workload(&cfg, &w, rec, &orig, err, sizeof err) == 0, "%s run: %s", workload, err);
    fclose(rec);
    CHECK(sim_run_workload(&cfg, &w, NULL, &again, err, sizeof err) == 0, "second run: %s", err);
    CHECK(same_result(&orig, &again), "%s/%s: same seed, same result", workload, sim_policy_name(p));
    sim_workload_t tw = {.name = "trace", .trace_path = path, .sample_every_ops = 5000};
    CHECK(sim_run_workload(&cfg, &tw, NULL, &replay, err, sizeof err) == 0, "replay: %s", err);
    CHECK(orig.stats.allocs > 1000 && orig.stats.hp_requests > 0, "%s did real work (%llu allocs, %llu hp)", workload,
          (unsigned long long)orig.stats.allocs, (unsigned long long)orig.stats.hp_requests);
    CHECK(same_result(&orig, &replay), "%s/%s: replay of the recording matches (clock %llu vs %llu, hybrid %u vs %u)",
          workload, sim_policy_name(p), (unsigned long long)orig.stats.clock_ops,
          (unsigned long long)replay.stats.clock_ops, orig.stats.hybrid_blocks, replay.stats.hybrid_blocks);
    uint64_t ops = 0, mem = 0;
    CHECK(sim_trace_check(path, &ops, &mem, err, sizeof err) == 0 && mem == 64 && ops > 1000,
          "header carries mem_mib (%llu), %llu ops", (unsigned long long)mem, (unsigned long long)ops);
    sim_result_free(&orig); sim_result_free(&again); sim_result_free(&replay);
    unlink(path);
}

static void replay_errors(void) {
    char path[] = "/tmp/hpmsim_bad_XXXXXX", err[256] = "";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    fputs("# test\na 1 0 M\nf 1\n\na 2 0 U\nf 99\nbogus line\n", f);
    fclose(f);
    sim_config_t cfg = {.mem_mib = 8, .policy = SIM_LINUX};
    sim_workload_t tw = {.name = "trace", .trace_path = path};
    sim_result_t r;
    CHECK(sim_run_workload(&cfg, &tw, NULL, &r, err, sizeof err) == -1 && strstr(err, ":7:"), "line 7 named: %s", err);
    sim_result_free(&r);
    f = fopen(path, "w");
    fputs("a 1 0 M\na 1 0 M\n", f);
    fclose(f);
    CHECK(sim_run_workload(&cfg, &tw, NULL, &r, err, sizeof err) == -1 && strstr(err, ":2:") && strstr(err, "live"),
          "allocating a live id is an error at line 2: %s", err);
    sim_result_free(&r);
    f = fopen(path, "w");
    fputs("a 1 0 M\nf 5\nr 1\nt 10\nc\nk\nh 3\n", f);
    fclose(f);
    CHECK(sim_run_workload(&cfg, &tw, NULL, &r, err, sizeof err) == 0, "valid trace: %s", err);
    CHECK(r.skipped_frees == 1 && r.stats.clock_ops == 16 && r.stats.rcu_deferred == 1 && r.stats.hp_success == 1,
          "skipped %llu clock %llu", (unsigned long long)r.skipped_frees, (unsigned long long)r.stats.clock_ops);
    sim_result_free(&r);
    tw.trace_path = "/nonexistent/trace";
    CHECK(sim_run_workload(&cfg, &tw, NULL, &r, err, sizeof err) == -1 && strstr(err, "cannot open"), "%s", err);
    unlink(path);
}

/* Many IDs live at once and freed in a scattered order: the hash map's
 * deletion must keep every other ID findable. */
static void id_churn(void) {
    char err[256];
    sim_config_t cfg = {.mem_mib = 64, .policy = SIM_LINUX};
    sim_t *s = sim_create(&cfg, err, sizeof err);
    sim_driver_t *d = sim_driver_create(s, 1000, NULL);
    enum { N = 12000 };
    int ok = 1;
    for (uint32_t i = 0; i < N; i++) {
        sim_op_t a = {.kind = 'a', .id = i * 2654435761u % 4000000000u, .order = 0, .type = SIM_MOVABLE};
        if (sim_driver_apply(d, &a, NULL, err, sizeof err) != 1) ok = 0;
    }
    for (uint32_t k = 0; k < N; k++) {
        uint32_t i = (k * 7919u) % N;
        sim_op_t f = {.kind = 'f', .id = i * 2654435761u % 4000000000u};
        if (sim_driver_apply(d, &f, NULL, err, sizeof err) != 1) ok = 0;
    }
    CHECK(ok && sim_driver_skipped_frees(d) == 0, "every id found once");
    sim_stats_t st;
    sim_get_stats(s, &st);
    CHECK(st.free_pages == st.total_pages, "all freed");
    sim_driver_destroy(d);
    sim_destroy(s);
}

int main(void) {
    parse_cases();
    replay_errors();
    id_churn();
    round_trip("server", SIM_LINUX);
    round_trip("server", SIM_ILLUMINATOR);
    round_trip("fragmenter", SIM_LINUX);
    round_trip("fragmenter", SIM_ILLUMINATOR);
    round_trip("server", SIM_ILLUMINATOR_PAPER);
    round_trip("fragmenter", SIM_ILLUMINATOR_PAPER);
    return TEST_DONE();
}
