/* Fault: a low stage including a high stage's header and calling its function. */
#include "import/low.h"
#include "import/high.h"

int low_entry(int x) { return x > 0 ? high_entry(x - 1) : 0; }
