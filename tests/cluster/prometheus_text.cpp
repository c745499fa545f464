#include "tests/cluster/prometheus_text.h"

#include <cctype>
#include <cmath>
#include <set>
#include <sstream>
#include <stdexcept>

namespace symmesh::testing {
namespace {

// [a-zA-Z_:][a-zA-Z0-9_:]* for metric names; label names take no ':'.
bool valid_name(const std::string& name, bool colons) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && !(colons && c == ':')) {
      return false;
    }
  }
  return true;
}
const std::set<std::string> kTypes = {"counter", "gauge", "histogram", "summary", "untyped"};

[[noreturn]] void fail(int line, const std::string& what) {
  throw std::runtime_error("line " + std::to_string(line) + ": " + what);
}

double parse_value(const std::string& text, int line) {
  if (text == "+Inf") return INFINITY;
  if (text == "-Inf") return -INFINITY;
  if (text == "NaN") return NAN;
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    fail(line, "value '" + text + "' is not a number");
  }
  if (used != text.size()) fail(line, "value '" + text + "' is not a number");
  return value;
}

// name{a="x",b="y"} value [timestamp]
PromSample parse_sample(const std::string& text, int line) {
  PromSample sample;
  size_t i = 0;
  while (i < text.size() && text[i] != '{' && text[i] != ' ') ++i;
  sample.name = text.substr(0, i);
  if (!valid_name(sample.name, true)) fail(line, "bad metric name '" + sample.name + "'");
  if (i < text.size() && text[i] == '{') {
    ++i;
    while (i < text.size() && text[i] != '}') {
      const size_t eq = text.find('=', i);
      if (eq == std::string::npos) fail(line, "label without '='");
      const std::string label = text.substr(i, eq - i);
      if (!valid_name(label, false) || label.starts_with("__")) {
        fail(line, "bad label name '" + label + "'");
      }
      i = eq + 1;
      if (i >= text.size() || text[i] != '"') fail(line, "label value not quoted");
      std::string value;
      for (++i;; ++i) {
        if (i >= text.size()) fail(line, "unterminated label value");
        if (text[i] == '"') break;
        if (text[i] == '\\') {
          if (++i >= text.size()) fail(line, "dangling escape");
          if (text[i] == 'n')
            value += '\n';
          else if (text[i] == '\\' || text[i] == '"')
            value += text[i];
          else
            fail(line, std::string("bad escape \\") + text[i]);
        } else {
          value += text[i];
        }
      }
      ++i;  // past the closing quote
      if (!sample.labels.emplace(label, value).second) fail(line, "label '" + label + "' twice");
      if (i < text.size() && text[i] == ',')
        ++i;
      else if (i >= text.size() || text[i] != '}')
        fail(line, "expected ',' or '}'");
    }
    if (i >= text.size()) fail(line, "unterminated label set");
    ++i;
  }
  if (i >= text.size() || text[i] != ' ') fail(line, "expected a space before the value");
  std::istringstream rest(text.substr(i + 1));
  std::string value, timestamp, extra;
  rest >> value >> timestamp >> extra;
  if (value.empty() || !extra.empty()) fail(line, "expected 'value [timestamp]'");
  sample.value = parse_value(value, line);
  return sample;
}

// The family a sample name belongs to: a histogram's _bucket/_sum/_count go to their base.
std::string family_of(const std::string& name, const std::map<std::string, PromFamily>& families) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    if (name.ends_with(suffix)) {
      const std::string base = name.substr(0, name.size() - std::string(suffix).size());
      auto it = families.find(base);
      if (it != families.end() && it->second.type == "histogram") return base;
    }
  }
  return name;
}

void check_histogram(const std::string& name, const PromFamily& family) {
  std::map<std::map<std::string, std::string>, std::vector<const PromSample*>> series;
  for (const auto& sample : family.samples) {
    auto labels = sample.labels;
    labels.erase("le");
    series[labels].push_back(&sample);
  }
  for (const auto& [labels, samples] : series) {
    double last = -1, inf = -1, count = -1, previous_le = -INFINITY;
    bool has_sum = false;
    for (const PromSample* s : samples) {
      if (s->name == name + "_bucket") {
        auto le = s->labels.find("le");
        if (le == s->labels.end()) throw std::runtime_error(name + ": a bucket without le");
        const double bound = parse_value(le->second, 0);
        if (bound <= previous_le) throw std::runtime_error(name + ": buckets not in order");
        previous_le = bound;
        if (s->value < last) throw std::runtime_error(name + ": buckets not cumulative");
        last = s->value;
        if (std::isinf(bound)) inf = s->value;
      } else if (s->name == name + "_count") {
        count = s->value;
      } else if (s->name == name + "_sum") {
        has_sum = true;
      } else {
        throw std::runtime_error(name + ": unexpected sample " + s->name);
      }
    }
    if (inf < 0) throw std::runtime_error(name + ": no +Inf bucket");
    if (count != inf) throw std::runtime_error(name + ": _count differs from the +Inf bucket");
    if (!has_sum) throw std::runtime_error(name + ": no _sum");
  }
}

}  // namespace

std::map<std::string, PromFamily> parse_prometheus_text(const std::string& text) {
  std::map<std::string, PromFamily> families;
  std::set<std::string> closed;  // families whose samples are over (a later one started)
  std::set<std::pair<std::string, std::map<std::string, std::string>>> seen;
  std::string current;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  if (!text.empty() && text.back() != '\n') throw std::runtime_error("no newline at the end");
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    if (line.starts_with("#")) {
      std::istringstream words(line);
      std::string hash, keyword, name;
      words >> hash >> keyword >> name;
      if (hash != "#" || (keyword != "HELP" && keyword != "TYPE")) continue;  // a comment
      if (!valid_name(name, true)) fail(number, "bad metric name '" + name + "'");
      std::string rest;
      std::getline(words, rest);
      if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
      PromFamily& family = families[name];
      if (!family.samples.empty() || closed.count(name)) {
        fail(number, keyword + " for " + name + " after its samples");
      }
      if (keyword == "TYPE") {
        if (!family.type.empty()) fail(number, "second TYPE for " + name);
        if (!kTypes.count(rest)) fail(number, "unknown type '" + rest + "'");
        family.type = rest;
      } else {
        if (!family.help.empty()) fail(number, "second HELP for " + name);
        family.help = rest.empty() ? " " : rest;
      }
      continue;
    }
    PromSample sample = parse_sample(line, number);
    const std::string name = family_of(sample.name, families);
    if (name != current) {
      if (!current.empty()) closed.insert(current);
      if (closed.count(name)) fail(number, "the samples of " + name + " are split");
      current = name;
    }
    if (!seen.emplace(sample.name, sample.labels).second) {
      fail(number, "series " + sample.name + " twice");
    }
    families[name].samples.push_back(std::move(sample));
  }
  for (const auto& [name, family] : families) {
    if (family.type.empty()) throw std::runtime_error(name + ": no TYPE line");
    if (family.help.empty()) throw std::runtime_error(name + ": no HELP line");
    if (family.type == "counter" && !name.ends_with("_total")) {
      throw std::runtime_error(name + ": a counter not named *_total");
    }
    if (family.type == "histogram") check_histogram(name, family);
  }
  return families;
}

}  // namespace symmesh::testing
