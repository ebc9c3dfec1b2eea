/* A core header that includes the graph layer: upward. */
#include "graph/b.h"
