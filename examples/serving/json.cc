// JSON parsing (recursive descent with a depth bound) and writing.
#include "examples/serving/json.h"

#include <cassert>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace kiln::serving {

// ---- Json ----------------------------------------------------------------------------------

Json Json::Bool(bool b) {
  Json j;
  j.type_ = Type::kBool;
  j.b_ = b;
  return j;
}

Json Json::Double(double d) {
  Json j;
  j.type_ = Type::kNumber;
  j.d_ = d;
  return j;
}

Json Json::Int(int64_t i) {
  Json j;
  j.type_ = Type::kNumber;
  j.is_int_ = true;
  j.i_ = i;
  return j;
}

Json Json::String(std::string s) {
  Json j;
  j.type_ = Type::kString;
  j.c_ = std::make_unique<Composite>();
  j.c_->str = std::move(s);
  return j;
}

Json Json::Array() {
  Json j;
  j.type_ = Type::kArray;
  j.c_ = std::make_unique<Composite>();
  return j;
}

Json Json::Object() {
  Json j;
  j.type_ = Type::kObject;
  j.c_ = std::make_unique<Composite>();
  return j;
}

bool Json::bool_value() const {
  assert(is_bool());
  return b_;
}

double Json::double_value() const {
  assert(is_number());
  return is_int_ ? static_cast<double>(i_) : d_;
}

int64_t Json::int_value() const {
  assert(is_int());
  return i_;
}

const std::string& Json::string_value() const {
  assert(is_string());
  return c_->str;
}

const std::vector<Json>& Json::items() const {
  assert(is_array() || is_object());
  return c_->items;
}

const std::vector<std::string>& Json::keys() const {
  assert(is_object());
  return c_->keys;
}

size_t Json::size() const { return (is_array() || is_object()) ? c_->items.size() : 0; }

const Json* Json::Find(std::string_view key) const {
  if (!is_object()) return nullptr;
  for (size_t i = 0; i < c_->keys.size(); ++i) {
    if (c_->keys[i] == key) return &c_->items[i];
  }
  return nullptr;
}

void Json::Append(Json value) {
  assert(is_array());
  c_->items.push_back(std::move(value));
}

void Json::Set(std::string key, Json value) {
  assert(is_object());
  c_->keys.push_back(std::move(key));
  c_->items.push_back(std::move(value));
}

std::string Json::Serialize() const {
  std::string out;
  JsonWriter w(&out);
  w.Value(*this);
  return out;
}

// ---- Parser --------------------------------------------------------------------------------

namespace {

// Length of the valid UTF-8 sequence at `p` (lead byte >= 0x80, `avail` bytes readable), or 0
// for an invalid or truncated one (overlong forms, surrogates and code points past U+10FFFF
// are invalid).
size_t Utf8SequenceLength(const char* p, size_t avail) {
  auto byte = [&](size_t i) { return static_cast<uint8_t>(p[i]); };
  uint8_t b0 = byte(0);
  size_t n;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (avail < n) return 0;
  if (byte(1) < lo || byte(1) > hi) return 0;
  for (size_t i = 2; i < n; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return n;
}

class Parser {
 public:
  Parser(std::string_view text, const JsonLimits& limits) : s_(text), limits_(limits) {}

  StatusOr<Json> ParseDocument() {
    if (s_.size() > limits_.max_bytes) {
      return InvalidArgument("JSON document of " + std::to_string(s_.size()) +
                             " bytes exceeds the limit of " + std::to_string(limits_.max_bytes));
    }
    SkipSpace();
    Json value;
    if (Status st = ParseValue(0, &value); !st.ok()) return st;
    SkipSpace();
    if (pos_ != s_.size()) return Error("unexpected data after the JSON value");
    return value;
  }

 private:
  Status Error(const std::string& what) const {
    return InvalidArgument("JSON byte " + std::to_string(pos_) + ": " + what);
  }

  void SkipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Status ParseValue(int depth, Json* out) {
    if (pos_ >= s_.size()) return Error("unexpected end of input, expected a value");
    switch (s_[pos_]) {
      case '{':
        return ParseObject(depth + 1, out);
      case '[':
        return ParseArray(depth + 1, out);
      case '"': {
        std::string str;
        if (Status st = ParseString(&str); !st.ok()) return st;
        *out = Json::String(std::move(str));
        return Status::Ok();
      }
      case 't':
        if (!Literal("true")) return Error("invalid literal");
        *out = Json::Bool(true);
        return Status::Ok();
      case 'f':
        if (!Literal("false")) return Error("invalid literal");
        *out = Json::Bool(false);
        return Status::Ok();
      case 'n':
        if (!Literal("null")) return Error("invalid literal");
        *out = Json();
        return Status::Ok();
      default:
        return ParseNumber(out);
    }
  }

  Status CheckDepth(int depth) const {
    if (depth > limits_.max_depth) {
      return Error("nesting deeper than " + std::to_string(limits_.max_depth) + " levels");
    }
    return Status::Ok();
  }

  Status ParseArray(int depth, Json* out) {
    RETURN_IF_ERROR(CheckDepth(depth));
    ++pos_;  // '['
    Json array = Json::Array();
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      *out = std::move(array);
      return Status::Ok();
    }
    while (true) {
      SkipSpace();
      Json item;
      RETURN_IF_ERROR(ParseValue(depth, &item));
      array.Append(std::move(item));
      SkipSpace();
      if (pos_ >= s_.size()) return Error("unexpected end of input in an array");
      if (s_[pos_] == ']') break;
      if (s_[pos_] != ',') return Error("expected ',' or ']' in an array");
      ++pos_;
    }
    ++pos_;
    *out = std::move(array);
    return Status::Ok();
  }

  Status ParseObject(int depth, Json* out) {
    RETURN_IF_ERROR(CheckDepth(depth));
    ++pos_;  // '{'
    Json object = Json::Object();
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      *out = std::move(object);
      return Status::Ok();
    }
    while (true) {
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '"') return Error("expected a string key");
      std::string key;
      RETURN_IF_ERROR(ParseString(&key));
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != ':') return Error("expected ':'");
      ++pos_;
      SkipSpace();
      Json value;
      RETURN_IF_ERROR(ParseValue(depth, &value));
      object.Set(std::move(key), std::move(value));
      SkipSpace();
      if (pos_ >= s_.size()) return Error("unexpected end of input in an object");
      if (s_[pos_] == '}') break;
      if (s_[pos_] != ',') return Error("expected ',' or '}' in an object");
      ++pos_;
    }
    ++pos_;
    *out = std::move(object);
    return Status::Ok();
  }

  static int HexDigit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // Reads the 4 hex digits after "\u".
  Status ReadHex4(uint32_t* value) {
    if (s_.size() - pos_ < 4) return Error("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      int d = HexDigit(s_[pos_ + i]);
      if (d < 0) return Error("invalid hex digit in a \\u escape");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    pos_ += 4;
    *value = v;
    return Status::Ok();
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  Status ParseEscape(std::string* out) {
    if (pos_ >= s_.size()) return Error("unterminated string");
    char c = s_[pos_++];
    switch (c) {
      case '"':
        out->push_back('"');
        return Status::Ok();
      case '\\':
        out->push_back('\\');
        return Status::Ok();
      case '/':
        out->push_back('/');
        return Status::Ok();
      case 'b':
        out->push_back('\b');
        return Status::Ok();
      case 'f':
        out->push_back('\f');
        return Status::Ok();
      case 'n':
        out->push_back('\n');
        return Status::Ok();
      case 'r':
        out->push_back('\r');
        return Status::Ok();
      case 't':
        out->push_back('\t');
        return Status::Ok();
      case 'u':
        break;
      default:
        --pos_;
        return Error("invalid escape character");
    }
    uint32_t cp;
    RETURN_IF_ERROR(ReadHex4(&cp));
    if (cp >= 0xDC00 && cp <= 0xDFFF) return Error("unpaired low surrogate in a \\u escape");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (s_.substr(pos_, 2) != "\\u") return Error("high surrogate without a low surrogate");
      pos_ += 2;
      uint32_t low;
      RETURN_IF_ERROR(ReadHex4(&low));
      if (low < 0xDC00 || low > 0xDFFF) return Error("high surrogate without a low surrogate");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    AppendUtf8(cp, out);
    return Status::Ok();
  }

  Status ParseString(std::string* out) {
    ++pos_;  // opening quote
    while (true) {
      if (pos_ >= s_.size()) return Error("unterminated string");
      uint8_t c = static_cast<uint8_t>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return Status::Ok();
      }
      if (c == '\\') {
        ++pos_;
        RETURN_IF_ERROR(ParseEscape(out));
      } else if (c < 0x20) {
        return Error("control character in a string");
      } else if (c < 0x80) {
        out->push_back(static_cast<char>(c));
        ++pos_;
      } else {
        size_t n = Utf8SequenceLength(s_.data() + pos_, s_.size() - pos_);
        if (n == 0) return Error("invalid UTF-8 in a string");
        out->append(s_.data() + pos_, n);
        pos_ += n;
      }
    }
  }

  static bool IsDigit(char c) { return c >= '0' && c <= '9'; }

  Status ParseNumber(Json* out) {
    size_t start = pos_;
    bool integer = true;
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    if (pos_ >= s_.size() || !IsDigit(s_[pos_])) {
      return Error(pos_ == start ? "unexpected character, expected a value"
                                 : "expected a digit after '-'");
    }
    if (s_[pos_] == '0') {
      ++pos_;
      if (pos_ < s_.size() && IsDigit(s_[pos_])) return Error("leading zero in a number");
    } else {
      while (pos_ < s_.size() && IsDigit(s_[pos_])) ++pos_;
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      integer = false;
      ++pos_;
      if (pos_ >= s_.size() || !IsDigit(s_[pos_])) return Error("expected a digit after '.'");
      while (pos_ < s_.size() && IsDigit(s_[pos_])) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      integer = false;
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (pos_ >= s_.size() || !IsDigit(s_[pos_])) return Error("expected a digit in an exponent");
      while (pos_ < s_.size() && IsDigit(s_[pos_])) ++pos_;
    }
    // The grammar above has been checked, so strtoll/strtod see exactly this token.
    std::string token(s_.substr(start, pos_ - start));
    if (integer) {
      errno = 0;
      long long v = std::strtoll(token.c_str(), nullptr, 10);
      if (errno == 0) {
        *out = Json::Int(v);
        return Status::Ok();
      }
      // Out of int64 range: fall through to a double, as strtod would read it.
    }
    errno = 0;
    double d = std::strtod(token.c_str(), nullptr);
    if (errno == ERANGE && std::isinf(d)) {
      pos_ = start;
      return Error("number out of the range of a double");
    }
    *out = Json::Double(d);
    return Status::Ok();
  }

  std::string_view s_;
  JsonLimits limits_;
  size_t pos_ = 0;
};

}  // namespace

StatusOr<Json> ParseJson(std::string_view text, const JsonLimits& limits) {
  return Parser(text, limits).ParseDocument();
}

// ---- Writer --------------------------------------------------------------------------------

void JsonWriter::Separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!has_element_.empty()) {
    if (has_element_.back()) out_->push_back(',');
    has_element_.back() = true;
  }
}

void JsonWriter::BeginObject() {
  Separate();
  out_->push_back('{');
  has_element_.push_back(false);
}

void JsonWriter::EndObject() {
  out_->push_back('}');
  has_element_.pop_back();
}

void JsonWriter::BeginArray() {
  Separate();
  out_->push_back('[');
  has_element_.push_back(false);
}

void JsonWriter::EndArray() {
  out_->push_back(']');
  has_element_.pop_back();
}

void JsonWriter::Key(std::string_view key) {
  Separate();
  WriteEscaped(key);
  out_->push_back(':');
  after_key_ = true;
}

void JsonWriter::String(std::string_view s) {
  Separate();
  WriteEscaped(s);
}

void JsonWriter::Int(int64_t v) {
  Separate();
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out_->append(buf, r.ptr);
}

void JsonWriter::Uint(uint64_t v) {
  Separate();
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out_->append(buf, r.ptr);
}

namespace {

// Non-finite values as strings; finite ones in the shortest round-tripping form. to_chars may
// write "1e+30", which is valid JSON.
template <typename T>
void AppendFloat(T v, std::string* out) {
  if (std::isnan(v)) {
    out->append("\"NaN\"");
  } else if (std::isinf(v)) {
    out->append(v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
  } else {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof(buf), v);
    out->append(buf, r.ptr);
  }
}

}  // namespace

void JsonWriter::Double(double v) {
  Separate();
  AppendFloat(v, out_);
}

void JsonWriter::Float(float v) {
  Separate();
  AppendFloat(v, out_);
}

void JsonWriter::Bool(bool v) {
  Separate();
  out_->append(v ? "true" : "false");
}

void JsonWriter::Null() {
  Separate();
  out_->append("null");
}

void JsonWriter::Value(const Json& v) {
  switch (v.type()) {
    case Json::Type::kNull:
      Null();
      break;
    case Json::Type::kBool:
      Bool(v.bool_value());
      break;
    case Json::Type::kNumber:
      if (v.is_int()) {
        Int(v.int_value());
      } else {
        Double(v.double_value());
      }
      break;
    case Json::Type::kString:
      String(v.string_value());
      break;
    case Json::Type::kArray:
      BeginArray();
      for (const Json& item : v.items()) Value(item);
      EndArray();
      break;
    case Json::Type::kObject:
      BeginObject();
      for (size_t i = 0; i < v.size(); ++i) {
        Key(v.keys()[i]);
        Value(v.items()[i]);
      }
      EndObject();
      break;
  }
}

void JsonWriter::WriteEscaped(std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  out_->push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    uint8_t c = static_cast<uint8_t>(s[i]);
    if (c == '"' || c == '\\') {
      out_->push_back('\\');
      out_->push_back(static_cast<char>(c));
      ++i;
    } else if (c < 0x20) {
      switch (c) {
        case '\n':
          out_->append("\\n");
          break;
        case '\r':
          out_->append("\\r");
          break;
        case '\t':
          out_->append("\\t");
          break;
        default:
          out_->append("\\u00");
          out_->push_back(kHex[c >> 4]);
          out_->push_back(kHex[c & 15]);
      }
      ++i;
    } else if (c < 0x80) {
      out_->push_back(static_cast<char>(c));
      ++i;
    } else {
      size_t n = Utf8SequenceLength(s.data() + i, s.size() - i);
      if (n > 0) {
        out_->append(s.data() + i, n);
        i += n;
      } else {
        out_->append("\\ufffd");
        ++i;
      }
    }
  }
  out_->push_back('"');
}

}  // namespace kiln::serving
