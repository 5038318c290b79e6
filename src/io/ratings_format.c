/* The names of the rating file formats ("triples", "movielens", ...), shared
 * by the reader, the writer and the command line. */
#include "core/internal.h"

#include <string.h>

static const char *const format_names[] = {"auto", "triples", "movielens", "udata", "csv", "mm"};

const char *lac_ratings_format_name(lac_ratings_format format)
{
    return (format >= LAC_RATINGS_AUTO && format <= LAC_RATINGS_MATRIX_MARKET) ? format_names[format] : "unknown";
}

lac_status lac_ratings_format_parse(const char *name, lac_ratings_format *format)
{
    if (!name || !format) return lac_error(NULL, LAC_ERR_ARGUMENT, "name or format is NULL");
    for (int i = 0; i <= LAC_RATINGS_MATRIX_MARKET; i++)
        if (strcmp(name, format_names[i]) == 0) {
            *format = (lac_ratings_format)i;
            return LAC_SUCCESS;
        }
    return lac_error(NULL, LAC_ERR_ARGUMENT, "unknown ratings format '%s' (auto, triples, movielens, udata, csv, mm)",
                     name);
}
