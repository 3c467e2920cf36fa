#include "util.h"
#include "sim.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void __attribute__((noreturn)) die_v(int code, const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    /* rank and size come from MPI itself: no global state */
    int up = 0, down = 0, rank = 0, size = 1;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    if (up && !down) {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
    }
    if (size > 1) {
        char host[MPI_MAX_PROCESSOR_NAME] = "?";
        int len = 0;
        MPI_Get_processor_name(host, &len);
        fprintf(stderr, "dsgd: error: rank %d (%s): %s\n", rank, host, msg);
    } else {
        fprintf(stderr, "dsgd: error: %s\n", msg);
    }
    fflush(stderr);
    stop_job(code, size);
}

void stop_job(int code, int size)
{
    if (sim_build()) {
        /* SimGrid turns MPI_Abort into a backtrace and status 134;
         * scripts/dsgd-sim reports this status instead */
        const char *exit_file = getenv("DSGD_EXIT_FILE");
        FILE *ef = exit_file ? fopen(exit_file, "w") : NULL;
        if (ef) { fprintf(ef, "%d\n", code); fclose(ef); }
    }
    if (size > 1) {
        if (!sim_build()) {
            /* the launcher forwards a rank's output through a pipe and stops
             * reading it once MPI_Abort reaches it: under MPICH die's one
             * line was lost once in a CI run. A tenth of a second lets the
             * lines already written (this rank's or another's) go out first. */
            struct timespec ts = { 0, 100000000L };
            nanosleep(&ts, NULL);
        }
        MPI_Abort(MPI_COMM_WORLD, code);
    }
    exit(code);
}

void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    die_v(1, fmt, ap);
}

void die_status(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    die_v(code, fmt, ap);
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) die("out of memory allocating %zu bytes", n);
    return p;
}

void *xcalloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) die("out of memory allocating %zu x %zu bytes", count, size);
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) die("out of memory growing a buffer to %zu bytes", n);
    return q;
}

void *xmalloc_huge(size_t n)
{
    const size_t huge = (size_t)2 << 20;
    if (n < huge) return xmalloc(n);
    void *p = NULL;
    const size_t whole = (n + huge - 1) / huge * huge;
    if (posix_memalign(&p, huge, whole) != 0) die("out of memory allocating %zu bytes", n);
#ifdef MADV_HUGEPAGE
    (void)madvise(p, whole, MADV_HUGEPAGE);   /* a request: without it, plain pages */
#endif
    return p;
}

float *xalloc_floats(size_t n)
{
    size_t bytes = ((n * sizeof(float) + 63) / 64) * 64;
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0)
        die("out of memory allocating %zu floats", n);
    memset(p, 0, bytes ? bytes : 64);
    return p;
}

char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = xmalloc(n);
    memcpy(p, s, n);
    return p;
}

FILE *xfopen(const char *path, const char *mode, const char *what)
{
    FILE *f = fopen(path, mode);
    if (!f) die("cannot open %s '%s': %s", what, path, strerror(errno));
    return f;
}

double now_s(void) { return MPI_Wtime(); }

/* ---- RNG ---- */
static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void rng_seed(rng_t *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xd1342543de82ef95ULL + 0x2545f4914f6cdd1dULL);
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t rng_u64(rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

void rng_skip(rng_t *r, uint64_t n)
{
    while (n--) (void)rng_u64(r);
}

double rng_uniform(rng_t *r) { return (double)(rng_u64(r) >> 11) * 0x1.0p-53; }

float rng_normal(rng_t *r)
{
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

uint32_t rng_below(rng_t *r, uint32_t n)
{
    /* Lemire's multiply-shift; the tiny bias is irrelevant for shuffling. */
    return (uint32_t)(((rng_u64(r) >> 32) * (uint64_t)n) >> 32);
}

void rng_shuffle(rng_t *r, int32_t *a, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = rng_below(r, (uint32_t)i);
        int32_t t = a[i - 1]; a[i - 1] = a[j]; a[j] = t;
    }
}

/* ---- helpers ---- */
/* Decimal digits with an optional leading minus, nothing else: no spaces,
 * no '+', no hex or octal prefixes, so " 64" and "64 " are treated alike. */
int parse_long(const char *s, long *out)
{
    if (!s) return -1;
    const char *d = s + (*s == '-');
    if (!*d) return -1;
    for (const char *p = d; *p; p++)
        if (*p < '0' || *p > '9') return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

/* A finite decimal number: [-]digits[.digits][e[+-]digits] (or .digits);
 * no hex floats, inf, nan or surrounding spaces. */
int parse_double(const char *s, double *out)
{
    if (!s) return -1;
    const char *p = s + (*s == '-');
    int digits = 0;
    while (*p >= '0' && *p <= '9') p++, digits++;
    if (*p == '.') for (p++; *p >= '0' && *p <= '9'; p++) digits++;
    if (!digits) return -1;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (*p < '0' || *p > '9') return -1;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || !isfinite(v) || (errno == ERANGE && v != 0)) return -1;
    *out = v;
    return 0;
}

int file_exists(const char *path) { return access(path, F_OK) == 0; }

/* Opened without blocking (a FIFO would wait for a writer), then checked. */
static int open_regular(const char *path, struct stat *sb, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) { snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno)); return -1; }
    if (fstat(fd, sb) != 0 || !S_ISREG(sb->st_mode)) {
        snprintf(err, errlen, "'%s' is not a regular file (a FIFO, device or directory); name a plain file", path);
        close(fd);
        return -1;
    }
    return fd;
}

int file_regular_size(const char *path, long *size, char *err, size_t errlen)
{
    struct stat sb;
    int fd = open_regular(path, &sb, err, errlen);
    if (fd < 0) return -1;
    close(fd);
    *size = (long)sb.st_size;
    return 0;
}

int read_regular_file(const char *path, unsigned char **buf, size_t *len, char *err, size_t errlen)
{
    struct stat sb;
    int fd = open_regular(path, &sb, err, errlen);
    if (fd < 0) return -1;
    size_t size = (size_t)sb.st_size, got = 0;
    unsigned char *b = xmalloc(size + 1);
    while (got < size) {
        ssize_t r = read(fd, b + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) { snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno)); break; }
        if (r == 0) { snprintf(err, errlen, "cannot read '%s': it shrank while being read", path); break; }
        got += (size_t)r;
    }
    close(fd);
    if (got != size) { free(b); return -1; }
    *buf = b;
    *len = size;
    return 0;
}

int write_file_atomic(const char *path, const void *buf, size_t len)
{
    size_t n = strlen(path) + 32;
    char *tmp = xmalloc(n);
    snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { int e = errno; free(tmp); errno = e; return -1; }
    const char *p = buf;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR) continue;
            goto fail;
        }
        p += w;
        left -= (size_t)w;
    }
    if (fsync(fd) != 0) goto fail;
    if (close(fd) != 0) { fd = -1; goto fail; }
    fd = -1;
    if (rename(tmp, path) != 0) goto fail;
    free(tmp);
    return 0;
fail: {
        int e = errno;
        if (fd >= 0) close(fd);
        unlink(tmp);
        free(tmp);
        errno = e;
        return -1;
    }
}

double peak_rss_mib(void)
{
    struct rusage u;
    if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
    return (double)u.ru_maxrss / 1024.0;   /* Linux: KiB */
}
