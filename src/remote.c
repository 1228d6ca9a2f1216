/* remote.c: frees from other threads, as messages between heaps.
 *
 * A thread that frees a block of a slab owned by another heap does not
 * touch the slab: it reads the owner, links the block into its own outbox
 * batch for that owner (no atomic), and hands a whole batch over with one
 * CAS onto the owner's inbox when the batch is full, when its slot is needed
 * for another owner, or on the thread's slow paths and at exit. The owner
 * takes its inbox with one exchange on its slow paths (and on its own
 * remote frees, when it is not empty) and frees each block locally (or
 * forwards it, when the slab has changed hands since).
 * An owner that leaves batch after batch untaken is stalled: the freeing
 * thread then keeps its blocks in its own hand and reuses them
 * (keep_for_stalled; docs/allocator.md, "Reuse of a stalled owner's
 * blocks"). An owner that sleeps with its inbox full has the slabs that
 * the inbox empties given back by the background thread (below, "An
 * asleep owner's inbox").
 *
 * Invariants:
 * - a block on its way (outbox, inbox, another heap's hand) still counts in its slab's `used`,
 *   so the slab cannot be released, recycled or re-formatted before the
 *   message is processed; the sender never touches the span again after
 *   reading the owner (issue 13 item 6).
 * - a heap closes its inbox (HPM_INBOX_CLOSED) only after abandoning every
 *   slab it owned, so a sender that finds it closed re-reads the owner and
 *   finds someone else or the abandoned state; nothing is left in the inbox
 *   of a dead thread.
 * - heap records are never freed, so a late batch to a reused record is
 *   safe: its new thread forwards what is not its own. */
#include "internal.h"

enum { SEND_CLOSED, SEND_TAKEN, SEND_WAITING };

/* Push the list head..tail onto to's inbox: SEND_CLOSED when it is
 * closed, SEND_WAITING when what was sent before is still there. */
static int send(hpm_heap_t *to, void **head, void **tail) {
    void *old = atomic_load_explicit(&to->inbox, memory_order_relaxed);
    do {
        if (old == HPM_INBOX_CLOSED) return SEND_CLOSED;
        tail[0] = old;
    } while (!atomic_compare_exchange_weak_explicit(&to->inbox, &old, head, memory_order_release,
                                                    memory_order_relaxed));
    return old ? SEND_WAITING : SEND_TAKEN;
}

/* An owner that leaves batch after batch untaken may be asleep: the
 * background thread looks at once (heap.c, asleep_due), at most once per
 * HPM_ASLEEP_HINT_NS over the process (a busy owner that takes its inbox
 * only on its slow paths stalls its senders too). Before the background
 * thread has started, the wake finds no one waiting. */
static _Atomic uint64_t last_hint_ns;

static __attribute__((noinline, cold)) void hint_asleep(void) {
    uint64_t now = _hpm_os->now_ns(), last = atomic_load_explicit(&last_hint_ns, memory_order_relaxed);
    if (now - last < HPM_ASLEEP_HINT_NS) return;
    if (!atomic_compare_exchange_strong_explicit(&last_hint_ns, &last, now, memory_order_relaxed, memory_order_relaxed)) return;
    __atomic_add_fetch(&_hpm_asleep_hint, 1, __ATOMIC_RELAXED);
    _hpm_background_wake();
}

static void stalled_count(hpm_outbox_t *o, uint32_t n_blocks);

static void flush_slot(hpm_heap_t *h, hpm_outbox_t *o) {
    void **head = o->head, **tail = o->tail;
    hpm_heap_t *to = o->to;
    uint32_t n = o->count;
    bool was_stalled = o->stalled;   /* its blocks were freed for a stalled owner and not kept (the hand's cap) */
    h->outbox_blocks -= n;
    o->head = o->tail = NULL;
    o->count = 0;
    int sent = send(to, head, tail);
    if (sent == SEND_WAITING) {
        if (o->waiting < HPM_STALL_SENDS) o->waiting++;
        if (o->waiting >= HPM_STALL_SENDS) {
            if (!o->stalled) hint_asleep();
            o->stalled = true;
        }
        if (was_stalled) stalled_count(o, n);
        return;
    }
    o->waiting = 0;
    if (sent == SEND_TAKEN) return;
    /* the owner exited after we read it: every one of its slabs has a new
     * state now, so route each block again */
    for (void **b = head, **next; b; b = next) {
        next = b == tail ? NULL : b[0];
        _hpm_free_other(h, b);
    }
}

/* An owner that has left its inbox untaken while senders kept
 * HPM_ASLEEP_PROBES * HPM_KEEP_PROBE of its blocks is asleep (parked in a
 * join or a wait: larson's main thread, which allocated the first blocks
 * and then only waits): its blocks then wait in its inbox, as in
 * mimalloc's or snmalloc's free to a thread that sleeps, rather than
 * circulate among the threads that keep them (each free of one is a remote
 * free again, and blocks of two threads then share cache lines). The
 * count is the owner's, so a thread that comes and goes adds to what its
 * predecessors counted; it starts again when the owner takes its inbox. */
bool _hpm_remote_asleep(const hpm_heap_t *to) {
    uint64_t d = atomic_load_explicit(&to->dry_probes, memory_order_relaxed);
    uint32_t takes = atomic_load_explicit(&to->inbox_takes, memory_order_relaxed);
    return (uint32_t)(d >> 32) == takes && (uint32_t)d >= HPM_ASLEEP_PROBES;
}

static void dry_probe(hpm_heap_t *to) {
    uint64_t d = atomic_load_explicit(&to->dry_probes, memory_order_relaxed), next;
    do {
        uint64_t takes = atomic_load_explicit(&to->inbox_takes, memory_order_relaxed);
        next = (d >> 32) == takes ? d + 1 : (takes << 32 | 1);
    } while (!atomic_compare_exchange_weak_explicit(&to->dry_probes, &d, next, memory_order_relaxed, memory_order_relaxed));
}

/* A block for a stalled owner goes into this heap's hand for its class,
 * if this heap allocates that class (its current slab is in the hand) and may
 * take foreign blocks (not exiting, not coloured): its next malloc of
 * the class reuses it, where the owner would not have for who knows how
 * long. The block stays used in its slab, as it would in the owner's
 * inbox. After HPM_KEEP_PROBE blocks the slot sends again, once: a batch
 * that finds the owner's inbox taken ends the stall.
 * A current slab shows only that the heap allocated the class once: a
 * consumer that took one block of the class at its start and then only
 * frees a producer's kept every block in a hand nothing drew from (review,
 * session 49: 1.84 million of 2 million 64-byte blocks, 56 MiB a million).
 * So a hand keeps at most HPM_KEEP_HAND_BYTES (and HPM_KEEP_PROBE blocks)
 * until it runs dry, which shows that it is drawn from. */
static bool keep_for_stalled(hpm_heap_t *h, hpm_outbox_t *o, void **b) {
    if (!h->active || h->colour_mask) return false;
    if (_hpm_remote_asleep(o->to)) return false;
    unsigned cls = hpm_span_of(b)->class_idx;
    if (h->current[cls]->push_to != &h->hand[cls]) return false;   /* no hand now (heap.c) */
    if (h->kept_blocks[cls] >= hpm_keep_cap(cls)) return false;   /* to the outbox: flush_slot counts it */
    h->kept_blocks[cls]++;
    b[0] = h->hand[cls];
    h->hand[cls] = b;
    stalled_count(o, 1);
    return true;
}

/* n_blocks more freed for o's stalled owner, kept or sent: after
 * HPM_KEEP_PROBE of them the slot probes (a dry probe towards the asleep
 * verdict) and sends again, once. */
static void stalled_count(hpm_outbox_t *o, uint32_t n_blocks) {
    o->kept += n_blocks;
    if (o->kept >= HPM_KEEP_PROBE) {
        o->kept = 0;
        o->stalled = false;
        o->waiting = HPM_STALL_SENDS - 1;   /* one more waiting send stalls it again */
        dry_probe(o->to);
    }
}

void _hpm_remote_push(hpm_heap_t *h, hpm_heap_t *to, void **b) {
    if (unlikely(h == NULL)) {   /* no heap (metadata ran out): one message */
        if (send(to, b, b) == SEND_CLOSED) _hpm_free_other(NULL, b);
        return;
    }
    hpm_outbox_t *o = &h->outbox[hpm_outbox_slot(to)];
    if (o->to != to) {
        while (o->count) flush_slot(h, o);   /* a flush that routes blocks again may refill the slot */
        *o = (hpm_outbox_t){.to = to};
    }
    if (unlikely(o->stalled) && keep_for_stalled(h, o, b)) return;
    hpm_outbox_ahead(o, hpm_span_of(b), b);
    b[0] = o->head;
    if (!o->head) o->tail = b;
    o->head = b;
    o->count++;
    h->outbox_blocks++;
    if (o->count >= HPM_OUTBOX_BATCH) flush_slot(h, o);
}

void _hpm_remote_push_poll(hpm_heap_t *h, hpm_heap_t *to, void **b) {
    _hpm_remote_push(h, to, b);
    hpm_remote_poll(h);
}

void _hpm_remote_flush(hpm_heap_t *h) {
    while (h->outbox_blocks) {   /* rerouting may refill a slot */
        for (unsigned i = 0; i < HPM_OUTBOX_SLOTS; i++)
            if (h->outbox[i].count) flush_slot(h, &h->outbox[i]);
    }
}

/* Free each block of a taken inbox list: into our own slabs locally, any
 * other (a slab that changed hands) routed again. The list is linked
 * through blocks last written on the sender's core, so each step waited
 * for the miss on the next block (in rptest, this loop was a tenth of
 * the run, nearly all of it that load). A block of 24 bytes or more names
 * the block HPM_OUTBOX_AHEAD further down its batch in its third word
 * (hpm_outbox_ahead), and fetching that one now keeps that many misses
 * in flight. The pointer may be stale (the oldest blocks of a batch name
 * blocks of an earlier one, a block sent by another path names what its
 * third word held): it is only prefetched, never read.
 * Consecutive blocks of one own slab (a sender frees in the order the
 * owner allocated: xmalloc-test, a batch of 64 is one slab) are a run:
 * already linked to each other, so the run joins the slab's list (or the
 * hand) with one splice and one count, and each block of it costs only
 * the load of its link and a compare with the slab's bounds: no lookup
 * of its span, no store into it or into the slab's record. */
static void process(hpm_heap_t *h, void **list) {
    for (void **b = list, **next; b; b = next) {
        hpm_span_t *s = hpm_span_of(b);
        bool ahead = s->block_bytes >= 3 * sizeof(void *);
        if (ahead) __builtin_prefetch(b[2], 1);
        next = b[0];
        if (atomic_load_explicit(&s->owner, memory_order_relaxed) != h) {
            _hpm_free_other_in(h, s, b);
            continue;
        }
        void **tail = b;
        int32_t n = 1;
        while (next && hpm_slab_holds(s, next)) {
            if (ahead) __builtin_prefetch(next[2], 1);
            tail = next;
            next = next[0];
            n++;
        }
        hpm_slab_free_run(h, s, b, tail, n);
    }
}

/* Only the owner writes inbox_takes: a load and a store, no atomic add. */
static void bump_takes(hpm_heap_t *h) {
    atomic_store_explicit(&h->inbox_takes, atomic_load_explicit(&h->inbox_takes, memory_order_relaxed) + 1, memory_order_relaxed);
}

void _hpm_remote_drain(hpm_heap_t *h) {
    if (atomic_load_explicit(&h->inbox, memory_order_relaxed) == HPM_INBOX_CLOSED) return;   /* exiting */
    void **list = atomic_exchange_explicit(&h->inbox, NULL, memory_order_acquire);
    if (!list) return;
    bump_takes(h);
    process(h, list);
}

/* ---- an asleep owner's inbox ----
 * An owner that sleeps (larson's main thread in pthread_join once the
 * lanes have its blocks; any producer that waits while consumers free)
 * never takes its inbox, so the slabs its blocks came from stay on its
 * lists with every block free in the inbox: 6 MB of larson's 20 MB heap.
 * The background thread takes such an inbox (heap.c, asleep_due) with
 * the owner's gate closed and the owner outside its slab lists (gate.h),
 * gives back each slab whose live blocks are all in it, and puts the
 * other blocks back in the inbox for the owner.
 * Meanwhile the owner may still run its fast paths. Its malloc pops the
 * hand, which holds current slabs' blocks: the drain leaves current slabs
 * alone. Its free pushes a block onto the block's slab and lowers the
 * slab's credit: a slab whose every live block is in the taken list has
 * none the owner could free, and a block still on its way (another
 * thread's outbox or hand, the inbox since) counts as live, so its slab
 * does not qualify. The one overlap is the owner's free of the last live
 * block outside the list: its credit store (release,
 * hpm_slab_credit_sub) follows its push, so a drain that reads the
 * credit fallen (acquire) finds the slab all free, that block included,
 * and gives it back; the owner's slow path, if the count sends it there,
 * finds the slab no longer its own (heap.c, _hpm_heap_free_slow).
 * The tally per slab lives in two words of the slab's record that only
 * the drain uses (under heaps_lock), stamped with the pass. */
static uint32_t drain_pass;
#define DRAIN_KEEP UINT32_MAX         /* a verdict: the slab's blocks go back to the inbox */
#define DRAIN_GIVE (UINT32_MAX - 1)   /* a verdict: the slab goes back to the pageheap */

void (*_hpm_asleep_test_hook)(hpm_heap_t *h);

static bool all_in_list(const hpm_span_t *s) {
    if (s->list != LIST_AVAIL && s->list != LIST_FULL) return false;   /* current (its blocks feed the hand), or being moved */
    int32_t credit = __atomic_load_n(&s->credit, __ATOMIC_ACQUIRE);
    return (uint32_t)(credit + hpm_list_threshold(s->list)) == s->drain_blocks;
}

unsigned _hpm_remote_drain_asleep(hpm_heap_t *h) {
    void *got = atomic_load_explicit(&h->inbox, memory_order_acquire);
    do {
        if (!got || got == HPM_INBOX_CLOSED) return 0;
    } while (!atomic_compare_exchange_weak_explicit(&h->inbox, &got, NULL, memory_order_acquire, memory_order_acquire));
    void **list = got;
    uint32_t pass = ++drain_pass ? drain_pass : ++drain_pass;   /* never 0, a new record's stamp */
    for (void **b = list; b; b = b[0]) {
        hpm_span_t *s = hpm_span_of(b);
        if (atomic_load_explicit(&s->owner, memory_order_relaxed) != h) continue;   /* forwarded later by the owner */
        if (s->drain_pass != pass) {
            s->drain_pass = pass;
            s->drain_blocks = 0;
        }
        s->drain_blocks++;
    }
    if (unlikely(_hpm_asleep_test_hook != NULL)) _hpm_asleep_test_hook(h);
    hpm_span_t *give = NULL;
    unsigned n_give = 0;
    void **keep = NULL, **keep_tail = NULL;
    for (void **b = list, **next; b; b = next) {
        next = b[0];
        hpm_span_t *s = hpm_span_of(b);
        if (atomic_load_explicit(&s->owner, memory_order_relaxed) == h && s->drain_pass == pass) {
            if (s->drain_blocks != DRAIN_KEEP && s->drain_blocks != DRAIN_GIVE) {   /* its first block: the verdict */
                bool give_it = all_in_list(s);
                if (give_it) {
                    s->drain_next = give;
                    give = s;
                    n_give++;
                }
                s->drain_blocks = give_it ? DRAIN_GIVE : DRAIN_KEEP;
            }
            if (s->drain_blocks == DRAIN_GIVE) continue;
        }
        if (keep_tail) keep_tail[0] = b;
        else keep = b;
        keep_tail = b;
    }
    if (keep) {
        int sent = send(h, keep, keep_tail);   /* never closed: the owner's exit waits at the gate */
        hpm_assert_internal(sent != SEND_CLOSED);
        (void)sent;
    }
    if (give) _hpm_heap_release_drained(h, give);
    return n_give;
}

void _hpm_remote_close(hpm_heap_t *h) {
    void **list = atomic_exchange_explicit(&h->inbox, HPM_INBOX_CLOSED, memory_order_acquire);
    if (list) process(h, list);
    _hpm_remote_flush(h);
}

void _hpm_remote_open(hpm_heap_t *h) {   /* the outbox slots start empty, not stalled */
    for (unsigned i = 0; i < HPM_OUTBOX_SLOTS; i++) h->outbox[i] = (hpm_outbox_t){0};
    h->outbox_blocks = 0;
    /* a new thread on a reused record is awake: what a sender judged of the old one no longer holds */
    bump_takes(h);
    atomic_store_explicit(&h->inbox, NULL, memory_order_release);
}
