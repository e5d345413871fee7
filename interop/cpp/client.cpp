// Proton C++ interop client for the proton-broker tests.
//
//   client send    URL ADDRESS COUNT [--spec FILE] [SASL options]
//   client receive URL ADDRESS COUNT [--timeout SECONDS] [--browse] [--credit N] [SASL options]
//
// SASL options (proton::connection_options): --user NAME authenticates as NAME with the
// password in the environment variable INTEROP_PASSWORD (never on the command line);
// --sasl-mechs "A B" sets sasl_allowed_mechs; --sasl-allow-insecure sets
// sasl_allow_insecure_mechs(true), which Proton needs before it sends PLAIN without TLS.
//
// Values travel as "typed JSON", the contract shared with the rhea and Python clients:
// null, booleans, strings, lists and string-keyed maps are themselves; an integer is any AMQP
// integer type and a number with a fraction or exponent is a double (nlohmann keeps the two
// apart, so 2.0 prints as 2.0); {"$binary": "<hex>"} is binary and {"$symbol": "s"} a symbol.
//
// send: message i is spec[i % len(spec)], where spec is a JSON list of
// {"id", "subject", "body", "properties"} (all optional). Without --spec, message i has body
// "message-i" and properties {"index": i}. Every transfer must be settled `accepted`; the
// exit status is 0 only then.
//
// receive: prints each message as one JSON line {"id", "subject", "body", "properties"}
// and accepts it. Exits 0 after COUNT messages, 1 on timeout (default 10 s) or any error.
// --browse attaches with source distribution-mode `copy`; --credit sets the prefetch window.

#include <proton/binary.hpp>
#include <proton/codec/vector.hpp>
#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/duration.hpp>
#include <proton/error_condition.hpp>
#include <proton/message.hpp>
#include <proton/message_id.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/receiver_options.hpp>
#include <proton/scalar.hpp>
#include <proton/sender.hpp>
#include <proton/sender_options.hpp>
#include <proton/source_options.hpp>
#include <proton/symbol.hpp>
#include <proton/tracker.hpp>
#include <proton/value.hpp>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using json = nlohmann::json;

namespace {

const char* usage =
    "usage: client send URL ADDRESS COUNT [--spec FILE] [SASL options]\n"
    "       client receive URL ADDRESS COUNT [--timeout SECONDS] [--browse] [--credit N]\n"
    "                      [SASL options]\n"
    "SASL options: --user NAME (password from $INTEROP_PASSWORD) --sasl-mechs \"A B\"\n"
    "              --sasl-allow-insecure\n";

// ---- typed JSON <-> AMQP values ----------------------------------------------------------

std::string to_hex(const proton::binary& bytes) {
    static const char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char b : bytes) {
        out += digits[b >> 4];
        out += digits[b & 0xf];
    }
    return out;
}

proton::binary from_hex(const std::string& hex) {
    if (hex.size() % 2) throw std::runtime_error("odd-length hex string: " + hex);
    proton::binary out;
    for (size_t i = 0; i < hex.size(); i += 2) {
        out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    }
    return out;
}

bool is_tag(const json& j, const char* tag) {
    return j.is_object() && j.size() == 1 && j.contains(tag);
}

proton::scalar to_scalar(const json& j) {
    if (j.is_null()) return proton::scalar();
    if (j.is_boolean()) return proton::scalar(j.get<bool>());
    if (j.is_number_integer()) return proton::scalar(j.get<int64_t>());
    if (j.is_number_float()) return proton::scalar(j.get<double>());
    if (j.is_string()) return proton::scalar(j.get<std::string>());
    if (is_tag(j, "$binary")) return proton::scalar(from_hex(j["$binary"].get<std::string>()));
    if (is_tag(j, "$symbol")) return proton::scalar(proton::symbol(j["$symbol"].get<std::string>()));
    throw std::runtime_error("not a simple value: " + j.dump());
}

proton::value to_amqp(const json& j) {
    if (j.is_null()) return proton::value(proton::null());
    if (j.is_array()) {
        std::vector<proton::value> items;
        for (const auto& item : j) items.push_back(to_amqp(item));
        return proton::value(items);
    }
    if (j.is_object() && !is_tag(j, "$binary") && !is_tag(j, "$symbol")) {
        std::vector<std::pair<proton::value, proton::value>> entries;
        for (const auto& [key, item] : j.items()) entries.emplace_back(key, to_amqp(item));
        return proton::value(entries);
    }
    proton::value out;
    out = to_scalar(j);
    return out;
}

json from_amqp(const proton::value& v) {
    switch (v.type()) {
    case proton::NULL_TYPE: return nullptr;
    case proton::BOOLEAN: return proton::get<bool>(v);
    case proton::UBYTE: case proton::USHORT: case proton::UINT: case proton::ULONG:
        return proton::coerce<uint64_t>(v);
    case proton::BYTE: case proton::SHORT: case proton::INT: case proton::LONG:
        return proton::coerce<int64_t>(v);
    case proton::FLOAT: case proton::DOUBLE: return proton::coerce<double>(v);
    case proton::STRING: return proton::get<std::string>(v);
    case proton::SYMBOL: return json{{"$symbol", std::string(proton::get<proton::symbol>(v))}};
    case proton::BINARY: return json{{"$binary", to_hex(proton::get<proton::binary>(v))}};
    case proton::LIST: case proton::ARRAY: {
        std::vector<proton::value> items;
        proton::get(v, items);
        json out = json::array();
        for (const auto& item : items) out.push_back(from_amqp(item));
        return out;
    }
    case proton::MAP: {
        std::vector<std::pair<proton::value, proton::value>> entries;
        proton::get(v, entries);
        json out = json::object();
        for (const auto& [key, item] : entries) {
            if (key.type() != proton::STRING) return json{{"$map", "non-string keys"}};
            out[proton::get<std::string>(key)] = from_amqp(item);
        }
        return out;
    }
    default: return json{{"$unsupported", proton::type_name(v.type())}};
    }
}

json id_to_json(const proton::message_id& id) {
    switch (id.type()) {
    case proton::NULL_TYPE: return nullptr;
    case proton::STRING: return proton::get<std::string>(id);
    case proton::ULONG: return proton::get<uint64_t>(id);
    default: return proton::to_string(id);
    }
}

json message_to_json(const proton::message& m) {
    json props = json::object();
    if (!m.properties().empty()) props = from_amqp(m.properties().value());
    return json{{"id", id_to_json(m.id())}, {"subject", m.subject()},
                {"body", from_amqp(m.body())}, {"properties", props}};
}

json default_spec(int index) {
    return json{{"body", "message-" + std::to_string(index)}, {"properties", {{"index", index}}}};
}

proton::message message_from_spec(const json& spec, int index) {
    proton::message m;
    m.id(spec.value("id", "msg-" + std::to_string(index)));
    if (spec.contains("subject")) m.subject(spec["subject"].get<std::string>());
    m.body(to_amqp(spec.value("body", json())));
    json properties = spec.value("properties", json::object());
    for (const auto& [key, item] : properties.items()) {
        m.properties().put(key, to_scalar(item));
    }
    return m;
}

// ---- send --------------------------------------------------------------------------------

class sender_handler : public proton::messaging_handler {
  public:
    sender_handler(std::string url, std::string address, int count, json spec,
                   proton::connection_options connection)
        : url_(std::move(url)), address_(std::move(address)), count_(count),
          spec_(std::move(spec)), connection_(std::move(connection)) {}

    int status() const { return failed_ || accepted_ != count_ ? 1 : 0; }

    void on_container_start(proton::container& c) override {
        c.open_sender(url_ + "/" + address_, proton::sender_options(), connection_);
    }

    void on_sendable(proton::sender& s) override {
        while (s.credit() > 0 && sent_ < count_) {
            json item = spec_.empty() ? default_spec(sent_) : spec_[sent_ % spec_.size()];
            s.send(message_from_spec(item, sent_));
            ++sent_;
        }
    }

    void on_tracker_accept(proton::tracker& t) override {
        if (++accepted_ == count_) t.connection().close();
    }

    void on_tracker_reject(proton::tracker& t) override { fail(t, "rejected"); }
    void on_tracker_release(proton::tracker& t) override { fail(t, "released"); }

    void on_error(const proton::error_condition& e) override {
        std::cerr << "send: error: " << e.what() << std::endl;
        failed_ = true;
    }

  private:
    void fail(proton::tracker& t, const char* outcome) {
        std::cerr << "send: a message was " << outcome << std::endl;
        failed_ = true;
        t.connection().close();
    }

    std::string url_, address_;
    int count_, sent_ = 0, accepted_ = 0;
    json spec_;
    proton::connection_options connection_;
    bool failed_ = false;
};

// ---- receive -----------------------------------------------------------------------------

class receiver_handler : public proton::messaging_handler {
  public:
    receiver_handler(std::string url, std::string address, int count, bool browse, int credit,
                     proton::connection_options connection)
        : url_(std::move(url)), address_(std::move(address)), count_(count), browse_(browse),
          credit_(credit), connection_(std::move(connection)) {}

    int received() const { return received_; }
    int status() const { return failed_ || received_ != count_ ? 1 : 0; }

    void on_container_start(proton::container& c) override {
        proton::source_options source;
        if (browse_) source.distribution_mode(proton::source::COPY);
        proton::receiver_options opts;
        opts.source(source).auto_accept(false).credit_window(credit_);
        c.open_receiver(url_ + "/" + address_, opts, connection_);
    }

    void on_message(proton::delivery& d, proton::message& m) override {
        if (received_ >= count_) return;  // prefetched beyond COUNT: left unsettled
        std::cout << message_to_json(m).dump() << std::endl;
        d.accept();
        if (++received_ == count_) d.connection().close();
    }


    void on_error(const proton::error_condition& e) override {
        std::cerr << "receive: error: " << e.what() << std::endl;
        failed_ = true;
    }

  private:
    std::string url_, address_;
    int count_;
    bool browse_;
    int credit_;
    proton::connection_options connection_;
    int received_ = 0;
    bool failed_ = false;
};

// Runs the container, stopping it if it is still running after `seconds`. A watchdog thread,
// because a timer scheduled on the container would keep run() from returning until it fires.
bool run_with_timeout(proton::container& container, double seconds) {
    std::mutex mutex;
    std::condition_variable finished;
    bool done = false;
    std::atomic<bool> timed_out{false};
    std::thread watchdog([&]() {
        std::unique_lock<std::mutex> lock(mutex);
        auto limit = std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
        if (!finished.wait_for(lock, limit, [&]() { return done; })) {
            timed_out = true;
            container.stop();
        }
    });
    container.run();
    {
        std::lock_guard<std::mutex> lock(mutex);
        done = true;
    }
    finished.notify_all();
    watchdog.join();
    return timed_out;
}

json read_spec(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read spec file " + path);
    json spec = json::parse(in);
    if (!spec.is_array()) throw std::runtime_error("the spec must be a JSON list");
    return spec;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 5) {
        std::cerr << usage;
        return 2;
    }
    std::string mode = argv[1], url = argv[2], address = argv[3];
    int count = std::atoi(argv[4]);
    json spec = json::array();
    double timeout = 10.0;
    bool browse = false;
    int credit = 100;
    proton::connection_options connection;
    try {
        for (int i = 5; i < argc; ++i) {
            std::string opt = argv[i];
            bool has_arg = i + 1 < argc;
            if (opt == "--spec" && has_arg) spec = read_spec(argv[++i]);
            else if (opt == "--timeout" && has_arg) timeout = std::atof(argv[++i]);
            else if (opt == "--credit" && has_arg) credit = std::atoi(argv[++i]);
            else if (opt == "--browse") browse = true;
            else if (opt == "--user" && has_arg) {
                const char* password = std::getenv("INTEROP_PASSWORD");
                if (!password) throw std::runtime_error("--user needs INTEROP_PASSWORD set");
                connection.user(argv[++i]).password(password);
            }
            else if (opt == "--sasl-mechs" && has_arg) connection.sasl_allowed_mechs(argv[++i]);
            else if (opt == "--sasl-allow-insecure") connection.sasl_allow_insecure_mechs(true);
            else throw std::runtime_error("unknown option " + opt);
        }
        if (mode == "send") {
            sender_handler handler(url, address, count, spec, connection);
            proton::container(handler).run();
            return handler.status();
        }
        if (mode == "receive") {
            receiver_handler handler(url, address, count, browse, credit, connection);
            proton::container container(handler);
            bool timed_out = run_with_timeout(container, timeout);
            if (timed_out) {
                std::cerr << "receive: timed out after " << handler.received() << " of "
                          << count << " messages" << std::endl;
            }
            return timed_out ? 1 : handler.status();
        }
        std::cerr << usage;
        return 2;
    } catch (const std::exception& e) {
        std::cerr << mode << ": " << e.what() << std::endl;
        return 1;
    }
}
