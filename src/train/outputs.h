/* train/outputs — the files a run will write (--metrics, --checkpoint),
 * checked before training starts: each is a regular file or does not exist
 * yet, its directory takes new files, no two of them (nor one of them and
 * the checkpoint being resumed) are the same file under two spellings, and
 * temporaries a killed run left beside the checkpoint are removed. */
#ifndef DSGD_OUTPUTS_H
#define DSGD_OUTPUTS_H

#include <stddef.h>

#include "../run/config.h"

/* 0, or -1 with a one-line message in err. */
int outputs_check(const config_t *cfg, char *err, size_t errlen);
/* A name for path's file that two spellings share: device and inode when it
 * exists, else the real path of its directory plus its name. -1 if the
 * directory cannot be resolved. */
int file_identity(const char *path, char *out, size_t len);

#endif
