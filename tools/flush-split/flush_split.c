// What one durable small write costs on a disk, split in two: a 4 KiB O_DIRECT write alone,
// and an fdatasync right after one. On a disk with a write-back cache and no FUA each is a
// round trip to the device (docs/benchmarks.md, "The goals on the final build ...").
//
// Build and run: gcc -O2 -o /tmp/flush_split tools/flush-split/flush_split.c && /tmp/flush_split DIR
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { N = 2000, BLOCKS = 64, BLOCK = 4096 };

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v) {
    qsort(v, N, sizeof *v, by_value);
    return v[N / 2];
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR   (a directory on the disk to measure)\n", argv[0]);
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/flush_split.bin", argv[1]);
    int fd = open(path, O_RDWR | O_CREAT | O_DIRECT, 0644);
    if (fd < 0) { perror(path); return 1; }
    void *buf;
    if (posix_memalign(&buf, BLOCK, BLOCK)) { perror("posix_memalign"); return 1; }
    memset(buf, 0xA5, BLOCK);
    // Preallocated and synced first, so the timed writes change no file metadata.
    for (int i = 0; i < BLOCKS; i++)
        if (pwrite(fd, buf, BLOCK, (off_t)i * BLOCK) != BLOCK) { perror("pwrite"); return 1; }
    fsync(fd);
    static double write_alone[N], flush_after[N], both[N];
    for (int i = 0; i < N; i++) {
        double t0 = now_us();
        if (pwrite(fd, buf, BLOCK, (off_t)(i % BLOCKS) * BLOCK) != BLOCK) { perror("pwrite"); return 1; }
        write_alone[i] = now_us() - t0;
    }
    for (int i = 0; i < N; i++) {
        double t0 = now_us();
        if (pwrite(fd, buf, BLOCK, (off_t)(i % BLOCKS) * BLOCK) != BLOCK) { perror("pwrite"); return 1; }
        double t1 = now_us();
        if (fdatasync(fd)) { perror("fdatasync"); return 1; }
        flush_after[i] = now_us() - t1;
        both[i] = now_us() - t0;
    }
    printf("4 KiB O_DIRECT write alone: median %.0f us; fdatasync after it: median %.0f us; both: median %.0f us\n",
           median(write_alone), median(flush_after), median(both));
    unlink(path);
    return 0;
}
