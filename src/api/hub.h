/* Model folders in the local Hugging Face hub cache, laid out as
 * huggingface_hub writes it (file_download.py, constants.py):
 * CACHE/models--ORG--NAME/{blobs,refs,snapshots}. */
#ifndef LMC_API_HUB_H
#define LMC_API_HUB_H

#include "base/base.h"

/* The hub cache folder: $HF_HUB_CACHE, else $HF_HOME/hub, else $HOME/.cache/huggingface/hub
 * (huggingface_hub's constants). malloc'd, NULL on allocation failure. */
char *lmc_hub_cache_dir(void);

/* Finds the snapshot folder of hub_id ("ORG/NAME", or "NAME") in the cache:
 * CACHE/models--ORG--NAME/snapshots/REV where REV is the commit hash in
 * CACHE/models--ORG--NAME/refs/main (trailing newline/whitespace ignored); when refs/main is
 * missing or names no existing snapshot, the most recently modified snapshot folder. The snapshot
 * must contain config.json (a file or a symlink to ../../blobs/..., as the hub client writes). On
 * success *dir (malloc'd) is the snapshot path. When not found: LMC_ERR_NOT_FOUND, and *looked
 * (malloc'd, may be NULL on OOM) describes every place it looked, e.g.
 * "/c/hub/models--org--name/refs/main (missing), /c/hub/models--org--name/snapshots (no snapshot
 * with config.json)"; invalid hub ids (empty, "..", more than one '/', characters outside
 * [A-Za-z0-9._-] in either part) give LMC_ERR_INVALID_ARG. */
lmc_status lmc_hub_find(const char *hub_id, char **dir, char **looked);

#endif
