// Tests of the negotiation link (see coordinator_link_test.cc), part two:
// Wake and Close of a blocked Receive, bursts from concurrent senders,
// callbacks that Send or Unbind, the link thread's timer, the handshake
// timeout, garbage and oversized frames on the wire, Stop with links open,
// and connects to a stopped server or a closed port. Every wait is bounded
// by a generous deadline (scaled by KOLO_TIMEOUT_SCALE); none is a speed
// threshold.
#include "tests/coordinator_link_test_fixture.h"

namespace kolo::coordinator::link_test {
namespace {

TEST_F(LinkTest, WakeEndsABlockedReceiveWithNothing) {
  StartServer();
  std::unique_ptr<NegotiationLink> link = ConnectOrDie(WorkerOptions());
  ASSERT_NE(link, nullptr);

  ReceiveResult woken = absl::UnknownError("not run");
  absl::Duration took;
  std::thread reader([&] {
    const absl::Time start = absl::Now();
    woken = link->Receive(absl::Seconds(30));
    took = absl::Now() - start;
  });
  // Whether the reader is already blocked or not yet: Wake ends the current
  // or the next Receive.
  link->Wake();
  reader.join();
  ASSERT_TRUE(woken.ok()) << woken.status();
  EXPECT_FALSE(woken->has_value());
  EXPECT_LT(took, Scaled(absl::Seconds(10)));

  // The wake-up was consumed: the next Receive waits for its timeout, and a
  // message still comes through afterwards.
  const absl::Time start = absl::Now();
  ReceiveResult r = link->Receive(absl::Milliseconds(200));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->has_value());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
  EXPECT_TRUE(server_->Send(kSession, PlanOf(5)));
  r = link->Receive(Scaled(absl::Seconds(20)));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->plan().seq(), 5u);
}

TEST_F(LinkTest, CloseEndsABlockedReceiveAndLaterCallsFail) {
  StartServer();
  std::unique_ptr<NegotiationLink> link = ConnectOrDie(WorkerOptions());
  ASSERT_NE(link, nullptr);

  // The reader's loop, as the runtime's: a Receive that returns nothing is
  // retried; it must end in an error within two calls.
  absl::Status ended;
  int calls = 0;
  absl::Duration took;
  std::thread reader([&] {
    const absl::Time start = absl::Now();
    for (calls = 1; calls <= 3; ++calls) {
      ReceiveResult r = link->Receive(absl::Seconds(30));
      if (!r.ok()) {
        ended = r.status();
        break;
      }
      if (r->has_value()) {
        ended = absl::InternalError("unexpected message");
        break;
      }
    }
    took = absl::Now() - start;
  });
  link->Close();
  reader.join();
  EXPECT_EQ(ended.code(), absl::StatusCode::kUnavailable) << ended;
  EXPECT_LE(calls, 2);
  EXPECT_LT(took, Scaled(absl::Seconds(10)));

  ReceiveResult r = link->Receive(absl::Milliseconds(10));
  EXPECT_FALSE(r.ok());
  absl::Status sent = link->Send(AnnounceOf("late"));
  EXPECT_EQ(sent.code(), absl::StatusCode::kUnavailable) << sent;
  EXPECT_THAT(sent.message(), HasSubstr("closed"));
  link->Close();  // idempotent

  // The coordinator sees the hang-up and unbinds the Session.
  const absl::Time deadline = absl::Now() + Scaled(absl::Seconds(20));
  while (server_->Send(kSession, PlanOf(1)) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));  // polling a condition
  }
  EXPECT_FALSE(server_->Send(kSession, PlanOf(2)));
  EXPECT_THAT(Messages(), IsEmpty());
}

TEST_F(LinkTest, BurstsBothWaysFromConcurrentSenders) {
  StartServer();
  std::unique_ptr<NegotiationLink> link = ConnectOrDie(WorkerOptions());
  ASSERT_NE(link, nullptr);
  constexpr int kThreads = 2;
  constexpr int kPerThread = 500;
  constexpr int kTotal = kThreads * kPerThread;
  // Sizes from 0 to ~60 KB, so that frames span many socket writes.
  auto size_of = [](int i) { return static_cast<size_t>((i % 13) * 4700); };

  std::atomic<int> send_failures{0};
  std::vector<std::thread> threads;
  // However the reader's checks end (an ASSERT returns early), the senders
  // are joined; closing the link ends a worker send waiting for room.
  struct JoinAll {
    std::vector<std::thread>& threads;
    NegotiationLink& link;
    ~JoinAll() {
      bool running = false;
      for (std::thread& th : threads) running |= th.joinable();
      if (running) link.Close();
      for (std::thread& th : threads) {
        if (th.joinable()) th.join();
      }
    }
  } join_all{threads, *link};
  for (int t = 0; t < kThreads; ++t) {
    // Up: announces from the worker.
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int key = t * kPerThread + i;
        if (!link->Send(AnnounceOf(absl::StrCat("t", t, "/", i),
                                   PayloadFor(key, size_of(i))))
                 .ok()) {
          ++send_failures;
        }
      }
    });
    // Down: plans from the coordinator.
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int key = t * kPerThread + i;
        if (!server_->Send(kSession, PlanOf(static_cast<uint64_t>(key),
                                            PayloadFor(key, size_of(i))))) {
          ++send_failures;
        }
      }
    });
  }

  // The worker's reader: every plan whole, each sender's in its order.
  std::vector<int> next_down(kThreads, 0);
  int down = 0;
  const absl::Time deadline = absl::Now() + Scaled(absl::Seconds(60));
  while (down < kTotal && absl::Now() < deadline) {
    ReceiveResult r = link->Receive(Scaled(absl::Seconds(60)));
    ASSERT_TRUE(r.ok()) << r.status();
    if (!r->has_value()) continue;
    ASSERT_TRUE((*r)->has_plan());
    const int key = static_cast<int>((*r)->plan().seq());
    const int t = key / kPerThread, i = key % kPerThread;
    ASSERT_LT(t, kThreads);
    EXPECT_EQ(i, next_down[t]) << "plans of one sender out of order";
    next_down[t] = i + 1;
    if (size_of(i) > 0) {
      ASSERT_EQ((*r)->plan().responses_size(), 1);
      EXPECT_EQ((*r)->plan().responses(0).names(0),
                PayloadFor(key, size_of(i)));
    } else {
      EXPECT_EQ((*r)->plan().responses_size(), 0);
    }
    ++down;
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(send_failures.load(), 0);
  EXPECT_EQ(down, kTotal);

  ASSERT_TRUE(WaitForMessages(kTotal, absl::Seconds(60)));
  std::vector<Received> got = Messages();
  ASSERT_EQ(got.size(), static_cast<size_t>(kTotal));
  std::vector<int> next_up(kThreads, 0);
  for (const Received& m : got) {
    EXPECT_EQ(m.session, kSession);
    ASSERT_TRUE(m.message.has_announce());
    ASSERT_EQ(m.message.announce().requests_size(), 1);
    const proto::Request& req = m.message.announce().requests(0);
    int t = -1, i = -1;
    ASSERT_EQ(std::sscanf(req.name().c_str(), "t%d/%d", &t, &i), 2)
        << req.name();
    ASSERT_TRUE(t >= 0 && t < kThreads) << req.name();
    EXPECT_EQ(i, next_up[t]) << "announces of one sender out of order";
    next_up[t] = i + 1;
    EXPECT_EQ(req.invalid(), PayloadFor(t * kPerThread + i, size_of(i)))
        << req.name();
    EXPECT_EQ(m.message.fence().epoch(), kEpoch);
  }
  EXPECT_THAT(next_up, ElementsAre(kPerThread, kPerThread));
}

TEST_F(LinkTest, CallbacksMaySendOnTheLinkThread) {
  // on_message answers each announce with a plan at once, from the link
  // thread (the service does the same through the core's actions).
  std::atomic<uint64_t> answered{0};
  on_message_hook_ = [this, &answered](SessionId session,
                                       const proto::WorkerMessage& msg) {
    if (msg.has_announce()) {
      EXPECT_TRUE(server_->Send(session, PlanOf(++answered)));
    }
  };
  StartServer();
  std::unique_ptr<NegotiationLink> link = ConnectOrDie(WorkerOptions());
  ASSERT_NE(link, nullptr);
  for (uint64_t seq = 1; seq <= 100; ++seq) {
    ASSERT_TRUE(link->Send(AnnounceOf(absl::StrCat("n", seq))).ok());
    ReceiveResult r = link->Receive(Scaled(absl::Seconds(20)));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->has_value()) << "no answer to announce " << seq;
    EXPECT_EQ((*r)->plan().seq(), seq);
  }
  std::vector<Received> got = Messages();
  ASSERT_EQ(got.size(), 100u);
  EXPECT_EQ(got.back().message.announce().requests(0).name(), "n100");
}

TEST_F(LinkTest, TimerRunsOnTheLinkThreadWhenItsDeadlinePasses) {
  // The timer asks to be called again 300 ms after its first call; it must
  // then run on the link thread, not before that deadline, and without any
  // message to wake the thread.
  Mutex mu;
  CondVar cv;
  absl::Time deadline = absl::InfiniteFuture();
  absl::Time fired = absl::InfiniteFuture();
  bool off_thread = false;
  timer_hook_ = [&](absl::Time now) {
    MutexLock lock(&mu);
    if (!server_->OnLinkThread()) off_thread = true;
    if (deadline == absl::InfiniteFuture()) {
      deadline = now + absl::Milliseconds(300);
    } else if (now >= deadline && fired == absl::InfiniteFuture()) {
      fired = absl::Now();
      cv.SignalAll();
    }
    return fired == absl::InfiniteFuture() ? deadline : absl::InfiniteFuture();
  };
  StartServer();
  EXPECT_FALSE(server_->OnLinkThread());
  // The first call comes after the first wait (at most 500 ms).
  const absl::Time give_up = absl::Now() + Scaled(absl::Seconds(20));
  {
    MutexLock lock(&mu);
    while (fired == absl::InfiniteFuture()) {
      if (cv.WaitWithDeadline(&mu, give_up)) break;
    }
  }
  server_->Stop();  // the timer uses this test's locals
  MutexLock lock(&mu);
  ASSERT_NE(fired, absl::InfiniteFuture()) << "the timer never fired";
  EXPECT_GE(fired, deadline);
  EXPECT_FALSE(off_thread);
}

TEST_F(LinkTest, TimerRunsAfterEveryMessage) {
  // A message that sets a deadline (here: counts) is followed by a timer
  // call on the same thread before the link thread waits again.
  std::atomic<int> messages{0};
  std::atomic<int> timer_calls_after_message{0};
  on_message_hook_ = [&](SessionId, const proto::WorkerMessage&) {
    messages.fetch_add(1);
  };
  timer_hook_ = [&](absl::Time) {
    if (messages.load() > 0) timer_calls_after_message.fetch_add(1);
    return absl::InfiniteFuture();
  };
  StartServer();
  std::unique_ptr<NegotiationLink> link = ConnectOrDie(WorkerOptions());
  ASSERT_NE(link, nullptr);
  proto::WorkerMessage done;
  done.mutable_done()->set_seq(1);
  ASSERT_TRUE(link->Send(done).ok());
  ASSERT_TRUE(WaitForMessages(1, absl::Seconds(20)));
  const absl::Time give_up = absl::Now() + Scaled(absl::Seconds(20));
  while (timer_calls_after_message.load() == 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_GT(timer_calls_after_message.load(), 0);
  server_->Stop();  // the callbacks use this test's locals
}

TEST_F(LinkTest, CallbackMayUnbindItsOwnSession) {
  on_message_hook_ = [this](SessionId session, const proto::WorkerMessage&) {
    server_->Unbind(session);
  };
  StartServer();
  std::unique_ptr<NegotiationLink> link = ConnectOrDie(WorkerOptions());
  ASSERT_NE(link, nullptr);
  // The second message is dropped with the link, whether it came in the same
  // read as the first or not (its send may fail: the link may be gone).
  ASSERT_TRUE(link->Send(AnnounceOf("first")).ok());
  (void)link->Send(AnnounceOf("second"));
  ReceiveResult r = link->Receive(Scaled(absl::Seconds(30)));
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(server_->Send(kSession, PlanOf(1)));
  std::vector<Received> got = Messages();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].message.announce().requests(0).name(), "first");
}

TEST_F(LinkTest, SilentClientIsClosedAfterTheHandshakeTimeout) {
  LinkServerOptions options = ServerOptions();
  options.handshake_timeout = absl::Milliseconds(300);
  StartServer(options);
  // A bound link is not subject to the handshake timeout.
  std::unique_ptr<NegotiationLink> bound = ConnectOrDie(WorkerOptions());
  ASSERT_NE(bound, nullptr);

  const absl::Time start = absl::Now();
  RawClient silent(server_->port());
  ASSERT_TRUE(silent.connected());
  // One that stops after its Hello.
  RawClient halfway(server_->port());
  ASSERT_TRUE(halfway.connected());
  proto::WorkerMessage hello;
  hello.mutable_fence()->set_incarnation(kIncarnation);
  hello.mutable_hello()->set_protocol_version(kProtocolVersion);
  hello.mutable_hello()->set_job_id(kJob);
  hello.mutable_hello()->set_worker_id("w7");
  hello.mutable_hello()->set_client_nonce(auth::RandomBytes(auth::kNonceBytes));
  ASSERT_TRUE(halfway.Send(hello));
  absl::StatusOr<proto::CoordinatorMessage> challenge =
      halfway.Read(Scaled(absl::Seconds(20)));
  ASSERT_TRUE(challenge.ok()) << challenge.status();
  EXPECT_TRUE(challenge->has_challenge());

  absl::Status eof = silent.AwaitEof(Scaled(absl::Seconds(10)));
  EXPECT_TRUE(eof.ok()) << eof;
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
  eof = halfway.AwaitEof(Scaled(absl::Seconds(10)));
  EXPECT_TRUE(eof.ok()) << eof;
  EXPECT_THAT(Binds(), ElementsAre(Pair("w0", kEpoch)));

  // The bound link, older than the timeout by now, still works.
  EXPECT_TRUE(server_->Send(kSession, PlanOf(3)));
  ReceiveResult r = bound->Receive(Scaled(absl::Seconds(20)));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->plan().seq(), 3u);
}

TEST_F(LinkTest, OversizedFrameClosesTheConnection) {
  StartServer();
  RawClient raw(server_->port());
  ASSERT_TRUE(raw.connected());
  ASSERT_TRUE(raw.SendBytes(std::string(4, '\xff')));
  absl::Status eof = raw.AwaitEof(Scaled(absl::Seconds(10)));
  EXPECT_TRUE(eof.ok()) << eof;
  EXPECT_THAT(Binds(), IsEmpty());
}

TEST_F(LinkTest, AHandshakeLargerThan64KiBClosesTheConnection) {
  StartServer();
  RawClient raw(server_->port());
  ASSERT_TRUE(raw.connected());
  // A frame announcing 1 MiB, and 128 KiB of it: an unauthenticated peer
  // may not make the coordinator buffer that much.
  std::string bytes = {'\x00', '\x10', '\x00', '\x00'};
  bytes += std::string(128 << 10, 'x');
  (void)raw.SendBytes(bytes);  // may fail once the server closed
  // Closed with our bytes unread: an end of stream or a reset.
  absl::Status eof = raw.AwaitEof(Scaled(absl::Seconds(10)));
  EXPECT_TRUE(eof.ok() || absl::StrContains(eof.message(), "reset")) << eof;
  EXPECT_THAT(Binds(), IsEmpty());
}

TEST_F(LinkTest, ConnectAfterStopIsRefusedAtOnce) {
  StartServer();
  server_->Stop();
  LinkOptions o = WorkerOptions();
  o.timeout = Scaled(absl::Seconds(10));
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<NegotiationLink>> link =
      NegotiationLink::Connect(o);
  ASSERT_FALSE(link.ok());
  EXPECT_EQ(link.status().code(), absl::StatusCode::kUnavailable)
      << link.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2)) << link.status();
}

TEST_F(LinkTest, FirstMessageMustBeAHello) {
  StartServer();
  RawClient raw(server_->port());
  ASSERT_TRUE(raw.connected());
  proto::WorkerMessage announce = AnnounceOf("too-early");
  announce.mutable_fence()->set_incarnation(kIncarnation);
  ASSERT_TRUE(raw.Send(announce));
  absl::StatusOr<proto::CoordinatorMessage> refusal =
      raw.Read(Scaled(absl::Seconds(20)));
  ASSERT_TRUE(refusal.ok()) << refusal.status();
  ASSERT_TRUE(refusal->has_refusal());
  // Not proven: the generic refusal (the coordinator logs "expected a Hello").
  EXPECT_EQ(refusal->refusal().message(), auth::kUnauthenticatedRefusal);
  EXPECT_TRUE(raw.AwaitEof(Scaled(absl::Seconds(20))).ok());
  EXPECT_THAT(Messages(), IsEmpty());
  EXPECT_THAT(Binds(), IsEmpty());
}

TEST_F(LinkTest, OtherProtocolVersionIsRefused) {
  StartServer();
  RawClient raw(server_->port());
  ASSERT_TRUE(raw.connected());
  proto::WorkerMessage hello;
  hello.mutable_fence()->set_incarnation(kIncarnation);
  hello.mutable_hello()->set_protocol_version(kProtocolVersion + 100);
  hello.mutable_hello()->set_job_id(kJob);
  hello.mutable_hello()->set_worker_id("w0");
  hello.mutable_hello()->set_client_nonce(auth::RandomBytes(auth::kNonceBytes));
  ASSERT_TRUE(raw.Send(hello));
  absl::StatusOr<proto::CoordinatorMessage> refusal =
      raw.Read(Scaled(absl::Seconds(20)));
  ASSERT_TRUE(refusal.ok()) << refusal.status();
  ASSERT_TRUE(refusal->has_refusal());
  EXPECT_THAT(
      refusal->refusal().message(),
      HasSubstr(absl::StrCat("protocol version ", kProtocolVersion + 100)));
  EXPECT_TRUE(raw.AwaitEof(Scaled(absl::Seconds(20))).ok());
  EXPECT_THAT(Binds(), IsEmpty());
}

TEST_F(LinkTest, StopWithLinksOpenIsPromptAndBreaksThem) {
  bind_behavior_ = [](const std::string& worker_id, uint64_t) {
    return absl::StatusOr<SessionId>(worker_id == "w0" ? 1 : 2);
  };
  StartServer();
  std::unique_ptr<NegotiationLink> a = ConnectOrDie(WorkerOptions("w0"));
  std::unique_ptr<NegotiationLink> b = ConnectOrDie(WorkerOptions("w1"));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  // An unbound connection too, accepted (it has its Challenge) but not bound.
  RawClient raw(server_->port());
  ASSERT_TRUE(raw.connected());
  proto::WorkerMessage hello;
  hello.mutable_fence()->set_incarnation(kIncarnation);
  hello.mutable_hello()->set_protocol_version(kProtocolVersion);
  hello.mutable_hello()->set_job_id(kJob);
  hello.mutable_hello()->set_worker_id("w2");
  hello.mutable_hello()->set_client_nonce(auth::RandomBytes(auth::kNonceBytes));
  ASSERT_TRUE(raw.Send(hello));
  absl::StatusOr<proto::CoordinatorMessage> challenge =
      raw.Read(Scaled(absl::Seconds(20)));
  ASSERT_TRUE(challenge.ok()) << challenge.status();
  EXPECT_TRUE(challenge->has_challenge());
  EXPECT_TRUE(server_->Send(1, PlanOf(1)));
  EXPECT_TRUE(server_->Send(2, PlanOf(1)));

  const absl::Time start = absl::Now();
  server_->Stop();
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(5)));

  for (NegotiationLink* link : {a.get(), b.get()}) {
    const absl::Time t0 = absl::Now();
    ReceiveResult r = link->Receive(Scaled(absl::Seconds(30)));
    // The plan sent before Stop may come first; then the link breaks.
    if (r.ok() && r->has_value()) {
      EXPECT_EQ((*r)->plan().seq(), 1u);
      r = link->Receive(Scaled(absl::Seconds(30)));
    }
    ASSERT_FALSE(r.ok()) << "expected an error, got "
                         << (r->has_value() ? "a message" : "a timeout");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
    EXPECT_LT(absl::Now() - t0, Scaled(absl::Seconds(10)));
  }
  EXPECT_TRUE(raw.AwaitEof(Scaled(absl::Seconds(10))).ok());
  EXPECT_FALSE(server_->Send(1, PlanOf(2)));
  server_->Unbind(1);  // harmless after Stop
  server_->Stop();     // idempotent
}

TEST_F(LinkTest, ConnectToAClosedPortIsUnavailable) {
  StartServer();
  LinkOptions o = WorkerOptions();
  server_->Stop();
  server_.reset();  // the listener closes
  o.timeout = Scaled(absl::Seconds(10));
  absl::StatusOr<std::unique_ptr<NegotiationLink>> link =
      NegotiationLink::Connect(o);
  ASSERT_FALSE(link.ok());
  EXPECT_EQ(link.status().code(), absl::StatusCode::kUnavailable)
      << link.status();
}

}  // namespace
}  // namespace kolo::coordinator::link_test
