/* The low stage of the broken tree (see stages.txt). */
int low_entry(int x);
