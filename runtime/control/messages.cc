#include "runtime/control/messages.h"

#include <cstring>
#include <exception>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include "runtime/control/control.capnp.h"
#include "runtime/control/messages_cluster.h"

namespace tandem {
namespace {

using control_wire::GetCluster;
using control_wire::GetClusterReply;
using control_wire::PutCluster;
using control_wire::PutClusterReply;

constexpr char kMagic[4] = {'T', 'N', 'D', 'M'};

std::string Frame(capnp::MessageBuilder& msg) {
  kj::Array<capnp::word> words = capnp::messageToFlatArray(msg);
  kj::ArrayPtr<const kj::byte> bytes = words.asBytes();
  std::string out(kFrameHeaderBytes + bytes.size(), '\0');
  std::memcpy(out.data(), kMagic, 4);
  const uint32_t n = static_cast<uint32_t>(bytes.size());
  for (int i = 0; i < 4; ++i) out[4 + i] = static_cast<char>((n >> (8 * i)) & 0xff);
  std::memcpy(out.data() + kFrameHeaderBytes, bytes.begin(), bytes.size());
  return out;
}

// Runs `fn` over the message in `payload`, turning KJ exceptions into DataLoss.
template <typename Root, typename Fn>
auto WithReader(const std::string& payload, Fn fn) -> decltype(fn(std::declval<typename Root::Reader>())) {
  if (payload.size() % sizeof(capnp::word) != 0 || payload.empty())
    return DataLossError("malformed message: {} bytes is not a whole number of 8-byte words",
                         payload.size());
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(payload.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), payload.data(), payload.size());
  try {
    // Decoding reads each object once, so an honest message traverses about its own size.
    // A bound proportional to the payload (not to the largest frame) stops a small message
    // whose lists claim millions of zero-size elements (fuzz: a 192-byte response decoded
    // into ~2 million list entries).
    capnp::ReaderOptions options;
    options.traversalLimitInWords = 8 * words.size() + 1024;
    capnp::FlatArrayMessageReader reader(words.asPtr(), options);
    return fn(reader.getRoot<Root>());
  } catch (const kj::Exception& e) {
    return DataLossError("malformed message: {}", e.getDescription().cStr());
  } catch (const std::exception& e) {
    return DataLossError("malformed message: {}", e.what());
  }
}

// The actors, channels and store of a job's or a node's status (JobStatus and NodeStatus
// builders have the same three fields).
template <typename Builder>
void PutParts(const std::vector<ActorStatus>& actor_list,
              const std::vector<ChannelStatus>& channel_list, const StoreStatus& store,
              Builder b) {
  auto actors = b.initActors(static_cast<unsigned>(actor_list.size()));
  for (size_t i = 0; i < actor_list.size(); ++i) {
    const ActorStatus& a = actor_list[i];
    auto o = actors[i];
    o.setName(a.name);
    o.setClassName(a.class_name);
    o.setGroup(a.group);
    o.setReplica(a.replica);
    o.setGpu(a.gpu);
    o.setState(a.state);
    o.setRestarts(a.restarts);
    o.setMaxRestarts(a.max_restarts);
    o.setMailboxDepth(a.mailbox_depth);
    o.setMessagesDone(a.messages_done);
    o.setStage(a.stage);
    o.setLastError(a.last_error);
  }
  auto chans = b.initChannels(static_cast<unsigned>(channel_list.size()));
  for (size_t i = 0; i < channel_list.size(); ++i) {
    const ChannelStatus& c = channel_list[i];
    auto o = chans[i];
    o.setName(c.name);
    o.setDepth(c.depth);
    o.setCapacity(c.capacity);
    o.setMinReady(c.min_ready);
    o.setMaxDepth(c.max_depth);
    o.setPushed(c.pushed);
    o.setPopped(c.popped);
    o.setClosed(c.closed);
    o.setPushWaitSeconds(c.push_wait_s);
    o.setPopWaitSeconds(c.pop_wait_s);
    o.setWriters(c.writers);
    o.setReaders(c.readers);
  }
  auto s = b.initStore();
  s.setCapacity(store.capacity);
  s.setUsed(store.used);
  s.setHighWater(store.high_water);
  s.setObjects(store.objects);
  s.setInflightCopies(store.inflight_copies);
  s.setLocalRefs(store.local_refs);
  s.setChannelRefs(store.channel_refs);
  s.setHolders(store.holders);
}

template <typename Reader>
void GetParts(Reader r, std::vector<ActorStatus>* actors, std::vector<ChannelStatus>* channels,
              StoreStatus* store) {
  for (auto a : r.getActors()) {
    actors->push_back({a.getName(), a.getClassName(), a.getGroup(), a.getReplica(), a.getGpu(),
                       a.getState(), a.getRestarts(), a.getMaxRestarts(), a.getMailboxDepth(),
                       a.getMessagesDone(), a.getStage(), a.getLastError()});
  }
  for (auto c : r.getChannels()) {
    channels->push_back({c.getName(), c.getDepth(), c.getCapacity(), c.getMinReady(),
                         c.getMaxDepth(), c.getPushed(), c.getPopped(), c.getClosed(),
                         c.getPushWaitSeconds(), c.getPopWaitSeconds(), c.getWriters(),
                         c.getReaders()});
  }
  auto s = r.getStore();
  *store = {s.getCapacity(),       s.getUsed(),      s.getHighWater(),   s.getObjects(),
            s.getInflightCopies(), s.getLocalRefs(), s.getChannelRefs(), s.getHolders()};
}

void PutJob(const JobStatus& j, wire::JobStatus::Builder b) {
  b.setId(j.id);
  b.setName(j.name);
  b.setState(j.state);
  b.setError(j.error);
  b.setSeconds(j.seconds);
  b.setItemsDone(j.items_done);
  b.setItemsTotal(j.items_total);
  b.setItemsPerSecond(j.items_per_s);
  b.setVerdict(j.verdict);
  b.setProfileTable(j.profile_table);
  PutParts(j.actors, j.channels, j.store, b);
  b.setNode(j.node);
  auto nodes = b.initNodes(static_cast<unsigned>(j.nodes.size()));
  for (size_t i = 0; i < j.nodes.size(); ++i) {
    const NodeStatus& n = j.nodes[i];
    auto o = nodes[i];
    o.setRank(n.rank);
    o.setHost(n.host);
    o.setState(n.state);
    o.setHeartbeatAgeSeconds(n.heartbeat_age_s);
    o.setStep(n.step);
    o.setReportAgeSeconds(n.report_age_s);
    PutParts(n.actors, n.channels, n.store, o);
  }
  auto stages = b.initStages(static_cast<unsigned>(j.stages.size()));
  for (size_t i = 0; i < j.stages.size(); ++i) {
    const StageStatus& st = j.stages[i];
    auto o = stages[i];
    o.setName(st.name);
    o.setCount(st.count);
    o.setTotalSeconds(st.total_s);
    o.setMeanMs(st.mean_ms);
    o.setP50Ms(st.p50_ms);
    o.setP99Ms(st.p99_ms);
    o.setPercentOfWall(st.percent_of_wall);
  }
  auto t = b.initTraining();
  t.setActive(j.training.active);
  t.setStep(j.training.step);
  t.setTotalSteps(j.training.total_steps);
  t.setStepsPerSecond(j.training.steps_per_s);
  t.setHasMetrics(j.training.has_metrics);
  t.setMetricsStep(j.training.metrics_step);
  t.setLoss(j.training.loss);
  t.setAcc(j.training.acc);
  t.setTau(j.training.tau);
  t.setTokensPerSecond(j.training.tok_s);
  auto sel = t.initSelector();
  sel.setActive(j.training.selector.active);
  sel.setLoss(j.training.selector.loss);
  sel.setRecall(j.training.selector.recall);
  sel.setAccuracy(j.training.selector.accuracy);
  const EvalStatus& e = j.training.eval;
  auto ev = t.initEval();
  ev.setActive(e.active);
  ev.setStep(e.step);
  ev.setTau(e.tau);
  ev.setTokensPerSecond(e.tok_s);
  ev.setPrompts(e.prompts);
  auto rates = ev.initAcceptRate(static_cast<unsigned>(e.accept_rate.size()));
  for (size_t i = 0; i < e.accept_rate.size(); ++i) rates.set(static_cast<unsigned>(i), e.accept_rate[i]);
  ev.setBestStep(e.best_step);
  ev.setBestTau(e.best_tau);
}

JobStatus GetJob(wire::JobStatus::Reader r) {
  JobStatus j;
  j.id = r.getId();
  j.name = r.getName();
  j.state = r.getState();
  j.error = r.getError();
  j.seconds = r.getSeconds();
  j.items_done = r.getItemsDone();
  j.items_total = r.getItemsTotal();
  j.items_per_s = r.getItemsPerSecond();
  j.verdict = r.getVerdict();
  j.profile_table = r.getProfileTable();
  GetParts(r, &j.actors, &j.channels, &j.store);
  j.node = r.getNode();
  for (auto n : r.getNodes()) {
    NodeStatus& o = j.nodes.emplace_back();
    o.rank = n.getRank();
    o.host = n.getHost();
    o.state = n.getState();
    o.heartbeat_age_s = n.getHeartbeatAgeSeconds();
    o.step = n.getStep();
    o.report_age_s = n.getReportAgeSeconds();
    GetParts(n, &o.actors, &o.channels, &o.store);
  }
  for (auto st : r.getStages()) {
    j.stages.push_back({st.getName(), st.getCount(), st.getTotalSeconds(), st.getMeanMs(),
                        st.getP50Ms(), st.getP99Ms(), st.getPercentOfWall()});
  }
  auto t = r.getTraining();
  j.training = {t.getActive(), t.getStep(),        t.getTotalSteps(), t.getStepsPerSecond(),
                t.getHasMetrics(), t.getMetricsStep(), t.getLoss(),   t.getAcc(),
                t.getTau(),    t.getTokensPerSecond(), EvalStatus{}};
  auto ev = t.getEval();
  EvalStatus& e = j.training.eval;
  e = {ev.getActive(), ev.getStep(), ev.getTau(), ev.getTokensPerSecond(), ev.getPrompts(), {},
       ev.getBestStep(), ev.getBestTau()};
  for (double r : ev.getAcceptRate()) e.accept_rate.push_back(r);
  auto sel = t.getSelector();
  j.training.selector = {sel.getActive(), sel.getLoss(), sel.getRecall(), sel.getAccuracy()};
  return j;
}

}  // namespace

std::string EncodeRequest(const ControlRequest& req) {
  capnp::MallocMessageBuilder msg;
  auto b = msg.initRoot<wire::Request>();
  b.setToken(req.token);
  switch (req.kind) {
    case ControlRequest::Kind::kPing: b.setPing(); break;
    case ControlRequest::Kind::kStatus: b.setStatus(req.job); break;
    case ControlRequest::Kind::kSubmit: {
      auto s = b.initSubmit();
      s.setPath(req.path);
      s.setText(req.text);
      break;
    }
    case ControlRequest::Kind::kStop: b.setStop(req.job); break;
    case ControlRequest::Kind::kShutdown: b.setShutdown(); break;
    case ControlRequest::Kind::kLogs: {
      auto l = b.initLogs();
      l.setJob(req.job);
      l.setActor(req.actor);
      l.setAfter(req.after);
      l.setMaxLines(req.max_lines);
      break;
    }
    case ControlRequest::Kind::kClusterJoin: PutCluster(req.cluster, b.initClusterJoin()); break;
    case ControlRequest::Kind::kClusterHeartbeat:
      PutCluster(req.cluster, b.initClusterHeartbeat());
      break;
    case ControlRequest::Kind::kClusterLeave: PutCluster(req.cluster, b.initClusterLeave()); break;
    case ControlRequest::Kind::kKvPut: PutCluster(req.cluster, b.initKvPut()); break;
    case ControlRequest::Kind::kKvGet: PutCluster(req.cluster, b.initKvGet()); break;
    case ControlRequest::Kind::kBarrier: PutCluster(req.cluster, b.initBarrier()); break;
  }
  return Frame(msg);
}

std::string EncodeResponse(const ControlResponse& resp) {
  capnp::MallocMessageBuilder msg;
  auto b = msg.initRoot<wire::Response>();
  switch (resp.kind) {
    case ControlResponse::Kind::kError: {
      auto e = b.initError();
      e.setCode(static_cast<uint16_t>(resp.error.code()));
      e.setMessage(resp.error.message());
      e.setUnauthenticated(resp.unauthenticated);
      break;
    }
    case ControlResponse::Kind::kOk: b.setOk(); break;
    case ControlResponse::Kind::kPong: {
      auto p = b.initPong();
      p.setServer(resp.server);
      p.setPid(resp.pid);
      p.setVersion("0.1.0");
      break;
    }
    case ControlResponse::Kind::kJobs: {
      auto jobs = b.initJobs(static_cast<unsigned>(resp.jobs.size()));
      for (size_t i = 0; i < resp.jobs.size(); ++i) PutJob(resp.jobs[i], jobs[i]);
      break;
    }
    case ControlResponse::Kind::kSubmitted: b.setSubmitted(resp.job_id); break;
    case ControlResponse::Kind::kLogs: {
      auto l = b.initLogs();
      auto lines = l.initLines(static_cast<unsigned>(resp.lines.size()));
      for (size_t i = 0; i < resp.lines.size(); ++i) {
        lines[i].setSeq(resp.lines[i].seq);
        lines[i].setActor(resp.lines[i].actor);
        lines[i].setText(resp.lines[i].text);
      }
      l.setLast(resp.last);
      l.setFinished(resp.finished);
      break;
    }
    case ControlResponse::Kind::kCluster: PutClusterReply(resp.cluster, b.initCluster()); break;
  }
  return Frame(msg);
}

Result<uint32_t> ParseFrameHeader(const std::array<uint8_t, kFrameHeaderBytes>& header) {
  if (std::memcmp(header.data(), kMagic, 4) != 0)
    return InvalidArgumentError("bad frame: expected the magic 'TNDM' (is this a tandem client?)");
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(header[4 + i]) << (8 * i);
  if (n > kMaxFrameBytes)
    return InvalidArgumentError("frame of {} bytes exceeds the limit of {} bytes", n,
                                kMaxFrameBytes);
  return n;
}

Result<ControlRequest> DecodeRequest(const std::string& payload) {
  return WithReader<wire::Request>(payload, [](wire::Request::Reader r) -> Result<ControlRequest> {
    ControlRequest req;
    req.token = r.getToken();
    switch (r.which()) {
      case wire::Request::PING: req.kind = ControlRequest::Kind::kPing; break;
      case wire::Request::STATUS:
        req.kind = ControlRequest::Kind::kStatus;
        req.job = r.getStatus();
        break;
      case wire::Request::SUBMIT:
        req.kind = ControlRequest::Kind::kSubmit;
        req.path = r.getSubmit().getPath();
        req.text = r.getSubmit().getText();
        break;
      case wire::Request::STOP:
        req.kind = ControlRequest::Kind::kStop;
        req.job = r.getStop();
        break;
      case wire::Request::SHUTDOWN: req.kind = ControlRequest::Kind::kShutdown; break;
      case wire::Request::LOGS:
        req.kind = ControlRequest::Kind::kLogs;
        req.job = r.getLogs().getJob();
        req.actor = r.getLogs().getActor();
        req.after = r.getLogs().getAfter();
        req.max_lines = r.getLogs().getMaxLines();
        break;
      case wire::Request::CLUSTER_JOIN:
        req.kind = ControlRequest::Kind::kClusterJoin;
        req.cluster = GetCluster(r.getClusterJoin());
        break;
      case wire::Request::CLUSTER_HEARTBEAT:
        req.kind = ControlRequest::Kind::kClusterHeartbeat;
        req.cluster = GetCluster(r.getClusterHeartbeat());
        break;
      case wire::Request::CLUSTER_LEAVE:
        req.kind = ControlRequest::Kind::kClusterLeave;
        req.cluster = GetCluster(r.getClusterLeave());
        break;
      case wire::Request::KV_PUT:
        req.kind = ControlRequest::Kind::kKvPut;
        req.cluster = GetCluster(r.getKvPut());
        break;
      case wire::Request::KV_GET:
        req.kind = ControlRequest::Kind::kKvGet;
        req.cluster = GetCluster(r.getKvGet());
        break;
      case wire::Request::BARRIER:
        req.kind = ControlRequest::Kind::kBarrier;
        req.cluster = GetCluster(r.getBarrier());
        break;
      default: return DataLossError("unknown request kind {}", static_cast<int>(r.which()));
    }
    return req;
  });
}

Result<ControlResponse> DecodeResponse(const std::string& payload) {
  return WithReader<wire::Response>(payload, [](wire::Response::Reader r) -> Result<ControlResponse> {
    ControlResponse resp;
    switch (r.which()) {
      case wire::Response::ERROR: {
        uint16_t code = r.getError().getCode();
        if (code == 0 || code > static_cast<uint16_t>(StatusCode::kCudaError))
          code = static_cast<uint16_t>(StatusCode::kInternal);
        ControlResponse err =
            ControlResponse::Error(Status(static_cast<StatusCode>(code), r.getError().getMessage()));
        err.unauthenticated = r.getError().getUnauthenticated();
        return err;
      }
      case wire::Response::OK: resp.kind = ControlResponse::Kind::kOk; break;
      case wire::Response::PONG:
        resp.kind = ControlResponse::Kind::kPong;
        resp.server = r.getPong().getServer();
        resp.pid = r.getPong().getPid();
        break;
      case wire::Response::JOBS:
        resp.kind = ControlResponse::Kind::kJobs;
        for (auto j : r.getJobs()) resp.jobs.push_back(GetJob(j));
        break;
      case wire::Response::SUBMITTED:
        resp.kind = ControlResponse::Kind::kSubmitted;
        resp.job_id = r.getSubmitted();
        break;
      case wire::Response::LOGS:
        resp.kind = ControlResponse::Kind::kLogs;
        for (auto l : r.getLogs().getLines()) resp.lines.push_back({l.getSeq(), l.getActor(), l.getText()});
        resp.last = r.getLogs().getLast();
        resp.finished = r.getLogs().getFinished();
        break;
      case wire::Response::CLUSTER:
        resp.kind = ControlResponse::Kind::kCluster;
        resp.cluster = GetClusterReply(r.getCluster());
        break;
      default: return DataLossError("unknown response kind {}", static_cast<int>(r.which()));
    }
    return resp;
  });
}

}  // namespace tandem
