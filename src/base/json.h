/* JSON helpers over jansson: typed lookups with defaults and clear errors. */
#ifndef LMC_JSON_H
#define LMC_JSON_H

#include "base.h"

#include <jansson.h>

/* Parses a JSON file; the error names the file, line and column. */
lmc_status lmc_json_load_file(const char *path, json_t **out);
/* Parses a JSON text; `what` names it in errors. As Python's json, integers
 * beyond int64 are read (as reals here: jansson holds int64 integers only)
 * and a leading UTF-8 byte order mark is whitespace. */
lmc_status lmc_json_parse(const char *text, size_t len, const char *what, json_t **out);
/* json_loadb(text, len, flags, err), except that integer literals beyond
 * int64 are read as reals; err's line, column and position refer to text.
 * Returns LMC_ERR_FORMAT with err filled and no message set when the text
 * is not valid JSON, LMC_ERR_NOMEM (message set) when out of memory. For
 * callers with their own error wording; others use lmc_json_parse. */
lmc_status lmc_json_loadb(const char *text, size_t len, size_t flags, json_t **out,
                          json_error_t *err);

/* Lookups: return the default when the key is absent or JSON null. When the
 * key holds a value of the wrong type, *bad (if given) is set true. */
int64_t lmc_json_int(const json_t *obj, const char *key, int64_t def, bool *bad);
double lmc_json_number(const json_t *obj, const char *key, double def, bool *bad);
bool lmc_json_bool(const json_t *obj, const char *key, bool def, bool *bad);
/* Borrowed string or def. */
const char *lmc_json_string(const json_t *obj, const char *key, const char *def, bool *bad);

/* Serializes like Python's json.dump(v, indent=indent) (ensure_ascii,
 * separators "," and ": ", floats as Python's repr, objects in their
 * order), so files written by Python tools (mlx-lm's config.json and
 * index) can be reproduced byte for byte. malloc'd; NULL on failure. */
char *lmc_json_dumps_python(const json_t *v, int indent);

#endif
