#include "coordinator/worker_links.h"

namespace kolo::coordinator {

NoWorkerLinks& NoWorkerLinks::Get() {
  static NoWorkerLinks* const links = new NoWorkerLinks();
  return *links;
}

}  // namespace kolo::coordinator
