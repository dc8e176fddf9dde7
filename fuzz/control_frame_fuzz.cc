// Fuzzes the control plane's wire format as a server and a client read it (the decode
// functions of runtime/control/messages.h): the 8-byte frame header, then the payload as a
// request and as a response (Cap'n Proto flat arrays; KJ exceptions must become Status).
// What decodes must encode again into a frame whose header parses to its payload size and
// which decodes to the same request.
#include <array>
#include <cstring>
#include <string>

#include "fuzz/fuzz_util.h"
#include "runtime/control/messages.h"

namespace {

using tandem::ControlRequest;

void CheckRequestRoundTrip(const ControlRequest& a) {
  const std::string frame = tandem::EncodeRequest(a);
  TANDEM_FUZZ_ASSERT(frame.size() >= tandem::kFrameHeaderBytes);
  std::array<uint8_t, tandem::kFrameHeaderBytes> h;
  std::memcpy(h.data(), frame.data(), h.size());
  auto n = tandem::ParseFrameHeader(h);
  TANDEM_FUZZ_ASSERT(n.ok() && *n == frame.size() - h.size());
  auto b = tandem::DecodeRequest(frame.substr(h.size()));
  TANDEM_FUZZ_ASSERT(b.ok());
  TANDEM_FUZZ_ASSERT(b->kind == a.kind && b->token == a.token && b->job == a.job &&
                     b->path == a.path && b->text == a.text && b->actor == a.actor &&
                     b->after == a.after && b->max_lines == a.max_lines);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= tandem::kFrameHeaderBytes) {
    std::array<uint8_t, tandem::kFrameHeaderBytes> h;
    std::memcpy(h.data(), data, h.size());
    auto n = tandem::ParseFrameHeader(h);
    if (n.ok()) TANDEM_FUZZ_ASSERT(*n <= tandem::kMaxFrameBytes);
  }
  const std::string payload(reinterpret_cast<const char*>(data), size);
  auto req = tandem::DecodeRequest(payload);
  if (req.ok()) CheckRequestRoundTrip(*req);
  auto resp = tandem::DecodeResponse(payload);
  if (resp.ok()) {
    // A hostile payload can decode into more than fits a frame (fuzz/findings/README.md);
    // what fits must decode again.
    const std::string frame = tandem::EncodeResponse(*resp);
    if (frame.size() - tandem::kFrameHeaderBytes <= tandem::kMaxFrameBytes / 2) {
      TANDEM_FUZZ_ASSERT(tandem::DecodeResponse(frame.substr(tandem::kFrameHeaderBytes)).ok());
    }
  }
  return 0;
}
