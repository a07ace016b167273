/* Internal API of the sandboxed Jinja2-subset template engine.
 *
 * Compile once, render many times. Rendering takes its variables from a JSON
 * object (messages, tools, special tokens, add_generation_prompt, ...) and
 * produces bytes identical to jinja2 3.1 configured as transformers does in
 * chat_template_utils.py (_compile_jinja_template): ImmutableSandboxedEnvironment
 * with trim_blocks=True, lstrip_blocks=True, loopcontrols, the generation tag,
 * a tojson that calls json.dumps(ensure_ascii=False), raise_exception and
 * strftime_now.
 *
 * The sandbox: templates cannot do I/O; loop iterations (steps), macro
 * recursion, output size and memory are bounded (LMC_ERR_LIMIT). Errors name
 * the line and column of the template they come from. */
#ifndef LMC_TEMPLATE_H
#define LMC_TEMPLATE_H

#include "base/base.h"

#include <jansson.h>
#include <time.h>

typedef struct lmc_template lmc_template;

typedef struct tpl_options {
    size_t max_output;  /* bytes of output (and of any one string); default 16 MiB */
    size_t max_memory;  /* bytes of the render arena; default 512 MiB */
    uint64_t max_steps; /* statements + loop iterations; default 5,000,000 */
    int max_depth;      /* macro call nesting; default 64 */
    bool fixed_time;    /* strftime_now uses `now` instead of the clock */
    time_t now;
} tpl_options;

/* Fills the defaults above (the LMC_FIXED_DATE environment variable is not
 * read here; see chat_template.c). */
void tpl_options_default(tpl_options *opts);

/* Compiles source[0..len). *out is freed with tpl_free. */
lmc_status tpl_compile(const char *source, size_t len, lmc_template **out);
void tpl_free(lmc_template *t);

/* Renders with the variables of `vars` (a JSON object; may be NULL).
 * opts may be NULL for the defaults. *out is malloc'd, NUL-terminated (the
 * output may itself contain NUL bytes; *len is exact) and freed with free(). */
lmc_status tpl_render(const lmc_template *t, const json_t *vars, const tpl_options *opts,
                      char **out, size_t *len);

#endif
