// Conformance driver: the generated C++ parser over hex lines.
// Input, one case a line: "LAYOUT_ID HEX"; output one JSON object a line
// (tests/langs/README.md). Parse errors are the runtime's (kaitai::kstruct_error,
// std::ios_base::failure at the end of the bytes, kaitai::bytes_to_str_error);
// anything else is a crash and ends the process.
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include "kaitai/exceptions.h"
#include "kaitai/kaitaistream.h"
#include "liftbridge_commitlog.h"
#include "liftbridge_envelope.h"

typedef liftbridge_envelope_t env_t;
typedef liftbridge_commitlog_t cl_t;

static std::string hex(const std::string& b) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (size_t i = 0; i < b.size(); i++) {
        unsigned char c = static_cast<unsigned char>(b[i]);
        out += digits[c >> 4];
        out += digits[c & 15];
    }
    return out;
}

static std::string unhex(const std::string& s) {
    std::string out;
    for (size_t i = 0; i + 1 < s.size(); i += 2) out += static_cast<char>(std::stoi(s.substr(i, 2), 0, 16));
    return out;
}

static std::string jstr(const std::string& s) {
    std::string out = "\"";
    for (size_t i = 0; i < s.size(); i++) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (c == '"' || c == '\\') { out += '\\'; out += c; }
        else if (c < 0x20 || c > 0x7e) { char buf[8]; std::snprintf(buf, sizeof buf, "\\u%04x", c); out += buf; }
        else out += c;
    }
    return out + "\"";
}

static std::string failure(const std::exception& e) {
    return std::string("{\"ok\":false,\"error\":") + jstr(e.what()) + "}";
}

template <class T> static std::string num(T v) {
    std::ostringstream o;
    o << +v;
    return o.str();
}

static std::string commitlog(const std::string& payload) {
    try {
        kaitai::kstream ks(payload);
        cl_t cl(&ks);
        std::string out = "{\"ok\":true,\"leader_epoch\":\"" + num(cl.leader_epoch()) +
                          "\",\"high_watermark\":\"" + num(cl.high_watermark()) + "\",\"entries\":[";
        const std::vector<cl_t::entry_t*>& entries = *cl.entries();
        for (size_t i = 0; i < entries.size(); i++) {
            cl_t::entry_t* e = entries[i];
            cl_t::body_t* b = e->body();
            out += std::string(i ? "," : "") + "{\"offset\":\"" + num(e->offset()) + "\",\"timestamp\":\"" +
                   num(e->timestamp()) + "\",\"leader_epoch\":\"" + num(e->leader_epoch()) +
                   "\",\"size\":" + num(e->size()) + ",\"crc32c\":" + num(b->crc32c()) +
                   ",\"magic\":" + num(b->magic()) + ",\"attributes\":" + num(b->attributes()) +
                   ",\"key\":" + (b->key_len() >= 0 ? "\"" + hex(b->key()) + "\"" : "null") +
                   ",\"value\":" + (b->value_len() >= 0 ? "\"" + hex(b->value()) + "\"" : "null") +
                   ",\"headers\":[";
            const std::vector<cl_t::header_t*>& headers = *b->headers();
            for (size_t j = 0; j < headers.size(); j++) {
                out += std::string(j ? "," : "") + "[\"" + hex(headers[j]->key()) + "\",\"" +
                       hex(headers[j]->value()) + "\"]";
            }
            out += "]}";
        }
        return out + "]}";
    } catch (const kaitai::kstruct_error& e) {
        return failure(e);
    } catch (const kaitai::bytes_to_str_error& e) {
        return failure(e);
    } catch (const std::ios_base::failure& e) {
        return failure(e);
    }
}

static std::string parse(const std::string& data, int layout) {
    try {
        kaitai::kstream ks(data);
        env_t env(static_cast<env_t::layout_t>(layout), &ks);
        std::string out = "{\"ok\":true";
        std::string cl = "null";
        env_t::header_t* h = env._is_null_header() ? 0 : env.header();
        if (h) {
            out += ",\"version\":" + num(h->version()) + ",\"header_len\":" + num(h->header_len()) +
                   ",\"flags\":" + num(h->flags()) + ",\"msg_type\":" + num(h->msg_type()) +
                   ",\"crc32c\":" + (h->has_crc() ? num(env.crc32c()) : std::string("null"));
            if (env.layout() == env_t::LAYOUT_V0 &&
                h->v0_msg_type() == env_t::V0_MSG_TYPE_REPLICATION_RESPONSE) {
                cl = commitlog(env.payload());
            }
        } else {
            out += ",\"version\":null,\"header_len\":null,\"flags\":null,\"msg_type\":null,\"crc32c\":null";
        }
        return out + ",\"payload_offset\":" + num(data.size() - env.payload().size()) +
               ",\"payload_len\":" + num(env.payload().size()) + ",\"commitlog\":" + cl + "}";
    } catch (const kaitai::kstruct_error& e) {
        return failure(e);
    } catch (const std::ios_base::failure& e) {
        return failure(e);
    }
}

int main() {
    std::ios::sync_with_stdio(false);
    std::string line;
    while (std::getline(std::cin, line)) {
        size_t sp = line.find(' ');
        if (line.empty()) continue;
        int layout = std::stoi(line.substr(0, sp));
        std::string hexs = sp == std::string::npos ? "" : line.substr(sp + 1);
        while (!hexs.empty() && (hexs.back() == '\r' || hexs.back() == ' ')) hexs.pop_back();
        std::cout << parse(unhex(hexs), layout) << '\n';
    }
    return 0;
}
