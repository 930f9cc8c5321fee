long adder_add(long a, long b);
