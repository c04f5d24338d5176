// Format: magic "HVD1", u8 kind (1 requests, 2 responses), u8 shutdown, u32 count, then records.
// Every variable-length field is a u32 length or count followed by its items; the decoder checks
// each length against the bytes left and each enum against its range before using it.
#include "core/codec.h"

#include <cstring>
#include <string>

#include "core/collective_traits.h"

namespace hvd::detail {
namespace {

constexpr std::uint8_t kMagic[4] = {'H', 'V', 'D', '1'};
constexpr std::uint8_t kRequestKind = 1;
constexpr std::uint8_t kResponseKind = 2;
constexpr DataType kLastDataType = DataType::Int16;  // the highest dtype code on the wire

class Writer {
 public:
  template <class T>
  void pod(T value) {
    auto at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    std::memcpy(bytes_.data() + at, &value, sizeof(T));
  }
  void str(const std::string& s) {
    pod<std::uint32_t>(static_cast<std::uint32_t>(s.size()));
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  void ints(const std::vector<std::int64_t>& v) {
    pod<std::uint32_t>(static_cast<std::uint32_t>(v.size()));
    for (auto x : v) pod<std::int64_t>(x);
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
  std::uint32_t count(std::size_t min_item_bytes, const char* what) {
    auto n = pod<std::uint32_t>(what);
    // Reject counts that cannot fit in the bytes left, before allocating anything.
    if (min_item_bytes > 0 && n > (size_ - pos_) / min_item_bytes)
      throw CodecError(std::string("truncated message: ") + what + " count " + std::to_string(n) +
                       " exceeds the remaining " + std::to_string(size_ - pos_) + " bytes");
    return n;
  }
  std::string str(const char* what) {
    std::string s;
    str_into(&s, what);
    return s;
  }
  void str_into(std::string* s, const char* what) {
    auto n = count(1, what);
    s->assign(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
  }
  std::vector<std::int64_t> ints(const char* what) {
    std::vector<std::int64_t> v;
    ints_into(&v, what);
    return v;
  }
  void ints_into(std::vector<std::int64_t>* v, const char* what) {
    auto n = count(sizeof(std::int64_t), what);
    v->resize(n);
    for (auto& x : *v) x = pod<std::int64_t>(what);
  }
  // Sizes: no dimension or row count may be negative (they index and size buffers).
  std::vector<std::int64_t> sizes(const char* what) {
    std::vector<std::int64_t> v;
    sizes_into(&v, what);
    return v;
  }
  void sizes_into(std::vector<std::int64_t>* v, const char* what) {
    ints_into(v, what);
    for (auto x : *v)
      if (x < 0) throw CodecError(std::string("corrupt message: negative value ") + std::to_string(x) + " in " + what);
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
    std::int64_t bytes = 8;
    for (auto d : *v)
      if (__builtin_mul_overflow(bytes, d, &bytes))
        throw CodecError(std::string("corrupt message: ") + what + " " + shape_string(*v) +
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
  for (const auto& r : list.requests) {
    w.pod<std::int32_t>(r.rank);
    w.pod<std::uint8_t>(static_cast<std::uint8_t>(r.type));
    w.str(r.name);
    w.pod<std::uint8_t>(static_cast<std::uint8_t>(r.dtype));
    w.ints(r.shape);
    w.pod<std::int32_t>(r.device);
    w.pod<std::uint8_t>(static_cast<std::uint8_t>(r.reduce_op));
    w.pod<double>(r.prescale_factor);
    w.pod<double>(r.postscale_factor);
    w.pod<std::int32_t>(r.root);
    w.str(r.group);
    w.pod<std::int32_t>(r.group_size);
    w.pod<double>(r.waited_seconds);
    w.pod<std::int32_t>(r.process_set_id);
    w.str(r.error);
  }
  return w.take();
}

std::vector<std::uint8_t> encode(const ResponseList& list) {
  Writer w;
  w.header(kResponseKind, list.shutdown, list.responses.size());
  for (const auto& r : list.responses) {
    w.pod<std::uint8_t>(static_cast<std::uint8_t>(r.type));
    w.pod<std::uint32_t>(static_cast<std::uint32_t>(r.names.size()));
    for (const auto& n : r.names) w.str(n);
    w.pod<std::uint32_t>(static_cast<std::uint32_t>(r.shapes.size()));
    for (const auto& s : r.shapes) w.ints(s);
    w.ints(r.first_dims);
    w.pod<std::uint8_t>(static_cast<std::uint8_t>(r.dtype));
    w.pod<std::int32_t>(r.device);
    w.pod<std::uint8_t>(static_cast<std::uint8_t>(r.reduce_op));
    w.pod<double>(r.prescale_factor);
    w.pod<double>(r.postscale_factor);
    w.pod<std::int32_t>(r.root);
    w.str(r.error);
    w.pod<std::int32_t>(r.last_joined_rank);
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
  r->rank = rd.pod<std::int32_t>("rank");
  r->type = rd.enumeration(last_request_type(), "request type");
  rd.str_into(&r->name, "name");
  r->dtype = rd.enumeration(kLastDataType, "dtype");
  rd.shape_into(&r->shape, "shape");
  r->device = rd.pod<std::int32_t>("device");
  r->reduce_op = rd.enumeration(ReduceOp::Product, "reduce op");
  r->prescale_factor = rd.pod<double>("prescale factor");
  r->postscale_factor = rd.pod<double>("postscale factor");
  r->root = rd.pod<std::int32_t>("root");
  rd.str_into(&r->group, "group");
  r->group_size = rd.pod<std::int32_t>("group size");
  r->waited_seconds = rd.pod<double>("waited seconds");
  if (!(r->waited_seconds >= 0 && r->waited_seconds < 1e9))  // also refuses NaN
    throw CodecError("corrupt message: waited seconds " + std::to_string(r->waited_seconds));
  r->process_set_id = rd.pod<std::int32_t>("process set id");
  rd.str_into(&r->error, "error");
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
    auto names = rd.count(4, "names");
    for (std::uint32_t k = 0; k < names; ++k) r.names.push_back(rd.str("name"));
    auto shapes = rd.count(4, "shapes");
    std::int64_t total = 0;  // fusion and the ops add the tensors' bytes up
    for (std::uint32_t k = 0; k < shapes; ++k) {
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
    r.device = rd.pod<std::int32_t>("device");
    r.reduce_op = rd.enumeration(ReduceOp::Product, "reduce op");
    r.prescale_factor = rd.pod<double>("prescale factor");
    r.postscale_factor = rd.pod<double>("postscale factor");
    r.root = rd.pod<std::int32_t>("root");
    r.error = rd.str("error");
    r.last_joined_rank = rd.pod<std::int32_t>("last joined rank");
    list.responses.push_back(std::move(r));
  }
  list.shutdown_reason = rd.str("shutdown reason");
  rd.finish();
  return list;
}

}  // namespace hvd::detail
