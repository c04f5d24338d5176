// Format: magic "HVD2", u8 kind (1 requests, 2 responses), u8 shutdown, u32 count, then records.
// Lengths, counts and sizes (dimensions, row counts) are unsigned LEB128 varints, int32 fields
// zig-zag varints, enums one byte, scale factors 8-byte doubles. Requests are compact, because
// the coordinator receives one list per rank every slow-path cycle (Note [The coordinator's work
// is linear in ranks x tensors]) and at thousands of ranks those bytes come from memory, not
// cache: the rank only when it differs from the previous request's (a bit of the type byte says
// so); each name as the length of the prefix it shares with the previous request's name and
// the rest (gradients are named in order: "layer3.bias", "layer4.weight"); and a flags byte
// saying which of the other fields differ from their defaults, since a field at its default is
// not sent. A gradient's request takes about 20 bytes. The decoder checks each length against
// the bytes left and each enum against its range before using it.
#include "core/codec.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/collective_traits.h"

namespace hvd::detail {
namespace {

constexpr std::uint8_t kMagic[4] = {'H', 'V', 'D', '2'};
constexpr std::uint8_t kRequestKind = 1;
constexpr std::uint8_t kResponseKind = 2;
constexpr DataType kLastDataType = DataType::Int16;  // the highest dtype code on the wire

// A request's flags byte: which of its optional fields follow, in this order.
enum RequestField : std::uint8_t {
  kDevice = 1 << 0,         // device != kCpuDevice
  kPrescale = 1 << 1,       // prescale_factor != 1
  kPostscale = 1 << 2,      // postscale_factor != 1
  kRoot = 1 << 3,           // root != 0
  kGroup = 1 << 4,          // group non-empty or group_size != 0 (both follow)
  kWaited = 1 << 5,         // waited_seconds != 0
  kProcessSet = 1 << 6,     // process_set_id != 0
  kRequestError = 1 << 7,   // error non-empty
};

// The type byte of a request: the type in the low bits, and this bit when its rank is the
// previous request's (never on a list's first request).
constexpr std::uint8_t kSameRank = 0x80;

std::size_t shared_prefix(const std::string& a, const std::string& b) {
  const std::size_t n = std::min(a.size(), b.size());
  std::size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

std::uint32_t zigzag(std::int32_t v) {
  return (static_cast<std::uint32_t>(v) << 1) ^ static_cast<std::uint32_t>(v >> 31);
}
std::int32_t unzigzag(std::uint32_t u) {
  return static_cast<std::int32_t>((u >> 1) ^ (0u - (u & 1u)));
}

class Writer {
 public:
  template <class T>
  void pod(T value) {
    auto at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    std::memcpy(bytes_.data() + at, &value, sizeof(T));
  }
  void varint(std::uint64_t v) {
    while (v >= 0x80) {
      bytes_.push_back(static_cast<std::uint8_t>(v | 0x80));
      v >>= 7;
    }
    bytes_.push_back(static_cast<std::uint8_t>(v));
  }
  void int32(std::int32_t v) { varint(zigzag(v)); }
  // `s` from byte `from` on (a request's name after the prefix it shares).
  void str(const std::string& s, std::size_t from = 0) {
    varint(s.size() - from);
    bytes_.insert(bytes_.end(), s.begin() + static_cast<std::ptrdiff_t>(from), s.end());
  }
  // Dimensions and row counts go as their 64-bit two's complement, so a negative one (refused
  // by the decoder) survives the trip to be named there.
  void sizes(const std::vector<std::int64_t>& v) {
    varint(v.size());
    for (auto x : v) varint(static_cast<std::uint64_t>(x));
  }
  void header(std::uint8_t kind, bool shutdown, std::size_t count) {
    bytes_.insert(bytes_.end(), kMagic, kMagic + 4);
    pod<std::uint8_t>(kind);
    pod<std::uint8_t>(shutdown ? 1 : 0);
    pod<std::uint32_t>(static_cast<std::uint32_t>(count));
  }
  std::vector<std::uint8_t> take() { return std::move(bytes_); }

 private:
  std::vector<std::uint8_t> bytes_;
};

class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size, std::size_t pos = 0) : data_(data), size_(size), pos_(pos) {}
  std::size_t position() const { return pos_; }
  template <class T>
  T pod(const char* what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  template <class E>
  E enumeration(E last, const char* what) {
    auto v = pod<std::uint8_t>(what);
    if (v > static_cast<std::uint8_t>(last))
      throw CodecError(std::string("corrupt message: bad ") + what + " value " + std::to_string(v));
    return static_cast<E>(v);
  }
  std::uint64_t varint(const char* what) {
    if (pos_ < size_ && data_[pos_] < 0x80) return data_[pos_++];  // the usual one-byte value
    std::uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      need(1, what);
      const std::uint8_t b = data_[pos_++];
      if (shift == 63 && b > 1)
        throw CodecError(std::string("corrupt message: ") + what + " does not fit in 64 bits");
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
  }
  std::int32_t int32(const char* what) {
    const std::uint64_t u = varint(what);
    if (u > 0xffffffffu)
      throw CodecError(std::string("corrupt message: ") + what + " " + std::to_string(u) + " does not fit in 32 bits");
    return unzigzag(static_cast<std::uint32_t>(u));
  }
  // A count, refused before anything is allocated when its items cannot fit in the bytes left.
  std::size_t count(std::size_t min_item_bytes, const char* what) {
    const std::uint64_t n = varint(what);
    if (n > (size_ - pos_) / min_item_bytes)
      throw CodecError(std::string("truncated message: ") + what + " count " + std::to_string(n) +
                       " exceeds the remaining " + std::to_string(size_ - pos_) + " bytes");
    return static_cast<std::size_t>(n);
  }
  std::string str(const char* what) {
    std::string s;
    append_str(&s, what);
    return s;
  }
  void str_into(std::string* s, const char* what) {
    s->clear();
    append_str(s, what);
  }
  void append_str(std::string* s, const char* what) {
    const auto n = count(1, what);
    s->append(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
  }
  // Sizes: no dimension or row count may be negative (they index and size buffers).
  std::vector<std::int64_t> sizes(const char* what) {
    std::vector<std::int64_t> v;
    sizes_into(&v, what);
    return v;
  }
  void sizes_into(std::vector<std::int64_t>* v, const char* what) {
    v->resize(count(1, what));
    for (auto& x : *v) {
      x = static_cast<std::int64_t>(varint(what));
      if (x < 0) throw CodecError(std::string("corrupt message: negative value ") + std::to_string(x) + " in " + what);
    }
  }
  // A tensor shape: sizes whose element count times the widest dtype (8 bytes) fits in int64,
  // so num_elements() and byte counts computed from it cannot overflow.
  std::vector<std::int64_t> shape(const char* what) {
    std::vector<std::int64_t> v;
    shape_into(&v, what);
    return v;
  }
  void shape_into(std::vector<std::int64_t>* v, const char* what) {
    sizes_into(v, what);
    check_elements(*v, what);
  }
  static void check_elements(const std::vector<std::int64_t>& shape, const char* what) {
    std::int64_t bytes = 8;
    for (auto d : shape)
      if (__builtin_mul_overflow(bytes, d, &bytes))
        throw CodecError(std::string("corrupt message: ") + what + " " + shape_string(shape) +
                         " has more elements than fit in 64 bits");
  }
  std::pair<bool, std::uint32_t> header(std::uint8_t kind) {
    need(4, "magic");
    if (std::memcmp(data_, kMagic, 4) != 0) throw CodecError("corrupt message: bad magic bytes");
    pos_ = 4;
    auto k = pod<std::uint8_t>("kind");
    if (k != kind)
      throw CodecError("corrupt message: kind " + std::to_string(k) + ", expected " + std::to_string(kind));
    bool shutdown = pod<std::uint8_t>("shutdown flag") != 0;
    return {shutdown, pod<std::uint32_t>("record count")};
  }
  void finish() const {
    if (pos_ != size_)
      throw CodecError("corrupt message: " + std::to_string(size_ - pos_) + " trailing bytes");
  }

 private:
  void need(std::size_t n, const char* what) const {
    if (size_ - pos_ < n)
      throw CodecError(std::string("truncated message: need ") + std::to_string(n) +
                       " bytes for " + what + ", have " + std::to_string(size_ - pos_));
  }
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

}  // namespace

std::vector<std::uint8_t> encode(const RequestList& list) {
  Writer w;
  w.header(kRequestKind, list.shutdown, list.requests.size());
  const Request* previous = nullptr;
  for (const auto& r : list.requests) {
    std::uint8_t flags = 0;
    if (r.device != kCpuDevice) flags |= kDevice;
    if (r.prescale_factor != 1.0) flags |= kPrescale;  // NaN too: it is sent as it is
    if (r.postscale_factor != 1.0) flags |= kPostscale;
    if (r.root != 0) flags |= kRoot;
    if (!r.group.empty() || r.group_size != 0) flags |= kGroup;
    if (r.waited_seconds != 0) flags |= kWaited;
    if (r.process_set_id != 0) flags |= kProcessSet;
    if (!r.error.empty()) flags |= kRequestError;
    const bool same_rank = previous != nullptr && previous->rank == r.rank;
    w.pod<std::uint8_t>(static_cast<std::uint8_t>(static_cast<std::uint8_t>(r.type) | (same_rank ? kSameRank : 0)));
    w.pod<std::uint8_t>(flags);
    if (!same_rank) w.int32(r.rank);
    const std::size_t shared = previous == nullptr ? 0 : shared_prefix(previous->name, r.name);
    w.varint(shared);
    w.str(r.name, shared);
    w.pod<std::uint8_t>(static_cast<std::uint8_t>(r.dtype));
    w.sizes(r.shape);
    w.pod<std::uint8_t>(static_cast<std::uint8_t>(r.reduce_op));
    if (flags & kDevice) w.int32(r.device);
    if (flags & kPrescale) w.pod<double>(r.prescale_factor);
    if (flags & kPostscale) w.pod<double>(r.postscale_factor);
    if (flags & kRoot) w.int32(r.root);
    if (flags & kGroup) {
      w.str(r.group);
      w.int32(r.group_size);
    }
    if (flags & kWaited) w.pod<double>(r.waited_seconds);
    if (flags & kProcessSet) w.int32(r.process_set_id);
    if (flags & kRequestError) w.str(r.error);
    previous = &r;
  }
  return w.take();
}

std::vector<std::uint8_t> encode(const ResponseList& list) {
  Writer w;
  w.header(kResponseKind, list.shutdown, list.responses.size());
  for (const auto& r : list.responses) {
    w.pod<std::uint8_t>(static_cast<std::uint8_t>(r.type));
    w.varint(r.names.size());
    for (const auto& n : r.names) w.str(n);
    w.varint(r.shapes.size());
    for (const auto& s : r.shapes) w.sizes(s);
    w.sizes(r.first_dims);
    w.pod<std::uint8_t>(static_cast<std::uint8_t>(r.dtype));
    w.int32(r.device);
    w.pod<std::uint8_t>(static_cast<std::uint8_t>(r.reduce_op));
    w.pod<double>(r.prescale_factor);
    w.pod<double>(r.postscale_factor);
    w.int32(r.root);
    w.str(r.error);
    w.int32(r.last_joined_rank);
  }
  w.str(list.shutdown_reason);
  return w.take();
}

RequestListReader::RequestListReader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {
  Reader rd(data, size);
  auto [shutdown, n] = rd.header(kRequestKind);
  shutdown_ = shutdown;
  left_ = n;
  pos_ = rd.position();
}

bool RequestListReader::next(Request* r) {
  Reader rd(data_, size_, pos_);
  if (left_ == 0) {
    rd.finish();
    return false;
  }
  const auto head = rd.pod<std::uint8_t>("request type");
  const auto type = static_cast<std::uint8_t>(head & ~kSameRank);
  if (type > static_cast<std::uint8_t>(last_request_type()))
    throw CodecError("corrupt message: bad request type value " + std::to_string(head));
  r->type = static_cast<RequestType>(type);
  const auto flags = rd.pod<std::uint8_t>("request flags");
  if (!(head & kSameRank)) {
    rank_ = rd.int32("rank");
  } else if (!any_read_) {
    throw CodecError("corrupt message: the first request of a list says its rank is the previous request's");
  }
  r->rank = rank_;
  // The name: a prefix of the previous request's name, then the rest.
  const std::uint64_t shared = rd.varint("name prefix");
  if (shared > name_.size())
    throw CodecError("corrupt message: a name shares " + std::to_string(shared) +
                     " bytes with the previous request's name of " + std::to_string(name_.size()));
  name_.resize(static_cast<std::size_t>(shared));
  rd.append_str(&name_, "name");
  r->name = name_;
  any_read_ = true;
  r->dtype = rd.enumeration(kLastDataType, "dtype");
  rd.shape_into(&r->shape, "shape");
  r->reduce_op = rd.enumeration(ReduceOp::Adasum, "reduce op");
  r->device = flags & kDevice ? rd.int32("device") : kCpuDevice;
  r->prescale_factor = flags & kPrescale ? rd.pod<double>("prescale factor") : 1.0;
  r->postscale_factor = flags & kPostscale ? rd.pod<double>("postscale factor") : 1.0;
  r->root = flags & kRoot ? rd.int32("root") : 0;
  if (flags & kGroup) {
    rd.str_into(&r->group, "group");
    r->group_size = rd.int32("group size");
  } else {
    r->group.clear();
    r->group_size = 0;
  }
  r->waited_seconds = flags & kWaited ? rd.pod<double>("waited seconds") : 0.0;
  if (!(r->waited_seconds >= 0 && r->waited_seconds < 1e9))  // also refuses NaN
    throw CodecError("corrupt message: waited seconds " + std::to_string(r->waited_seconds));
  r->process_set_id = flags & kProcessSet ? rd.int32("process set id") : 0;
  if (flags & kRequestError)
    rd.str_into(&r->error, "error");
  else
    r->error.clear();
  r->submitted = {};
  pos_ = rd.position();
  --left_;
  return true;
}

RequestList decode_request_list(const std::uint8_t* data, std::size_t size) {
  RequestListReader reader(data, size);
  RequestList list;
  list.shutdown = reader.shutdown();
  Request r;
  while (reader.next(&r)) list.requests.push_back(std::move(r));
  return list;
}

ResponseList decode_response_list(const std::uint8_t* data, std::size_t size) {
  Reader rd(data, size);
  ResponseList list;
  auto [shutdown, n] = rd.header(kResponseKind);
  list.shutdown = shutdown;
  for (std::uint32_t i = 0; i < n; ++i) {
    Response r;
    r.type = rd.enumeration(ResponseType::Error, "response type");
    const auto names = rd.count(1, "names");
    for (std::size_t k = 0; k < names; ++k) r.names.push_back(rd.str("name"));
    const auto shapes = rd.count(1, "shapes");
    std::int64_t total = 0;  // fusion and the ops add the tensors' bytes up
    for (std::size_t k = 0; k < shapes; ++k) {
      r.shapes.push_back(rd.shape("shape"));
      if (__builtin_add_overflow(total, 8 * num_elements(r.shapes.back()), &total))
        throw CodecError("corrupt message: the response's tensors hold more bytes than fit in 64 bits");
    }
    r.first_dims = rd.sizes("first dims");
    std::int64_t rows = 0;
    for (auto d : r.first_dims)
      if (__builtin_add_overflow(rows, d, &rows))
        throw CodecError("corrupt message: the first dimensions add up to more than fits in 64 bits");
    r.dtype = rd.enumeration(kLastDataType, "dtype");
    r.device = rd.int32("device");
    r.reduce_op = rd.enumeration(ReduceOp::Adasum, "reduce op");
    r.prescale_factor = rd.pod<double>("prescale factor");
    r.postscale_factor = rd.pod<double>("postscale factor");
    r.root = rd.int32("root");
    r.error = rd.str("error");
    r.last_joined_rank = rd.int32("last joined rank");
    list.responses.push_back(std::move(r));
  }
  list.shutdown_reason = rd.str("shutdown reason");
  rd.finish();
  return list;
}

}  // namespace hvd::detail
