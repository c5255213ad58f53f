// AddTlsFlags (common/tls_flags.h), with CLI11.
#include "common/tls_flags.h"

#include "CLI/CLI.hpp"

namespace kolo::tls {

void AddTlsFlags(CLI::App& app, TlsFiles& given) {
  app.add_option("--tls-cert", given.cert,
                 "this process's TLS certificate, PEM, from the job's CA "
                 "(with --tls-key and --tls-ca; default: $KOLO_TLS_CERT)")
      ->type_name("FILE");
  app.add_option("--tls-key", given.key,
                 "the certificate's private key, PEM, unencrypted (default: "
                 "$KOLO_TLS_KEY)")
      ->type_name("FILE");
  app.add_option("--tls-ca", given.ca,
                 "the job's CA certificate, PEM (default: $KOLO_TLS_CA)")
      ->type_name("FILE");
}

}  // namespace kolo::tls
