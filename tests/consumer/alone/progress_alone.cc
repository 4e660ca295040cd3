// @tensordict//td/parallel:progress alone.
#include "alone/check.h"
#include "td/parallel/progress.h"

int main() {
  td::parallel::ProgressBar bar(3);
  bar.update(3);
  REQUIRE(bar.done() == 3);
  bar.close();
  return 0;
}
