/* What the map front end's files share (src/map/map.c, src/map/map_async.c):
 * the argument checks that turn public arrays into a checked call. */
#ifndef LACUNA_MAP_FRONT_H
#define LACUNA_MAP_FRONT_H

#include "map/map_backend.h"

/* Shape, dtype and memory checks shared by every map entry. bridge may be NULL
 * (planned calls): then m and n come from the plan (plan_m, plan_n). */
lac_status lac_map_check_call(lac_ctx_t ctx, const lac_map_params *params, const lac_array *source,
                              const lac_array *bridge, const lac_array *weights, const lac_array *target,
                              int64_t plan_m, int64_t plan_n, lac_map_call *call);

#endif
