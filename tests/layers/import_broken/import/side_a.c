/* Fault: side_a.c and side_b.c, one stage, call each other. */
int side_b(int x);
int side_a(int x);

int side_a(int x) { return x > 0 ? side_b(x - 1) : 0; }
