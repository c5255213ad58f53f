#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/.

Seeds are small valid inputs, so that each fuzzer starts deep (past the
handshakes, into negotiation). Deterministic: running it again rewrites the
same files. Usage: python3 fuzz/make_corpus.py [OUT_DIR (default
fuzz/corpus)]. Protobuf messages are encoded by hand (a few fields of
proto/kolo.proto), so it needs nothing beyond Python's standard library.
Files named regression_* in a corpus are not written here: they are inputs
that once crashed a target, kept as seeds (each names the fix in the git log).
"""
import hashlib
import hmac
import os
import struct
import sys

SECRET = b"fuzz-secret"  # the harnesses' fixed secret
JOB = b"job"
INCARNATION = 42
PROTOCOL_VERSION = 1  # common/version.h
NONCE = 32


# ---- protobuf, by hand --------------------------------------------------
def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def f_varint(field, v):
    return varint(field << 3) + varint(v)


def f_bytes(field, b):
    if isinstance(b, str):
        b = b.encode()
    return varint(field << 3 | 2) + varint(len(b)) + b


def f_fixed64(field, v):
    return varint(field << 3 | 1) + struct.pack("<Q", v)


def f_double(field, v):
    return varint(field << 3 | 1) + struct.pack("<d", v)


def f_packed(field, values):
    return f_bytes(field, b"".join(varint(v) for v in values))


def fence(epoch):
    return f_bytes(1, f_fixed64(1, INCARNATION) + f_varint(2, epoch))


def request(name, op=1, dtype=7, shape=(4,), reduce_op=0, root=0, device=-1,
            splits=None):
    r = f_bytes(1, name) + f_varint(2, op) + f_varint(3, dtype)
    if shape:
        r += f_packed(4, shape)
    r += f_varint(5, reduce_op) + f_varint(6, root)
    r += f_double(7, 1.0) + f_double(8, 1.0) + f_varint(9, device)
    if splits:
        r += f_packed(10, splits)
    return r


def announce(requests, epoch=1, cached=()):
    body = b"".join(f_bytes(1, r) for r in requests)
    if cached:
        body += f_packed(2, cached)
    return fence(epoch) + f_bytes(7, body)


def heartbeat(seq, epoch=1):
    return fence(epoch) + f_bytes(4, f_varint(1, seq))


def exchange(key, value, epoch=1):
    return fence(epoch) + f_bytes(5, f_bytes(1, key) + f_bytes(2, value))


def leave(epoch=1):
    return fence(epoch) + f_bytes(6, f_bytes(1, "done"))


def hello_msg(worker, nonce, epoch=0):
    h = (f_varint(1, PROTOCOL_VERSION) + f_bytes(3, JOB) + f_bytes(4, worker)
         + f_bytes(6, "hostA") + f_bytes(7, "127.0.0.1:5000")
         + f_bytes(10, nonce))
    return fence(epoch) + f_bytes(2, h)


# ---- byte_reader.h scripts ------------------------------------------------
def u16(n):
    return struct.pack(">H", n)


def blob(b):
    return u16(len(b)) + b


# ---- the targets ----------------------------------------------------------
def frame(payload):
    return struct.pack(">I", len(payload)) + payload


def frame_decoder():
    # The harness reads sizes from the end of the input (FuzzedDataProvider);
    # any bytes are valid, these hold whole frames.
    return {
        "empty_frame": frame(b""),
        "two_frames": frame(b"hello") + frame(b"world!") + b"\x05\x03\x07",
        "proto_frame": frame(announce([request("grad/w")])) + b"\x10\x10",
        "oversized": b"\x7f\xff\xff\xff" + b"x" * 8,
    }


def wire_str(b):
    return u16(len(b)) + b


def hs_msg(t, body):
    return struct.pack(">IBI", 0x4B4F4C48, t, len(body)) + body


def data_hello(version=PROTOCOL_VERSION, epoch=1, frm=1, to=0, job=JOB,
               worker=b"w1", nonce=b"c" * NONCE):
    return (struct.pack(">IQII", version, epoch, frm, to) + wire_str(job)
            + wire_str(worker) + wire_str(nonce))


def data_proof(label, frm, to, worker, nonce, acceptor_worker,
               acceptor_nonce, epoch=1):
    fields = [label, JOB, str(PROTOCOL_VERSION).encode(), str(epoch).encode(),
              str(frm).encode(), worker, str(to).encode(), acceptor_worker,
              nonce, acceptor_nonce]
    msg = b"".join(struct.pack(">Q", len(f)) + f for f in fields)
    return hmac.new(SECRET, msg, hashlib.sha256).digest()


def data_handshake():
    acc_nonce = b"a" * NONCE  # the harness's fixed acceptor nonce
    conn_nonce = b"c" * NONCE
    good = data_proof(b"kolo-data-connector-v1", 1, 0, b"w1", conn_nonce,
                      b"w0", acc_nonce)
    # The connector side: rank 3, worker w3, nonce 'c' * 32.
    acc_proof = data_proof(b"kolo-data-acceptor-v1", 3, 0, b"w3", conn_nonce,
                           b"w0", acc_nonce)
    challenge = wire_str(b"w0") + wire_str(acc_nonce) + wire_str(acc_proof)
    return {
        "acceptor_full": b"\x00" + hs_msg(1, data_hello())
        + hs_msg(3, wire_str(good)),
        "acceptor_bad_proof": b"\x00" + hs_msg(1, data_hello())
        + hs_msg(3, wire_str(b"x" * 32)),
        "acceptor_wrong_epoch": b"\x00" + hs_msg(1, data_hello(epoch=2)),
        "connector_full": b"\x01" + hs_msg(2, challenge) + hs_msg(4, b""),
        "connector_refused": b"\x01" + hs_msg(5, wire_str(b"epoch 2")),
    }


def worker_config():
    return {
        "launcher": b"KOLO_LAUNCHER=kolorun\nKOLO_RANK=1\nKOLO_SIZE=2\n"
        b"KOLO_LOCAL_RANK=1\nKOLO_LOCAL_SIZE=2\nKOLO_COORDINATOR=127.0.0.1:4000\n"
        b"KOLO_SECRET=s3cret\nKOLO_HOSTNAME=a\nKOLO_JOB_ID=j\nKOLO_WORKER_ID=w1\n",
        "knobs": b"KOLO_CYCLE_TIME_MS=0.5\nKOLO_FUSION_THRESHOLD=67108864\n"
        b"KOLO_CACHE_CAPACITY=1024\nKOLO_TIMEOUT_SECONDS=30\nKOLO_SPIN_US=50\n"
        b"KOLO_SEGMENT_BYTES=65536\nKOLO_ALLREDUCE_ALGORITHM=ring\n"
        b"KOLO_LOG_LEVEL=info\nKOLO_STALL_CHECK_TIME_SECONDS=60\n",
        "horovod": b"HOROVOD_CYCLE_TIME=5\nHOROVOD_FUSION_THRESHOLD=0\n"
        b"HOROVOD_TIMELINE=/tmp/t.json\nHOROVOD_GLOO_TIMEOUT_SECONDS=10\n",
        "typo": b"KOLO_CYCLE_TIME=5\nKOLO_SECERT=x\nKOLO_SOCKET_SNDBUF=-1\n",
    }


def kolorun_args():
    def argv(*a, env=b""):
        out = b"\0".join(x.encode() for x in a)
        return out + (b"\x01" + env if env else b"")
    return {
        "simple": argv("-np", "2", "python", "train.py"),
        "hosts": argv("-np", "4", "-H", "a:2,b:2", "--ssh-cmd", "ssh -p 22",
                      "--", "./train", "--lr", "0.1"),
        "knobs": argv("-np", "3", "--start-timeout", "10",
                      "--heartbeat-timeout-seconds", "2.5",
                      "--cycle-time-ms", "0.5", "--log-level", "debug",
                      "--stall-check-time-seconds", "30", "./w"),
        "template": argv("--np=2", "--launcher-cmd", "ip netns exec {host}",
                         "-H", "ns0,ns1", "./w"),
        "env": argv("-np", "2", "./w",
                    env=b"KOLO_START_TIMEOUT=5\nHOROVOD_CYCLE_TIME=2\n"),
        "help": argv("--help"),
        # Once UB: the slots of -H summed in an int (launcher_args_test).
        "huge_slots": argv("-np", "3", "-H", "a:2000000000,b:2000000000", "./w"),
    }


def coordinator_core():
    """Scripts of harness events (coordinator_core_fuzz.cc): each event is
    op, worker, then the op's operands."""
    def open_(w): return bytes([0, w])
    def hello(w, rank_hint=1): return bytes([1, w, rank_hint])
    def proof(w): return bytes([2, w])
    def raw(w, msg, stamp=1): return bytes([3, w, stamp]) + blob(msg)
    def tick(ms): return bytes([5, 0]) + u16(ms)
    def done(w): return bytes([6, w])
    def close(w): return bytes([7, w])

    def join(n):
        s = b""
        for w in range(n):
            s += open_(w) + hello(w) + proof(w)
        return s

    two = b"\x01" + join(2)  # expected size 2 (Pick(1, 3): 1 + 1 % 3)
    ar = [request("grad/a"), request("grad/b", dtype=8, shape=(3, 2))]
    return {
        "form_epoch": two + tick(600),
        "negotiate": two + raw(0, announce(ar)) + raw(1, announce(ar))
        + tick(2) + done(0) + done(1) + raw(0, announce([], cached=[0, 1]))
        + raw(1, announce([], cached=[0, 1])) + tick(2) + done(0) + done(1),
        "mismatch": two + raw(0, announce([request("x", dtype=7)]))
        + raw(1, announce([request("x", dtype=4)])) + tick(2),
        "collectives": two
        + raw(0, announce([request("g", op=2, shape=(2, 3)),
                           request("b", op=3, root=1),
                           request("t", op=4, splits=(1, 1), shape=(2,)),
                           request("r", op=5), request("bar", op=6, shape=())]))
        + raw(1, announce([request("g", op=2, shape=(5, 3)),
                           request("b", op=3, root=1),
                           request("t", op=4, splits=(2, 0), shape=(2,)),
                           request("r", op=5), request("bar", op=6, shape=())]))
        + tick(2) + done(0) + done(1),
        "exchange_leave": two + raw(0, exchange("k", b"v0"))
        + raw(1, exchange("k", b"v1")) + raw(0, heartbeat(1))
        + raw(1, leave()) + raw(0, leave()),
        "failure": b"\x02" + join(3) + tick(3000) + tick(3000) + close(1),
        "stall": two + raw(0, announce([request("s")])) + tick(3000)
        + tick(8000) + tick(8000) + tick(8000),
        "bad_proof": b"\x00" + open_(0) + hello(0)
        + raw(0, fence(0) + f_bytes(3, f_bytes(1, b"x" * 32))),
    }


def link_handshake():
    """flags (1: valid Hello, 2: valid proof), then bytes
    (link_handshake_fuzz.cc)."""
    ar = [request("grad/a"), request("grad/b", dtype=8, shape=(3, 2))]
    bound = (frame(announce(ar)) + frame(heartbeat(3))
             + frame(fence(1) + f_bytes(8, f_varint(1, 1))))
    return {
        "bound": b"\x03" + bound,
        "bad_proof": b"\x01" + frame(fence(1) + f_bytes(3, f_bytes(1, b"x" * 32))),
        "raw_hello": b"\x00" + blob(frame(hello_msg("w0", b"n" * NONCE, 1))),
        "wrong_job": b"\x00" + blob(frame(
            fence(1) + f_bytes(2, f_varint(1, 1) + f_bytes(3, "other")))),
        "garbage": b"\x00" + blob(b"\xff\xff\xff\xff"),
    }


def response(names, op=1, sizes=(), dtype=7, reduce_op=0, cache_bits=(),
             by_bit=False, error_code=0, error=""):
    r = b"".join(f_bytes(1, n) for n in names) + f_varint(2, op)
    if sizes:
        r += f_packed(3, sizes)
    if error_code:
        r += f_varint(4, error_code) + f_bytes(5, error)
    if cache_bits:
        r += f_packed(6, cache_bits)
    r += f_varint(10, dtype) + f_varint(11, reduce_op) + f_double(12, 1.0)
    if by_bit:
        r += f_varint(14, 1)
    return r


def plan(seq, responses, evicted=()):
    p = f_varint(1, seq) + b"".join(f_bytes(2, r) for r in responses)
    if evicted:
        p += f_packed(3, evicted)
    return p


def plan_applier():
    """Pending ops, then plans (plan_applier_fuzz.cc). An op: type index
    (0 allreduce, 1 allgather, 2 broadcast, 3 alltoall, 4 reducescatter,
    5 barrier), dtype, reduce op, number of dims, dims."""
    def ops(*each):
        return bytes([len(each) - 1]) + b"".join(bytes(o) for o in each)
    return {
        "allreduce_cached": ops([0, 7, 0, 1, 4])
        + blob(plan(1, [response(["t0"], cache_bits=[0])]))
        + blob(plan(2, [response([], cache_bits=[0], by_bit=True)]))
        + blob(plan(3, [response(["t0"])], evicted=[0])),
        "fused": ops([0, 7, 0, 1, 3], [0, 7, 0, 1, 5], [1, 3, 0, 2, 2, 3])
        + blob(plan(1, [response(["t0", "t1"], sizes=[3, 5]),
                        response(["t2"], op=2, sizes=[2], dtype=3)])),
        "fused_allgather": ops([1, 7, 0, 2, 2, 2], [1, 7, 0, 2, 3, 2])
        + blob(plan(1, [response(["t0", "t1"], op=2, sizes=[2, 3])])),
        "others": ops([3, 8, 0, 1, 4], [2, 4, 0, 1, 2], [4, 7, 3, 2, 2, 2],
                      [5, 0, 0, 0])
        + blob(plan(1, [response(["t0"], op=4, sizes=[4], dtype=8),
                        response(["t1"], op=3, dtype=4),
                        response(["t2"], op=5, sizes=[2], reduce_op=3),
                        response(["t3"], op=6)])),
        "error": ops([0, 7, 0, 1, 4])
        + blob(plan(1, [response(["t0"], error_code=3,
                                 error="dtype mismatch")])),
    }


# sealed_channel_fuzz.cc: frames are sealed by the harness (the key is
# fixed there); a seed only says which frames, how they are posted, how
# the stream is cut and edited.
def sc_frame(kind, low, post=0):
    return bytes([kind]) + u16(low) + bytes([post])


def sc_script(frames, extras=(), chunk=4096, mode=0, tail=b""):
    return (bytes([len(frames)]) + b"".join(frames) + bytes([len(extras)])
            + b"".join(u16(n) + bytes([seq]) for n, seq in extras)
            + u16(chunk - 1) + bytes([mode]) + tail)


def sc_edit(kind, at, arg=b""):
    return bytes([kind]) + u16(at >> 8) + bytes([at & 0xFF]) + arg


def sealed_channel():
    two = [sc_frame(0, 100), sc_frame(1, 5)]
    return {
        "clean": sc_script(two),
        "record_boundaries": sc_script(
            [sc_frame(0, 0), sc_frame(1, 0), sc_frame(0, 65535),
             sc_frame(2, 1)], chunk=1000),
        "more_records_than_a_read": sc_script(
            [sc_frame(3, 7), sc_frame(0, 3)], chunk=30000),
        "byte_at_a_time": sc_script([sc_frame(0, 40)], chunk=1),
        "flipped_header": sc_script(
            two, mode=1, tail=bytes([1]) + sc_edit(0, 20, bytes([0x10]))),
        "flipped_payload": sc_script(
            two, mode=1, tail=bytes([1]) + sc_edit(0, 200, bytes([0x01]))),
        "truncated": sc_script(two, mode=1, tail=bytes([1]) + sc_edit(3, 70)),
        "inserted": sc_script(
            two, mode=1, tail=bytes([1]) + sc_edit(1, 48, blob(b"xyz"))),
        "erased": sc_script(two, mode=1, tail=bytes([1]) + sc_edit(2, 10,
                                                                   u16(5))),
        "wrong_seq": sc_script([sc_frame(0, 8, post=1), sc_frame(0, 8)]),
        "wrong_length": sc_script([sc_frame(0, 8), sc_frame(0, 8, post=2)]),
        "trailing_garbage": sc_script(
            [sc_frame(0, 16)], extras=[(16, 101)],
            tail=bytes(range(64))),
        "raw": sc_script([], extras=[(0, 0), (32, 1)], mode=2,
                         tail=bytes(range(48)) + bytes(range(48))),
    }


TARGETS = {
    "frame_decoder": frame_decoder,
    "data_handshake": data_handshake,
    "sealed_channel": sealed_channel,
    "worker_config": worker_config,
    "kolorun_args": kolorun_args,
    "coordinator_core": coordinator_core,
    "link_handshake": link_handshake,
    "plan_applier": plan_applier,
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "corpus")
    for target, make in TARGETS.items():
        d = os.path.join(out, target)
        os.makedirs(d, exist_ok=True)
        for name, data in make().items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
