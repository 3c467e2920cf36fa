#include "snapshots.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../util/util.h"

static const char *tmp_dir(void)
{
    const char *d = getenv("TMPDIR");
    return d && *d ? d : "/tmp";
}

int snapshots_open(snapshots_t *s, char *err, size_t errlen)
{
    if (s->f) return 0;
    char path[1024];
    snprintf(path, sizeof path, "%s/dsgd-snapshots-XXXXXX", tmp_dir());
    int fd = mkstemp(path);
    if (fd < 0) {
        snprintf(err, errlen, "--eval-offline: cannot create a temporary file in %s (%s); set TMPDIR to a writable directory",
                 tmp_dir(), strerror(errno));
        return -1;
    }
    unlink(path);   /* gone from the directory now; the space is freed when the process ends */
    s->f = fdopen(fd, "w+b");
    if (!s->f) {
        snprintf(err, errlen, "--eval-offline: cannot open the temporary file: %s", strerror(errno));
        close(fd);
        return -1;
    }
    return 0;
}

int snapshots_add(snapshots_t *s, const float *params, size_t nparams, const float *state, size_t nstate,
                  const snap_meta_t *m, char *err, size_t errlen)
{
    if (snapshots_open(s, err, errlen) != 0) return -1;
    if (s->n == 0) {
        s->nparams = nparams;
        s->nstate = nstate;
    }
    if (nparams != s->nparams || nstate != s->nstate) {
        snprintf(err, errlen, "--eval-offline: a snapshot of %zu + %zu values after ones of %zu + %zu (a defect)",
                 nparams, nstate, s->nparams, s->nstate);
        return -1;
    }
    if (fseeko(s->f, 0, SEEK_END) != 0 || fwrite(params, sizeof(float), nparams, s->f) != nparams ||
        (nstate && fwrite(state, sizeof(float), nstate, s->f) != nstate) || fflush(s->f) != 0) {
        snprintf(err, errlen, "--eval-offline: cannot write snapshot %ld to the temporary file in %s (%s); "
                 "free space there or set TMPDIR", s->n + 1, tmp_dir(), strerror(errno));
        return -1;
    }
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->meta = xrealloc(s->meta, (size_t)s->cap * sizeof *s->meta);
    }
    s->meta[s->n++] = *m;
    return 0;
}

int snapshots_read(snapshots_t *s, long i, float *into, char *err, size_t errlen)
{
    const size_t n = s->nparams + s->nstate;
    if (fseeko(s->f, (off_t)((size_t)i * n * sizeof(float)), SEEK_SET) != 0 || fread(into, sizeof(float), n, s->f) != n) {
        snprintf(err, errlen, "--eval-offline: cannot read snapshot %ld back from the temporary file: %s", i + 1,
                 ferror(s->f) ? strerror(errno) : "it is shorter than written");
        return -1;
    }
    return 0;
}

void snapshots_free(snapshots_t *s)
{
    if (s->f) fclose(s->f);
    free(s->meta);
    memset(s, 0, sizeof *s);
}
