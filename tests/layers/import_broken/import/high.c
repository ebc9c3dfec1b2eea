/* The high stage calling down, as it may. */
#include "import/high.h"
#include "import/low.h"

int high_entry(int x) { return low_entry(x) + 1; }
