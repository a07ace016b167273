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

/* The hub id of a snapshot folder: "ORG/NAME" (or "NAME") when dir ends in
 * models--ORG--NAME/snapshots/REV (trailing slashes ignored) and ORG/NAME is
 * a valid hub id; otherwise *id is NULL and the status LMC_OK. *id is
 * malloc'd. Errors: LMC_ERR_NOMEM. */
lmc_status lmc_hub_id_of_snapshot(const char *dir, char **id);

/* lmc_model_summarize (model_summary.c) without the argument checks, and on
 * failure *out keeps what could be read (dir, hub_id, the bytes counted;
 * config.json's parts when only the sizing failed), for listings that show
 * broken folders too. Clear *out with lmc_model_summary_clear either way. */
lmc_status lmc_model_summary_read(const char *dir, lmc_model_summary *out);

#endif
