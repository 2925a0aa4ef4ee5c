//===- KeyEditor.cpp - dotted keys of a job's JSON ------------------------===//

#include "job/KeyEditor.h"

#include <filesystem>
#include <type_traits>
#include <vector>

using namespace conduit;

namespace {

std::vector<std::string_view> splitKey(std::string_view key) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = key.find('.', start);
    parts.push_back(key.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos)
      return parts;
    start = dot + 1;
  }
}

/// The keys whose values name files.
constexpr std::string_view kPathKeys[] = {"model.path", "cluster.profile", "training.data.path"};

/// The value at dotted `key`, const or not.
template <typename JsonT> JsonT *lookup(JsonT &root, std::string_view key) {
  JsonT *node = &root;
  for (std::string_view part : splitKey(key)) {
    if (!node->is_object())
      return nullptr;
    auto &object = node->template get_ref<
        std::conditional_t<std::is_const_v<JsonT>, const Json::object_t, Json::object_t> &>();
    auto it = object.find(part);
    if (it == object.end())
      return nullptr;
    node = &it->second;
  }
  return node;
}

} // namespace

const Json *conduit::findKey(const Json &root, std::string_view key) { return lookup(root, key); }

bool conduit::setKey(Json &root, std::string_view key, Json value, std::string *blocked) {
  const std::vector<std::string_view> parts = splitKey(key);
  Json *node = &root;
  std::string walked;
  for (size_t k = 0; k < parts.size(); ++k) {
    if (!node->is_object() || parts[k].empty()) {
      if (blocked)
        *blocked = walked;
      return false;
    }
    walked += (walked.empty() ? "" : ".") + std::string(parts[k]);
    Json::object_t &object = node->get_ref<Json::object_t &>();
    auto it = object.find(parts[k]);
    const bool last = k + 1 == parts.size();
    // A new key that is not UTF-8 is stored repaired: the job is written out as text.
    if (it == object.end())
      it = object.emplace(fixUtf8(parts[k]), last ? Json() : Json::object()).first;
    if (last) {
      it->second = std::move(value);
      return true;
    }
    node = &it->second;
  }
  return true;
}

void conduit::eraseKey(Json &root, std::string_view key) {
  const size_t dot = key.rfind('.');
  Json *parent = dot == std::string_view::npos ? &root : lookup(root, key.substr(0, dot));
  if (parent && parent->is_object())
    parent->erase(std::string(dot == std::string_view::npos ? key : key.substr(dot + 1)));
}

Json conduit::parseValueText(std::string_view text) {
  Diagnostics ignored("");
  if (std::optional<Json> value = parseJsonText(text, ignored))
    return std::move(*value);
  return fixUtf8(text);
}

bool conduit::applyOverride(Json &root, std::string_view assignment, Diagnostics &diag) {
  const size_t equals = assignment.find('=');
  if (equals == 0 || equals == std::string_view::npos) {
    diag.report("", "--set expects key.path=value, got \"" + std::string(assignment) + "\"");
    return false;
  }
  const std::string_view key = assignment.substr(0, equals);
  Json value = parseValueText(assignment.substr(equals + 1));
  if (value.is_string() && !value.get_ref<const std::string &>().empty())
    for (std::string_view pathKey : kPathKeys)
      if (key == pathKey) {
        std::filesystem::path file(value.get_ref<const std::string &>());
        std::error_code ec;
        if (file.is_relative())
          if (std::filesystem::path absolute = std::filesystem::absolute(file, ec); !ec)
            value = absolute.string();
      }
  std::string blocked;
  if (!setKey(root, key, std::move(value), &blocked)) {
    diag.report(blocked, "--set " + std::string(key) + ": " +
                             (blocked.empty() ? std::string("the job") : "'" + blocked + "'") +
                             " is not an object");
    return false;
  }
  return true;
}
