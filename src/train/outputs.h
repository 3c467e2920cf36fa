/* train/outputs — the files a run will write (--metrics, --checkpoint),
 * checked before training starts: each is a regular file or does not exist
 * yet, its directory takes new files, no two of them (nor one of them and
 * the checkpoint being resumed) are the same file under two spellings, and
 * temporaries a killed run left beside the checkpoint are removed. While
 * the run lasts, rank 0 holds an exclusive lock on each (FILE.lock), so that
 * a second run naming the same file is refused at its start instead of
 * interleaving its records or checkpoints with the first's. */
#ifndef DSGD_OUTPUTS_H
#define DSGD_OUTPUTS_H

#include <stddef.h>

#include "../run/config.h"

typedef struct outputs_lock {
    int fd[2];        /* the --metrics and --checkpoint locks; -1: none */
    char *path[2];    /* their FILE.lock paths */
} outputs_lock_t;

/* 0, or -1 with a one-line message in err. */
int outputs_check(const config_t *cfg, char *err, size_t errlen);
/* Lock the outputs once every other check has passed (so that a run
 * refused for anything else leaves no lock file): 0, or -1 with a one-line
 * message in err (another run holds one of them). */
int outputs_lock(const config_t *cfg, outputs_lock_t *lk, char *err, size_t errlen);
/* Release the locks and remove their files (lk may hold none). */
void outputs_unlock(outputs_lock_t *lk);
/* A name for path's file that two spellings share: device and inode when it
 * exists, else the real path of its directory plus its name. -1 if the
 * directory cannot be resolved. */
int file_identity(const char *path, char *out, size_t len);

#endif
