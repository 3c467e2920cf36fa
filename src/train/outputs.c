#include "outputs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/util.h"

#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)

/* dirname and basename of path, without modifying it. */
static void split_path(const char *path, char *dir, size_t dlen, const char **base)
{
    const char *slash = strrchr(path, '/');
    if (!slash) { snprintf(dir, dlen, "."); *base = path; return; }
    size_t n = (size_t)(slash - path);
    snprintf(dir, dlen, "%.*s", (int)(n ? n : 1), path);
    *base = slash + 1;
}

int file_identity(const char *path, char *out, size_t len)
{
    struct stat sb;
    if (stat(path, &sb) == 0) {
        snprintf(out, len, "inode %llu:%llu", (unsigned long long)sb.st_dev, (unsigned long long)sb.st_ino);
        return 0;
    }
    char dir[PATH_MAX], real[PATH_MAX];
    const char *base;
    split_path(path, dir, sizeof dir, &base);
    if (!realpath(dir, real)) return -1;
    snprintf(out, len, "path %s/%s", real, base);
    return 0;
}

/* The path is a regular file or absent, and a file can be created beside
 * it (so a long run does not end with an unwritable output). */
static int check_one(const char *path, const char *flag, char *err, size_t errlen)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        BAD("%s '%s' exists and is not a regular file (%s); name a plain file", flag, path,
            S_ISDIR(sb.st_mode) ? "a directory" : S_ISFIFO(sb.st_mode) ? "a FIFO" : "a device or socket");
    char probe[PATH_MAX + 64];
    snprintf(probe, sizeof probe, "%s.probe.%ld", path, (long)getpid());
    FILE *f = fopen(probe, "w");
    if (!f) BAD("cannot write %s '%s': %s", flag, path, strerror(errno));
    fclose(f);
    unlink(probe);
    return 0;
}

/* path.tmp.PID files whose process is gone: what a run killed while
 * writing a checkpoint leaves. A live process's temporary is kept. */
static void remove_stale_temporaries(const char *path)
{
    char dir[PATH_MAX];
    const char *base;
    split_path(path, dir, sizeof dir, &base);
    size_t blen = strlen(base);
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        const char *n = e->d_name;
        long pid;
        if (strncmp(n, base, blen) || strncmp(n + blen, ".tmp.", 5) || parse_long(n + blen + 5, &pid) != 0 || pid <= 0 ||
            pid > INT_MAX || pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char full[2 * PATH_MAX];
        snprintf(full, sizeof full, "%s/%s", dir, n);
        struct stat sb;
        if (lstat(full, &sb) == 0 && S_ISREG(sb.st_mode)) unlink(full);
    }
    closedir(d);
}

/* An exclusive lock on path.lock, held through *fd until outputs_unlock.
 * A lock file whose holder removed it while this process opened it is
 * not the one later runs will find, so the lock is taken again on the
 * file the path names now. */
static int lock_one(const char *path, const char *flag, int *fd, char **lock_path, char *err, size_t errlen)
{
    char lp[PATH_MAX + 16];
    snprintf(lp, sizeof lp, "%s.lock", path);
    for (int tries = 0; tries < 16; tries++) {
        int f = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (f < 0) BAD("cannot create the lock file '%s' for %s: %s", lp, flag, strerror(errno));
        if (flock(f, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            char who[32] = "";
            ssize_t n = read(f, who, sizeof who - 1);
            who[n > 0 ? n : 0] = 0;
            who[strcspn(who, "\n")] = 0;
            close(f);
            if (e == EWOULDBLOCK)
                BAD("%s '%s' is being written by another run (process %s, which holds '%s'); name another file or wait for that run to end",
                    flag, path, *who ? who : "?", lp);
            BAD("cannot lock '%s' for %s: %s", lp, flag, strerror(e));
        }
        struct stat held, named;
        if (fstat(f, &held) == 0 && stat(lp, &named) == 0 && held.st_dev == named.st_dev && held.st_ino == named.st_ino) {
            char pid[32];
            int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
            if (ftruncate(f, 0) != 0 || write(f, pid, (size_t)n) != n) { /* the pid is only a courtesy to the next run */ }
            *fd = f;
            *lock_path = xstrdup(lp);
            return 0;
        }
        close(f);
    }
    BAD("cannot lock '%s' for %s: it keeps being replaced", lp, flag);
}

void outputs_unlock(outputs_lock_t *lk)
{
    for (int i = 0; i < 2; i++) {
        if (lk->fd[i] < 0) continue;
        unlink(lk->path[i]);   /* before the lock goes: a run that opens it now will see it replaced */
        close(lk->fd[i]);
        free(lk->path[i]);
        lk->fd[i] = -1;
        lk->path[i] = NULL;
    }
}

int outputs_check(const config_t *cfg, char *err, size_t errlen)
{
    const char *out[2] = { cfg->metrics, cfg->checkpoint }, *flag[2] = { "--metrics", "--checkpoint" };
    char id[2][PATH_MAX + 64], rid[PATH_MAX + 64];
    for (int i = 0; i < 2; i++) {
        id[i][0] = 0;
        if (!*out[i]) continue;
        if (check_one(out[i], flag[i], err, errlen) != 0) return -1;
        if (file_identity(out[i], id[i], sizeof id[i]) != 0) BAD("cannot resolve %s '%s': %s", flag[i], out[i], strerror(errno));
    }
    if (*cfg->metrics) {   /* the metrics are written to FILE.part first */
        char part[PATH_MAX + 16];
        snprintf(part, sizeof part, "%s.part", cfg->metrics);
        if (check_one(part, "--metrics", err, errlen) != 0) return -1;
    }
    if (id[0][0] && id[1][0] && !strcmp(id[0], id[1]))
        BAD("--metrics '%s' and --checkpoint '%s' are the same file; name two files", cfg->metrics, cfg->checkpoint);
    if (*cfg->resume && id[0][0] && file_identity(cfg->resume, rid, sizeof rid) == 0 && !strcmp(id[0], rid))
        BAD("--metrics '%s' is the checkpoint being resumed ('%s'); it would be overwritten: name another file", cfg->metrics,
            cfg->resume);
    if (*cfg->checkpoint) remove_stale_temporaries(cfg->checkpoint);
    return 0;
}

int outputs_lock(const config_t *cfg, outputs_lock_t *lk, char *err, size_t errlen)
{
    const char *out[2] = { cfg->metrics, cfg->checkpoint }, *flag[2] = { "--metrics", "--checkpoint" };
    lk->fd[0] = lk->fd[1] = -1;
    lk->path[0] = lk->path[1] = NULL;
    for (int i = 0; i < 2; i++)
        if (*out[i] && lock_one(out[i], flag[i], &lk->fd[i], &lk->path[i], err, errlen) != 0) {
            outputs_unlock(lk);
            return -1;
        }
    return 0;
}
