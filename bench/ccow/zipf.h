/* zipf.h: a Zipf(alpha) sampler over ranks 1..n in O(1) per sample, by
 * Hormann and Derflinger's rejection-inversion method ("Rejection-inversion
 * to generate variates from monotone discrete distributions", 1996), so the
 * CCoW benchmarks need no table of n probabilities. Rank 1 is the hottest.
 * Header-only; used by ccow_zipf.c and redis_zipf.c. */
#ifndef HPM_BENCH_ZIPF_H
#define HPM_BENCH_ZIPF_H
#include <math.h>
#include <stdint.h>

typedef struct {
    double alpha;
    double n;
    double h_int_x1;   /* H(1.5) - 1 */
    double h_int_n;    /* H(n + 0.5) */
    double s;          /* acceptance shortcut */
} zipf_t;

static inline double zipf_helper1(double x) {   /* log1p(x) / x */
    return fabs(x) > 1e-8 ? log1p(x) / x : 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
}

static inline double zipf_helper2(double x) {   /* expm1(x) / x */
    return fabs(x) > 1e-8 ? expm1(x) / x : 1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x));
}

static inline double zipf_h_integral(const zipf_t *z, double x) {
    double lx = log(x);
    return zipf_helper2((1.0 - z->alpha) * lx) * lx;
}

static inline double zipf_h(const zipf_t *z, double x) { return exp(-z->alpha * log(x)); }

static inline double zipf_h_integral_inverse(const zipf_t *z, double x) {
    double t = x * (1.0 - z->alpha);
    if (t < -1.0) t = -1.0;
    return exp(zipf_helper1(t) * x);
}

/* alpha > 0, n >= 1. */
static inline void zipf_init(zipf_t *z, double alpha, uint64_t n) {
    z->alpha = alpha;
    z->n = (double)n;
    z->h_int_x1 = zipf_h_integral(z, 1.5) - 1.0;
    z->h_int_n = zipf_h_integral(z, z->n + 0.5);
    z->s = 2.0 - zipf_h_integral_inverse(z, zipf_h_integral(z, 2.5) - zipf_h(z, 2.0));
}

/* u01 returns uniform doubles in [0, 1). Returns a rank in 1..n. */
static inline uint64_t zipf_sample(const zipf_t *z, double (*u01)(void *), void *rng) {
    for (;;) {
        double u = z->h_int_n + u01(rng) * (z->h_int_x1 - z->h_int_n);
        double x = zipf_h_integral_inverse(z, u);
        double k = floor(x + 0.5);
        if (k < 1.0) k = 1.0;
        else if (k > z->n) k = z->n;
        if (k - x <= z->s || u >= zipf_h_integral(z, k + 0.5) - zipf_h(z, k)) return (uint64_t)k;
    }
}
#endif
