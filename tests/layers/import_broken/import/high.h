/* The high stage of the broken tree (see stages.txt). */
int high_entry(int x);
