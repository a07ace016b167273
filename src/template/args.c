/* Arguments of template calls: positional or keyword access and checks. */
#include "template/eval.h"

#include <string.h>

/* ---- arguments ---------------------------------------------------------------- */

tv tpl_arg(const tpl_args *a, size_t i, const char *name, tv def) {
    if (i < a->npos) return a->pos[i];
    if (name)
        for (size_t k = 0; k < a->nkw; k++)
            if (!strcmp(a->kw_names[k], name)) return a->kw[k];
    return def;
}

bool tpl_has_arg(const tpl_args *a, size_t i, const char *name) {
    if (i < a->npos) return true;
    if (name)
        for (size_t k = 0; k < a->nkw; k++)
            if (!strcmp(a->kw_names[k], name)) return true;
    return false;
}

lmc_status tpl_check_args(const tpl_args *a, const char *fn, size_t max_pos,
                          const char *const *kw_allowed) {
    if (a->npos > max_pos)
        return lmc_error(LMC_ERR_FORMAT,
                         "%s() takes at most %zu positional argument(s) (%zu given)", fn, max_pos,
                         a->npos);
    for (size_t k = 0; k < a->nkw; k++) {
        bool ok = false;
        for (size_t j = 0; kw_allowed && kw_allowed[j] && !ok; j++)
            ok = !strcmp(kw_allowed[j], a->kw_names[k]);
        if (!ok)
            return lmc_error(LMC_ERR_FORMAT, "%s() got an unexpected keyword argument '%s'", fn,
                             a->kw_names[k]);
    }
    return LMC_OK;
}

lmc_status tpl_need_str(tv v, const char *fn) {
    if (v.type == TV_STRING) return LMC_OK;
    if (v.type == TV_UNDEFINED) return tpl_undefined_error(v);
    return lmc_error(LMC_ERR_FORMAT, "%s() argument must be str, not %s", fn, tv_type_name(v));
}
