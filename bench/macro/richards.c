/* richards.c: Martin Richards' task-scheduler benchmark (the classic BCPL
 * benchmark in C form): an idle task, a worker, two handlers and two
 * devices exchange packets through queues under a priority scheduler.
 * Every repetition builds its task control blocks and packets with malloc
 * (setup), runs the scheduler, checks the standard correctness
 * counts, and frees everything. With the standard Count = 10000 the
 * counts are qpktcount = 23246 and holdcount = 9297; the program also
 * knows the counts for other --count values only by running, so it checks
 * the standard values when --count is 10000 and, for every count, that
 * each repetition gives the same counts as the first, and that exactly
 * the 8 packets are left to free at the end.
 *
 * Queues allocate too: unless --classic, every packet sent (qpkt) travels
 * as a fresh malloc'd copy and the old packet is freed, so one repetition
 * makes about 23k malloc/free pairs whose objects then sit in queues. The
 * sender no longer refers to a packet once it sends it, so the classic
 * semantics and counts are unchanged.
 *
 * Result: RESULT bench=richards queue_alloc=0/1 reps=N count=C qpkt=Q hold=H
 *         us_per_rep=X check=ok */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench_common.h"

enum { I_IDLE = 1, I_WORK, I_HANDLERA, I_HANDLERB, I_DEVA, I_DEVB, TASKTAB_SIZE = 10 };
enum { PKTBIT = 1, WAITBIT = 2, HOLDBIT = 4 };
enum { S_RUN = 0, S_RUNPKT = 1, S_WAIT = 2, S_WAITPKT = 3, S_HOLD = 4, S_HOLDPKT = 5,
       S_HOLDWAIT = 6, S_HOLDWAITPKT = 7 };
enum { K_DEV = 1000, K_WORK = 1001, BUFSIZE = 3 };
#define MAXINT 32767

typedef struct packet {
    struct packet *link;
    int id, kind, a1;
    char a2[BUFSIZE + 1];
} packet_t;

struct task;
typedef struct task *(*task_fn)(packet_t *);

typedef struct task {
    struct task *link;
    int id, pri;
    packet_t *wkq;
    int state;
    task_fn fn;
    intptr_t v1, v2;
} task_t;

/* The scheduler's state (the classic program keeps it global). */
static task_t *tasktab[TASKTAB_SIZE + 1], *tasklist, *tcb;
static int taskid;
static intptr_t v1, v2;
static long qpktcount, holdcount;
static const char alphabet[] = "0ABCDEFGHIJKLMNOPQRSTUVWXYZ";
static int copy_on_send = 1;   /* 0 with --classic */

static void createtask(int id, int pri, packet_t *wkq, int state, task_fn fn, intptr_t a, intptr_t b) {
    task_t *t = bench_xmalloc(sizeof *t);
    tasktab[id] = t;
    *t = (task_t){.link = tasklist, .id = id, .pri = pri, .wkq = wkq, .state = state, .fn = fn, .v1 = a, .v2 = b};
    tasklist = t;
}

static packet_t *pkt(packet_t *link, int id, int kind) {
    packet_t *p = bench_xmalloc(sizeof *p);
    *p = (packet_t){.link = link, .id = id, .kind = kind};
    return p;
}

static task_t *findtcb(int id) {
    task_t *t = (id >= 1 && id <= TASKTAB_SIZE) ? tasktab[id] : NULL;
    if (!t) bench_check_failed("bad task id %d", id);
    return t;
}

static task_t *wait_task(void) { tcb->state |= WAITBIT; return tcb; }

static task_t *holdself(void) { holdcount++; tcb->state |= HOLDBIT; return tcb->link; }

static task_t *release(int id) {
    task_t *t = findtcb(id);
    t->state &= ~HOLDBIT;
    return t->pri > tcb->pri ? t : tcb;
}

static void append(packet_t *p, packet_t **q) {
    p->link = NULL;
    while (*q) q = &(*q)->link;
    *q = p;
}

static task_t *qpkt(packet_t *p) {
    task_t *t = findtcb(p->id);
    qpktcount++;
    if (copy_on_send) {   /* the message travels as a fresh allocation */
        packet_t *copy = bench_xmalloc(sizeof *copy);
        *copy = *p;
        free(p);
        p = copy;
    }
    p->link = NULL;
    p->id = taskid;
    if (!t->wkq) {
        t->wkq = p;
        t->state |= PKTBIT;
        if (t->pri > tcb->pri) return t;
    } else {
        append(p, &t->wkq);
    }
    return tcb;
}

static task_t *idlefn(packet_t *p) {
    (void)p;
    if (--v2 == 0) return holdself();
    if ((v1 & 1) == 0) { v1 = (v1 >> 1) & MAXINT; return release(I_DEVA); }
    v1 = ((v1 >> 1) & MAXINT) ^ 0xD008;
    return release(I_DEVB);
}

static task_t *workfn(packet_t *p) {
    if (!p) return wait_task();
    v1 = I_HANDLERA + I_HANDLERB - v1;
    p->id = (int)v1;
    p->a1 = 0;
    for (int i = 0; i <= BUFSIZE; i++) {
        if (++v2 > 26) v2 = 1;
        p->a2[i] = alphabet[v2];
    }
    return qpkt(p);
}

static task_t *handlerfn(packet_t *p) {
    if (p) append(p, p->kind == K_WORK ? (packet_t **)&v1 : (packet_t **)&v2);
    if (v1) {
        packet_t *work = (packet_t *)v1;
        int count = work->a1;
        if (count > BUFSIZE) { v1 = (intptr_t)work->link; return qpkt(work); }
        if (v2) {
            packet_t *dev = (packet_t *)v2;
            v2 = (intptr_t)dev->link;
            dev->a1 = work->a2[count];
            work->a1 = count + 1;
            return qpkt(dev);
        }
    }
    return wait_task();
}

static task_t *devfn(packet_t *p) {
    if (!p) {
        if (!v1) return wait_task();
        p = (packet_t *)v1;
        v1 = 0;
        return qpkt(p);
    }
    v1 = (intptr_t)p;
    return holdself();
}

static void schedule(void) {
    while (tcb) {
        packet_t *p = NULL;
        switch (tcb->state) {
        case S_WAITPKT:
            p = tcb->wkq;
            tcb->wkq = p->link;
            tcb->state = tcb->wkq ? S_RUNPKT : S_RUN;
            /* fall through */
        case S_RUN:
        case S_RUNPKT: {
            taskid = tcb->id;
            v1 = tcb->v1;
            v2 = tcb->v2;
            task_t *next = tcb->fn(p);
            tcb->v1 = v1;
            tcb->v2 = v2;
            tcb = next;
            break;
        }
        case S_WAIT: case S_HOLD: case S_HOLDPKT: case S_HOLDWAIT: case S_HOLDWAITPKT:
            tcb = tcb->link;
            break;
        default:
            bench_check_failed("task %d in impossible state %d", tcb->id, tcb->state);
        }
    }
}

/* Frees every packet reachable from a queue or a handler's private list. */
static long free_packets(packet_t *p) {
    long n = 0;
    while (p) { packet_t *next = p->link; free(p); p = next; n++; }
    return n;
}

static void run_once(long count) {
    memset(tasktab, 0, sizeof tasktab);
    tasklist = NULL;
    packet_t *wkq = NULL;
    createtask(I_IDLE, 0, NULL, S_RUN, idlefn, 1, count);
    wkq = pkt(NULL, 0, K_WORK);
    wkq = pkt(wkq, 0, K_WORK);
    createtask(I_WORK, 1000, wkq, S_WAITPKT, workfn, I_HANDLERA, 0);
    wkq = pkt(NULL, I_DEVA, K_DEV);
    wkq = pkt(wkq, I_DEVA, K_DEV);
    wkq = pkt(wkq, I_DEVA, K_DEV);
    createtask(I_HANDLERA, 2000, wkq, S_WAITPKT, handlerfn, 0, 0);
    wkq = pkt(NULL, I_DEVB, K_DEV);
    wkq = pkt(wkq, I_DEVB, K_DEV);
    wkq = pkt(wkq, I_DEVB, K_DEV);
    createtask(I_HANDLERB, 3000, wkq, S_WAITPKT, handlerfn, 0, 0);
    createtask(I_DEVA, 4000, NULL, S_WAIT, devfn, 0, 0);
    createtask(I_DEVB, 5000, NULL, S_WAIT, devfn, 0, 0);
    tcb = tasklist;
    qpktcount = holdcount = 0;
    schedule();
    /* The 8 packets now sit in task queues, handler lists or device slots. */
    long freed = 0;
    for (task_t *t = tasklist, *next; t; t = next) {
        next = t->link;
        freed += free_packets(t->wkq);
        if (t->fn == handlerfn) freed += free_packets((packet_t *)t->v1) + free_packets((packet_t *)t->v2);
        if (t->fn == devfn && t->v1) { free((packet_t *)t->v1); freed++; }   /* one packet; its link is stale */
        free(t);
    }
    if (freed != 8) bench_check_failed("found %ld packets at the end, the benchmark has 8", freed);
}

static void usage(void) {
    printf("usage: richards [--reps N] [--count C] [--classic] [--seed S]\n"
           "  Martin Richards' scheduler benchmark; each repetition mallocs its tasks and\n"
           "  packets, runs, checks the counts and frees them.\n"
           "  --classic  packets are not copied on each send (allocation only in setup)\n"
           "  Defaults: --reps 100 --count 10000 (standard counts 23246 / 9297)\n"
           "  --seed is accepted for uniformity; the benchmark is deterministic.\n"
           "  Prints: RESULT bench=richards queue_alloc=0/1 reps=N count=C qpkt=Q hold=H us_per_rep=X check=ok\n");
}

int main(int argc, char **argv) {
    uint64_t reps = 100, count = 10000, seed = 1;
    static const struct option opts[] = {{"reps", 1, 0, 'r'}, {"count", 1, 0, 'c'}, {"seed", 1, 0, 's'},
                                         {"classic", 0, 0, 'C'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'r': reps = bench_arg_size("richards", "--reps", optarg, 1, 100000000); break;
        case 'c': count = bench_arg_size("richards", "--count", optarg, 2, 100000000); break;
        case 's': seed = bench_arg_size("richards", "--seed", optarg, 0, UINT64_MAX); break;
        case 'C': copy_on_send = 0; break;
        case 'h': usage(); return 0;
        default: bench_usage_error("richards", "unknown option");
        }
    }
    if (optind < argc) bench_usage_error("richards", "unexpected argument '%s'", argv[optind]);
    (void)seed;
    long first_q = -1, first_h = -1;
    uint64_t t0 = bench_now_ns();
    for (uint64_t r = 0; r < reps; r++) {
        run_once((long)count);
        if (r == 0) { first_q = qpktcount; first_h = holdcount; }
        if (qpktcount != first_q || holdcount != first_h)
            bench_check_failed("repetition %llu: qpktcount %ld holdcount %ld, first gave %ld %ld",
                               (unsigned long long)r, qpktcount, holdcount, first_q, first_h);
    }
    double us = (double)(bench_now_ns() - t0) / 1e3 / (double)reps;
    if (count == 10000 && (first_q != 23246 || first_h != 9297))
        bench_check_failed("qpktcount %ld holdcount %ld, standard values are 23246 and 9297", first_q, first_h);
    bench_result("richards", "queue_alloc=%d reps=%llu count=%llu qpkt=%ld hold=%ld us_per_rep=%.3f check=ok",
                 copy_on_send, (unsigned long long)reps, (unsigned long long)count, first_q, first_h, us);
    return 0;
}
