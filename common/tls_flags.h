// The --tls-cert, --tls-key and --tls-ca flags of the programs that parse
// their command line with CLI11 (kolo-coordinator, kolo-ctl), declared once:
// the same names, value names and help. What the values mean, and which
// wins over KOLO_TLS_*, is common/tls.h's TlsFilesFromFlagsOrEnvironment,
// which kolorun's own parser uses too.
//
// Thread-safety: AddTlsFlags changes only `app`, which CLI11 does not share.
#ifndef KOLO_COMMON_TLS_FLAGS_H_
#define KOLO_COMMON_TLS_FLAGS_H_

#include "common/tls.h"

namespace CLI {
class App;
}  // namespace CLI

namespace kolo::tls {

// Adds the three flags to `app` (a command or a subcommand); a parse writes
// their values into `given` ("" stays for one not given). `given` must
// outlive the parse.
void AddTlsFlags(CLI::App& app, TlsFiles& given);

}  // namespace kolo::tls

#endif  // KOLO_COMMON_TLS_FLAGS_H_
