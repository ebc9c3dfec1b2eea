/* Fault: side_a.c and side_b.c, one stage, call each other. */
int side_a(int x);
int side_b(int x);

int side_b(int x) { return x > 0 ? side_a(x - 1) : 1; }
