#include "metrics.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../util/util.h"

/* PATH.part opened with mode (or alt, if that fails and is given); a
 * metrics_t without a file if no path is given. */
static int open_part(metrics_t *m, const char *path, double t0, const char *mode, const char *alt,
                     char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    m->t0 = t0;
    m->prior = (metrics_prior_t){ .segment = 1, .from = "start" };
    if (!path || !*path) return 0;
    size_t n = strlen(path) + 8;
    m->path = xstrdup(path);
    m->tmp = xmalloc(n);
    snprintf(m->tmp, n, "%s.part", path);
    m->f = fopen(m->tmp, mode);
    if (!m->f && alt) m->f = fopen(m->tmp, alt);
    if (!m->f) {
        snprintf(err, errlen, "cannot write metrics file '%s': %s", m->tmp, strerror(errno));
        free(m->path); free(m->tmp);
        m->path = m->tmp = NULL;
        return -1;
    }
    return 0;
}

int metrics_open(metrics_t *m, const char *path, double t0, char *err, size_t errlen)
{
    return open_part(m, path, t0, "w", NULL, err, errlen);
}

/* The whole of a file, or NULL if it cannot be read. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = xmalloc(cap);
    for (size_t got; (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (n + 1 == cap) {
            char *more = realloc(buf, cap *= 2);
            if (!more) die("out of memory reading '%s' (%zu bytes)", path, cap);
            buf = more;
        }
    }
    fclose(f);
    buf[n] = 0;
    return buf;
}

static double num(const cJSON *r, const char *key, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r, key);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

/* Where the record stood according to one of its events: a checkpoint or
 * evaluation event's own figures, or the prior a resume event carried. */
static void prior_from_event(metrics_prior_t *p, const cJSON *r, const char *ev, const char *from)
{
    if (!strcmp(ev, "resume")) {
        p->time = num(r, "prior_time", 0);
        p->run_s = num(r, "prior_run_s", 0);
        p->train_s = num(r, "prior_train_s", 0);
        p->samples = (long)num(r, "prior_samples", 0);
        p->segment = (int)num(r, "segment", 2);
        return;
    }
    p->time = num(r, "time", 0);
    p->run_s = num(r, "run_s", 0);
    p->train_s = num(r, "train_s", 0);
    p->samples = (long)num(r, "samples", 0);
    p->from = from;
}

int metrics_continue(metrics_t *m, const char *path, double t0, long step, char *err, size_t errlen)
{
    if (!path || !*path) return open_part(m, path, t0, "w", NULL, err, errlen);
    size_t n = strlen(path) + 8;
    char *part = xmalloc(n);
    snprintf(part, n, "%s.part", path);
    char *old = slurp(part);   /* an interrupted run's, else a finished one's */
    if (!old) old = slurp(path);
    free(part);
    if (open_part(m, path, t0, "w", NULL, err, errlen) != 0) { free(old); return -1; }
    if (!old) return 0;
    int kept = 0, resumes = 0, exact = 0;
    metrics_prior_t p = { .from = "start" };
    for (char *line = old, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (!next) break;   /* half a line: a run killed while writing */
        *next++ = 0;
        cJSON *r = cJSON_Parse(line);
        const cJSON *ev = r ? cJSON_GetObjectItemCaseSensitive(r, "event") : NULL;
        const cJSON *st = r ? cJSON_GetObjectItemCaseSensitive(r, "step") : NULL;
        int drop = !cJSON_IsString(ev) || !strcmp(ev->valuestring, "done") ||
                   (cJSON_IsNumber(st) && st->valuedouble > (double)step && strcmp(ev->valuestring, "resume"));
        if (!drop && !strcmp(ev->valuestring, "resume")) resumes++;
        /* the figures at the step: its checkpoint event, else the last
         * evaluation before it (a parameter server's checkpoint is written
         * by a shard and has no event) */
        if (!drop && cJSON_IsNumber(st) && !strcmp(ev->valuestring, "checkpoint") && st->valuedouble == (double)step) {
            prior_from_event(&p, r, "checkpoint", "checkpoint");
            exact = 1;
        } else if (!drop && !exact && cJSON_IsNumber(st) && !strcmp(ev->valuestring, "eval")) {
            prior_from_event(&p, r, "eval", "eval");
        }
        cJSON_Delete(r);
        if (drop) continue;
        fprintf(m->f, "%s\n", line);
        kept++;
    }
    free(old);
    m->keep = kept > 0;
    if (kept > 0) {
        p.segment = resumes + 2;
        m->prior = p;
    }
    return kept > 0;
}

int metrics_takeover(metrics_t *m, const char *path, double t0, char *err, size_t errlen)
{
    if (!path || !*path) return open_part(m, path, t0, "w", NULL, err, errlen);
    /* The old lead may be frozen, not dead, and write again before it
     * learns it was evicted (an evaluation it had begun): through its
     * descriptor, at its own offset, it would overwrite this rank's lines.
     * So the record goes on in a new file that replaces PATH.part, and the
     * old lead's descriptor is left on the replaced one. */
    size_t n = strlen(path) + 48;
    char *part = xmalloc(n), *fresh = xmalloc(n);
    snprintf(part, n, "%s.part", path);
    snprintf(fresh, n, "%s.part.%ld", path, (long)getpid());
    char *old = slurp(part);
    FILE *f = fopen(fresh, "w");
    if (!f) {
        snprintf(err, errlen, "cannot take over metrics file '%s': %s", part, strerror(errno));
        free(old); free(part); free(fresh);
        memset(m, 0, sizeof *m);
        return -1;
    }
    metrics_prior_t p = { .segment = 1, .from = "start" };
    if (old) {   /* up to the end of the last whole line: a lead killed while writing leaves half of one */
        char *end = strrchr(old, '\n');
        if (end) fwrite(old, 1, (size_t)(end - old) + 1, f);
        for (char *line = old, *next; line && *line; line = next) {   /* the clock of its last resume event */
            next = strchr(line, '\n');
            if (!next) break;
            *next++ = 0;
            cJSON *r = cJSON_Parse(line);
            const cJSON *ev = r ? cJSON_GetObjectItemCaseSensitive(r, "event") : NULL;
            if (cJSON_IsString(ev) && !strcmp(ev->valuestring, "resume")) prior_from_event(&p, r, "resume", NULL);
            cJSON_Delete(r);
        }
        free(old);
    }
    if (fflush(f) != 0 || rename(fresh, part) != 0) {
        snprintf(err, errlen, "cannot take over metrics file '%s': %s", part, strerror(errno));
        fclose(f);
        unlink(fresh);
        free(part); free(fresh);
        memset(m, 0, sizeof *m);
        return -1;
    }
    free(fresh);
    memset(m, 0, sizeof *m);
    m->t0 = t0;
    m->prior = p;
    m->path = xstrdup(path);
    m->tmp = part;
    m->f = f;
    return 0;
}

void metrics_begin(metrics_t *m, const char *event, double now)
{
    if (m->f) fprintf(m->f, "{\"event\":\"%s\",\"time\":%.6f", event, m->prior.time + now - m->t0);
}

void metrics_long(metrics_t *m, const char *key, long v)
{
    if (m->f) fprintf(m->f, ",\"%s\":%ld", key, v);
}

void metrics_double(metrics_t *m, const char *key, double v)
{
    if (!m->f) return;
    if (isfinite(v)) fprintf(m->f, ",\"%s\":%.9g", key, v);
    else fprintf(m->f, ",\"%s\":null", key);
}

void metrics_str(metrics_t *m, const char *key, const char *v)
{
    if (!m->f) return;
    fprintf(m->f, ",\"%s\":\"", key);
    for (; *v; v++) {
        if (*v == '"' || *v == '\\') fprintf(m->f, "\\%c", *v);
        else if ((unsigned char)*v < 0x20) fprintf(m->f, "\\u%04x", *v);
        else fputc(*v, m->f);
    }
    fputc('"', m->f);
}

void metrics_raw(metrics_t *m, const char *key, const char *json)
{
    if (m->f) fprintf(m->f, ",\"%s\":%s", key, json);
}

void metrics_object(metrics_t *m, const char *key, const char *json)
{
    cJSON *o = json ? cJSON_Parse(json) : NULL;
    char *text = cJSON_IsObject(o) ? cJSON_PrintUnformatted(o) : NULL;
    if (text) metrics_raw(m, key, text);
    free(text);
    cJSON_Delete(o);
}

void metrics_end(metrics_t *m)
{
    if (!m->f) return;
    fputs("}\n", m->f);
    fflush(m->f);
}

void metrics_abandon(metrics_t *m)
{
    if (m->f) {
        /* the descriptor goes first, so fclose cannot flush this rank's
         * buffered events into the file another rank now writes */
        close(fileno(m->f));
        fclose(m->f);
    }
    free(m->path);
    free(m->tmp);
    memset(m, 0, sizeof *m);
}

int metrics_close(metrics_t *m, int ok)
{
    int rc = 0;
    if (m->f) {
        /* a write error (a full disk) anywhere in the file shows in ferror */
        if (ferror(m->f) || fflush(m->f) != 0 || fsync(fileno(m->f)) != 0) ok = 0, rc = -1;
        if (fclose(m->f) != 0) ok = 0, rc = -1;
        if (ok) {
            if (rename(m->tmp, m->path) != 0) rc = -1;
        } else if (!m->keep) {
            unlink(m->tmp);
        }
    }
    free(m->path);
    free(m->tmp);
    memset(m, 0, sizeof *m);
    return rc;
}

/* The last done event of a record, or NULL. */
static cJSON *last_done(char *text)
{
    cJSON *done = NULL;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        cJSON *r = cJSON_Parse(line);
        const cJSON *ev = r ? cJSON_GetObjectItemCaseSensitive(r, "event") : NULL;
        if (cJSON_IsString(ev) && !strcmp(ev->valuestring, "done")) {
            cJSON_Delete(done);
            done = r;
        } else {
            cJSON_Delete(r);
        }
    }
    return done;
}

int metrics_status(const char *path, char *out, size_t len)
{
    char *text = slurp(path);
    if (!text) {
        size_t n = strlen(path) + 8;
        char *part = xmalloc(n);
        snprintf(part, n, "%s.part", path);
        int running = access(part, F_OK) == 0;
        free(part);
        if (running) snprintf(out, len, "'%s' has not ended: its record so far is in '%s.part' (a run still going, or killed)", path, path);
        else snprintf(out, len, "cannot read metrics file '%s': %s", path, strerror(errno));
        return 2;
    }
    cJSON *d = last_done(text);
    free(text);
    if (!d) {
        snprintf(out, len, "'%s' holds no done event: the run did not end (killed?)", path);
        return 2;
    }
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(d, "status");
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(d, "steps");
    const cJSON *acc = cJSON_GetObjectItemCaseSensitive(d, "test_acc");
    const char *why_keys[] = { "error", "diverged", "fault" };
    const char *why = NULL;
    for (int i = 0; i < 3 && !why; i++) {
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(d, why_keys[i]);
        if (cJSON_IsString(w)) why = w->valuestring;
    }
    const char *status = cJSON_IsString(st) ? st->valuestring : "unknown";
    int n = snprintf(out, len, "%s: status %s", path, status);
    if (cJSON_IsNumber(steps) && n >= 0 && (size_t)n < len) n += snprintf(out + n, len - (size_t)n, ", step %.0f", steps->valuedouble);
    if (cJSON_IsNumber(acc) && n >= 0 && (size_t)n < len) n += snprintf(out + n, len - (size_t)n, ", test accuracy %.4f", acc->valuedouble);
    if (why && n >= 0 && (size_t)n < len) snprintf(out + n, len - (size_t)n, " (%s)", why);
    int rc = !strcmp(status, "ok") ? 0 : !strcmp(status, "preempted") ? 143 : !strcmp(status, "diverged") ? 3 : 1;
    cJSON_Delete(d);
    return rc;
}
