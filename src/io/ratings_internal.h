/* Kept only until the mf room (src/mf/mf_internal.h) includes data/ratings.h
 * itself; it will be removed then. The ratings type lives in src/data. */
#include "data/ratings.h"
