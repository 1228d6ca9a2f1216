/* warm_memory: the benchmark scripts' warm-up before each measured run
 * (bench/common/bench_warm.h says why this VM needs one). Usage:
 * warm_memory [MIB]; without MIB, HPM_BENCH_WARM_MIB or 128. Prints
 * nothing; exit status 0, or 2 on a bad argument. */
#include <stdio.h>
#include <stdlib.h>
#include "bench_warm.h"

int main(int argc, char **argv) {
    size_t bytes = bench_warm_bytes(BENCH_WARM_DEFAULT_MIB);
    if (argc > 2) { fprintf(stderr, "usage: warm_memory [MIB]\n"); return 2; }
    if (argc == 2) {
        size_t mib;
        if (bench_warm_parse_mib(argv[1], &mib) != 0) {
            fprintf(stderr, "warm_memory: '%s' is not a size in MiB (0..65536)\n", argv[1]);
            return 2;
        }
        bytes = mib << 20;
    }
    bench_warm_memory(bytes);
    return 0;
}
