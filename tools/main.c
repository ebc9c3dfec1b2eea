/* The `tightfit` program: the command line of tightfit/cli.h. */
#include "tightfit/cli.h"

int main(int argc, char **argv) { return tf_cli_main(argc, argv); }
