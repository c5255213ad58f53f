// The one table of kolo's environment variables: every KOLO_* variable some
// part of kolo reads (the worker library, kolorun, kolo-coordinator,
// kolo-ctl, kolo-bench, the scripts and the tests), with who reads it and,
// for those a user may set, its row of docs/configuration.md (section, flag,
// Horovod alias, unit, default, meaning). From it come
// - the worker's check for unknown KOLO_* names (worker_lib/config.h:
//   KnownVariables, UnknownVariableWarnings), and
// - the tables of docs/configuration.md (VariablesMarkdown;
//   common_variables_test fails when the page differs from it).
// The rows of common/knobs.h's knobs take their Horovod alias and default
// from the knob table (`knob`), so that no default is written twice.
// A new variable gets its row here in the change that reads it.
//
// Thread-safety: the table is immutable and the functions are pure.
// Invariants: names are unique; an internal row has no section; a row with a
// knob names that knob's variable.
#ifndef KOLO_COMMON_VARIABLES_H_
#define KOLO_COMMON_VARIABLES_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/knobs.h"

namespace kolo {

struct Variable {
  // The variable; a documentation-only row of Horovod's names (read by
  // kolo.torch or by user scripts) may list several, ", "-separated.
  const char* name;
  const char* read_by;  // who reads it, e.g. "worker, kolorun"
  // Set by kolo's own tools and tests for themselves: known, but neither
  // documented nor suggested.
  bool internal = false;
  // common/knobs.h's row, for a shared knob: gives the alias and default.
  const Knob* knob = nullptr;
  // docs/configuration.md's row, in markdown (nullptr: "—"); `alias` and
  // `default_text` stay nullptr where `knob` gives them.
  const char* section = nullptr;
  const char* flag = nullptr;
  const char* alias = nullptr;
  const char* unit = nullptr;
  const char* default_text = nullptr;
  const char* meaning = nullptr;
};

// Every row, documented ones in the page's order, then the internal ones.
absl::Span<const Variable> Variables();

// The sections of docs/configuration.md that hold variables, in order.
std::vector<std::string> VariableSections();

// The markdown table of `section`'s variables, as docs/configuration.md has
// it (header, separator, one line per row, each ending in "\n").
std::string VariablesMarkdown(absl::string_view section);

}  // namespace kolo

#endif  // KOLO_COMMON_VARIABLES_H_
