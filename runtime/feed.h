/* The data feed's declarations are public: tightfit/feed.h. */
#ifndef TIGHTFIT_RUNTIME_FEED_H
#define TIGHTFIT_RUNTIME_FEED_H

#include "tightfit/feed.h"

#endif
