/* A C program on the installed C API (gemmtune::gemmtune_c, or pkg-config gemmtune): prints
 * the library's version. */
#include <gemmtune/gemmtune_c.h>
#include <stdio.h>

int main(void) {
  printf("%s\n", gt_version());
  return 0;
}
