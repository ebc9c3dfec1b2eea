/* Fault: a file that stages.txt does not list. */
int stray(int x);

int stray(int x) { return x; }
