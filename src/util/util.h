/* util — checked allocation and I/O, fatal errors, seeded RNG, time.
 *
 * Two error regimes (docs/design.md, "Code style"): setup and programmer
 * errors go through die(), which prints one line naming the rank, host and
 * what to check, then exits non-zero; run-time faults are returned as status
 * codes by the layers above.
 */
#ifndef DSGD_UTIL_H
#define DSGD_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One-line fatal error: "dsgd: error: <message>" (with "rank R (host): " when
 * running on more than one rank). Calls MPI_Abort when MPI is up and the world
 * has more than one rank, so no peer is left hanging. Never returns. */
void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* die with exit status `code` (every rank's, through MPI_Abort). */
void die_status(int code, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
/* What die does after its line: stop every rank of a world of `size` with
 * status `code`. For a rank whose job's one line another rank has said. */
void stop_job(int code, int size) __attribute__((noreturn));

void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
/* n bytes for an array read at random places (a data set's samples):
 * from 2 MB up, aligned to 2 MB and asked to be backed by huge pages where
 * the kernel offers them on request (transparent huge pages, "madvise"),
 * so that a random sample costs no page-table walk (in a virtual machine
 * one walk is several reads from memory); not zeroed; free with free(). */
void *xmalloc_huge(size_t n);
/* 64-byte aligned, zeroed; free with free(). */
float *xalloc_floats(size_t n);
char *xstrdup(const char *s);

FILE *xfopen(const char *path, const char *mode, const char *what);

/* Seconds from MPI_Wtime (simulated seconds under SimGrid). */
double now_s(void);
/* This process's peak resident memory so far, in MiB (0 if unknown). */
double peak_rss_mib(void);

/* ---- RNG: splitmix64-seeded xoshiro256**, one state per consumer ---- */
typedef struct rng { uint64_t s[4]; } rng_t;

void     rng_seed(rng_t *r, uint64_t seed, uint64_t stream);
uint64_t rng_u64(rng_t *r);
double   rng_uniform(rng_t *r);            /* [0, 1) */
float    rng_normal(rng_t *r);             /* N(0, 1), Box-Muller */
uint32_t rng_below(rng_t *r, uint32_t n);  /* uniform in [0, n) */
void     rng_shuffle(rng_t *r, int32_t *a, size_t n);
/* Advance as n calls of rng_u64 would (rng_uniform takes one, rng_normal two). */
void     rng_skip(rng_t *r, uint64_t n);

/* ---- small helpers ---- */
/* Strict decimal parsing of a whole string (integers: [-]digits, no
 * overflow; numbers: finite decimal, no hex/inf/nan); 0 on success. */
int parse_long(const char *s, long *out);
int parse_double(const char *s, double *out);

int file_exists(const char *path);
/* Input files must be regular files (a FIFO would block, a device never
 * end): the size of one, or the whole of one in a malloc'ed buffer. Both
 * return 0, or -1 with a one-line reason naming path in err. */
int file_regular_size(const char *path, long *size, char *err, size_t errlen);
int read_regular_file(const char *path, unsigned char **buf, size_t *len, char *err, size_t errlen);
/* Write buf to path atomically: temp file in the same directory, fsync, rename.
 * Returns 0, or -1 with errno set (and the temp file removed). */
int write_file_atomic(const char *path, const void *buf, size_t len);

#endif
