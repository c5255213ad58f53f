// Parsing of the lines kolo-test-worker prints ("TOPO key=value ..."), for
// multi-process tests.
#ifndef KOLO_TESTS_TESTING_TOPOLOGY_H_
#define KOLO_TESTS_TESTING_TOPOLOGY_H_

#include <map>
#include <string>
#include <vector>

namespace kolo::testing {

using Fields = std::map<std::string, std::string>;

// Every line of `output` that contains `tag` followed by a space, as the
// key=value fields after the tag.
std::vector<Fields> ParseTagged(const std::string& output,
                                const std::string& tag);

// Field `key` as an int (-999 if absent or not a number).
int IntField(const Fields& f, const std::string& key);

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TESTING_TOPOLOGY_H_
