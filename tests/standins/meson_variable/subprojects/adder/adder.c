#include "adder.h"
long adder_add(long a, long b) { return a + b; }
