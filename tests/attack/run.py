#!/usr/bin/env python3
"""Attacks on a real cluster on loopback, as a stranger on the peers' network would try them.

Usage: python3 tests/attack/run.py --binary build/server/queen [--keep]

Starts three nodes on 127.0.0.1 with a cluster secret (QUEEN_RAFT_TOKEN), then:
  * sends forged peer messages without the secret, with a wrong cluster id, and from a node
    id that is not a member: each is refused (401) and the cluster keeps its leader;
  * sends, with every credential, messages whose term is at the top of the range (2^64 - 1,
    so term + 1 would wrap) and a replayed stale append response: they are refused or change
    nothing, the cluster keeps a leader, and pushes are answered;
  * holds half-sent headers open on the raft port: /health answers meanwhile, and each is
    closed within the header timeout; past the strangers' budget a new connection is closed
    at once;
  * starts a node whose peers are not on loopback without a secret: it refuses to start and
    names QUEEN_RAFT_TOKEN;
  * on a single node, trickles two 64 MiB bodies from 127.0.0.2: pushes from 127.0.0.1 are
    answered within a second meanwhile, and the trickling connections are dropped; with JWT
    on, a trickling request without a token is answered 401 before its body is read;
  * checks the raft port listens on the peer list's address only;
  * pauses the leader (SIGSTOP) while pushes go to a follower: they are answered within two
    election timeouts, through the new leader;
  * runs a second cluster over mutual TLS (QUEEN_RAFT_TLS_*, certificates made with the openssl
    command): it elects a leader and takes pushes, while plain HTTP, a TLS client without a
    certificate and one with a certificate of another CA are all refused at the handshake.
Every wait polls with a deadline. Prints one line per check and `N passed, M failed`.
"""
import argparse
import base64
import hashlib
import hmac
import http.client
import threading
import json
import os
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time

SECRET = "attack-suite-secret"
CLUSTER_ID = "attack-suite"
HEADER_TIMEOUT_MS = 1000
ELECTION_MS = 1000
STRANGERS_MAX = 64  # the transport's unauthenticated_max


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def poll(deadline_s, check, interval_s=0.05):
    end = time.monotonic() + deadline_s
    while True:
        value = check()
        if value or time.monotonic() > end:
            return value
        time.sleep(interval_s)


def http_call(port, method, path, body=None, timeout=2.0):
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        headers = {"content-type": "application/json"} if body is not None else {}
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers=headers)
        r = conn.getresponse()
        data = r.read()
        conn.close()
        return r.status, data
    except OSError:
        return None, b""


# ---------------------------------------------------------------------------- raft wire

def raft_message(kind, sender, to, term, commit=0, index=0, log_term=0):
    """A Raft message as core/raft/raft.cpp encodes it (little-endian, no entries)."""
    return (struct.pack("<BQQQQQQB", kind, sender, to, term, index, log_term, commit, 0) +
            struct.pack("<QQI", 0, 0, 0) + struct.pack("<I", 0))


APPEND_RESP = 6
VOTE = 3


def post_raft(port, messages, token=SECRET, cluster=CLUSTER_ID, sender="1"):
    body = b"".join(struct.pack("<I", len(m)) + m for m in messages)
    headers = {"content-type": "application/octet-stream", "x-queen-raft-from": sender}
    if token is not None:
        headers["x-queen-raft-token"] = token
    if cluster is not None:
        headers["x-queen-raft-cluster"] = cluster
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3)
        conn.request("POST", "/raft/messages", body=body, headers=headers)
        status = conn.getresponse().status
        conn.close()
        return status
    except OSError:
        return None


# ---------------------------------------------------------------------------- the cluster

class Cluster:
    def __init__(self, binary, root, extra_env=None):
        self.binary = binary
        self.root = root
        self.extra_env = extra_env
        self.http = [free_port() for _ in range(3)]
        self.raft = [free_port() for _ in range(3)]
        self.peers = ",".join(f"{i + 1}=127.0.0.1:{self.raft[i]}/127.0.0.1:{self.http[i]}"
                              for i in range(3))
        self.procs = []

    def env(self, i):
        env = dict(os.environ)
        env.update({
            "PORT": str(self.http[i]), "QUEEN_BIND_ADDR": "127.0.0.1",
            "QUEEN_RAFT_NODE_ID": str(i + 1), "QUEEN_RAFT_PEERS": self.peers,
            "QUEEN_RAFT_DIR": os.path.join(self.root, f"n{i + 1}"),
            "QUEEN_RAFT_TOKEN": SECRET, "QUEEN_RAFT_CLUSTER_ID": CLUSTER_ID,
            "QUEEN_HTTP_HEADER_TIMEOUT_MS": str(HEADER_TIMEOUT_MS),
            "QUEEN_RAFT_ELECTION_MS": str(ELECTION_MS),
        })
        if self.extra_env is not None:
            env.pop("QUEEN_RAFT_TOKEN")
            env.update(self.extra_env)
        return env

    def start(self):
        for i in range(3):
            log = open(os.path.join(self.root, f"n{i + 1}.log"), "wb")
            self.procs.append(subprocess.Popen([self.binary], env=self.env(i), stdout=log,
                                               stderr=subprocess.STDOUT))

    def stop(self):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()

    def health(self, i):
        status, body = http_call(self.http[i], "GET", "/health", timeout=1.0)
        if status != 200:
            return None
        return json.loads(body)["raft"]

    def leader(self):
        """The node (0-based) every answering node names as leader, and its term."""
        views = [self.health(i) for i in range(3)]
        leaders = {v["leader"] for v in views if v}
        if len(leaders) != 1 or 0 in leaders:
            return None
        return next(iter(leaders)) - 1, max(v["term"] for v in views if v)

    def refused_count(self, i):
        status, body = http_call(self.http[i], "GET", "/metrics/prometheus")
        for line in body.decode(errors="replace").splitlines():
            if line.startswith("queen_raft_messages_refused_total"):
                return int(float(line.split()[-1]))
        return None


# ---------------------------------------------------------------------------- checks

class Suite:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, name, ok, detail=""):
        if ok:
            self.passed += 1
            print(f"PASS {name}")
        else:
            self.failed += 1
            print(f"FAIL {name}{': ' + detail if detail else ''}")


def stays_led(c, term_before, seconds=3.0):
    """The cluster keeps one leader with a sane term over `seconds` (sampled)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        led = poll(5.0, c.leader)
        if not led or led[1] > term_before + 10:
            return False, f"leader/term {led}"
        time.sleep(0.2)
    return True, ""


def push_works(c, name):
    led = poll(5.0, c.leader)
    if not led:
        return False
    status, _ = http_call(c.http[led[0]], "POST", "/api/v1/push",
                          {"items": [{"queue": "attack", "transactionId": name, "payload": 1}]},
                          timeout=5.0)
    return status == 201


def forged_messages(s, c):
    led = poll(20.0, c.leader)
    s.check("the cluster elects a leader", bool(led), "no leader within 20 s")
    if not led:
        return
    leader, term = led
    follower = (leader + 1) % 3
    port = c.raft[follower]
    msg = raft_message(APPEND_RESP, leader + 1, follower + 1, 2**64 - 1)
    s.check("a peer message without the secret is refused (401)",
            post_raft(port, [msg], token=None) == 401)
    s.check("a peer message with a wrong secret is refused (401)",
            post_raft(port, [msg], token="guess") == 401)
    s.check("a peer message of another cluster is refused (401)",
            post_raft(port, [msg], cluster="other") == 401)
    s.check("a peer message from a node that is not a member is refused (401)",
            post_raft(port, [raft_message(APPEND_RESP, 99, follower + 1, 2**64 - 1)],
                      sender="99") == 401)
    ok, why = stays_led(c, term)
    s.check("after the refused forgeries the cluster keeps its leader", ok, why)


def max_term_messages(s, c):
    led = poll(10.0, c.leader)
    if not led:
        s.check("a leader before the max-term messages", False)
        return
    leader, term = led
    before = [c.refused_count(i) or 0 for i in range(3)]
    for target in range(3):
        for sender in range(3):
            if sender == target:
                continue
            forged = [raft_message(APPEND_RESP, sender + 1, target + 1, 2**64 - 1 - k,
                                   commit=2**64 - 1) for k in range(2)]
            forged.append(raft_message(VOTE, sender + 1, target + 1, 2**63, index=2**63))
            post_raft(c.raft[target], forged, sender=str(sender + 1))
    after = [c.refused_count(i) or 0 for i in range(3)]
    s.check("messages with a term at the top of the range are refused and counted",
            all(a >= b + 6 for a, b in zip(after, before)), f"{before} -> {after}")
    ok, why = stays_led(c, term)
    s.check("after max-term messages with the secret the cluster keeps a leader", ok, why)
    stale = raft_message(APPEND_RESP, leader + 1, (leader + 1) % 3 + 1, 1)
    post_raft(c.raft[(leader + 1) % 3], [stale] * 3, sender=str(leader + 1))
    ok, why = stays_led(c, term, seconds=1.0)
    s.check("a replayed stale append response changes nothing", ok, why)
    s.check("pushes are answered after the forged messages", push_works(c, "after-forgeries"))


def half_open_headers(s, c):
    port = c.raft[0]
    held = []
    for _ in range(40):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.sendall(b"POST /raft/messages HTTP/1.1\r\nHost: x\r\n")  # never finished
        held.append(sock)
    answered = all(poll(1.0, lambda: c.health(0) is not None) for _ in range(5))
    s.check("/health answers while half-sent raft headers are held", answered)
    closed = closed_by_server
    deadline_s = HEADER_TIMEOUT_MS / 1000 + 3
    all_closed = poll(deadline_s, lambda: all(closed(x) for x in held), interval_s=0.1)
    s.check(f"half-sent raft headers are closed within the header timeout (+3 s)",
            bool(all_closed))
    for sock in held:
        sock.close()
    # Past the strangers' budget, a new connection is closed at accept.
    flood = [socket.create_connection(("127.0.0.1", port), timeout=5)
             for _ in range(STRANGERS_MAX + 16)]
    refused = poll(2.0, lambda: sum(closed(x) for x in flood) >= 16, interval_s=0.1)
    s.check("connections past the strangers' budget are closed at once", bool(refused))
    for sock in flood:
        sock.close()
    s.check("/health answers after the header flood", poll(3.0, lambda: c.health(0)) is not None)


def paused_leader(s, c):
    """SIGSTOP the leader while pushes go to a follower: they follow the new leader."""
    led = poll(10.0, c.leader)
    if not led:
        s.check("a leader before pausing it", False)
        return
    leader, _ = led
    follower = (leader + 1) % 3
    os.kill(c.procs[leader].pid, signal.SIGSTOP)
    try:
        results = []

        def push_through(i):
            status, took = timed_push(c.http[follower], f"paused-{i}")
            results.append((status, took))
        threads = [threading.Thread(target=push_through, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        answers = sorted(results, key=lambda r: r[1])
        # Three election timeouts, each drawn up to 2x: the two nodes left may split their
        # votes, each split costing a round (a CI run once took two: term 4, 4.3 s). A push
        # that waited on the paused leader instead would hang until the 30 s join.
        bound_s = 3 * 2 * ELECTION_MS / 1000
        s.check(f"pushes forwarded to a paused leader are answered within {bound_s:.0f} s",
                len(answers) == 4 and all(st == 201 and t < bound_s for st, t in answers),
                f"{answers}")
    finally:
        os.kill(c.procs[leader].pid, signal.SIGCONT)


def listens_on_peer_address(s, c):
    try:
        socket.create_connection(("127.0.0.2", c.raft[0]), timeout=1).close()
        reached = True
    except OSError:
        reached = False
    s.check("the raft port listens on the peer list's address only (not 127.0.0.2)",
            not reached)


def refuses_unsecured_start(s, binary, root):
    env = dict(os.environ)
    # A peer named by a host name that is not loopback (.invalid never resolves): the node must
    # stop before it sends anything anywhere.
    env.update({"PORT": str(free_port()), "QUEEN_BIND_ADDR": "127.0.0.1",
                "QUEEN_RAFT_NODE_ID": "1", "QUEEN_RAFT_DIR": os.path.join(root, "unsecured"),
                "QUEEN_RAFT_PEERS": f"1=127.0.0.1:{free_port()}/127.0.0.1:{free_port()},"
                                    f"2=peer.invalid:7402/peer.invalid:6642"})
    env.pop("QUEEN_RAFT_TOKEN", None)
    try:
        p = subprocess.run([binary], env=env, capture_output=True, timeout=10)
        out = (p.stdout + p.stderr).decode(errors="replace")
        s.check("a node with peers off loopback and no secret refuses to start",
                p.returncode != 0 and "QUEEN_RAFT_TOKEN" in out,
                f"exit {p.returncode}: {out[-300:]}")
    except subprocess.TimeoutExpired:
        s.check("a node with peers off loopback and no secret refuses to start", False,
                "it kept running")


def start_node(binary, root, name, extra):
    port = free_port()
    env = dict(os.environ)
    env.update({"PORT": str(port), "QUEEN_BIND_ADDR": "127.0.0.1",
                "QUEEN_RAFT_DIR": os.path.join(root, name)})
    env.update(extra)
    log = open(os.path.join(root, name + ".log"), "wb")
    proc = subprocess.Popen([binary], env=env, stdout=log, stderr=subprocess.STDOUT)
    up = poll(10.0, lambda: http_call(port, "GET", "/health", timeout=1.0)[0] == 200)
    return proc, port, bool(up)


def trickle(port, source, headers, stop):
    """Announces a 64 MiB push body from `source` and sends one byte of it every 0.3 s."""
    sock = socket.socket()
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    head = ("POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {64 << 20}\r\n{headers}\r\n").encode()
    sock.sendall(head)

    def run():
        try:
            while not stop.is_set():
                sock.sendall(b" ")
                stop.wait(0.3)
        except OSError:
            pass
    threading.Thread(target=run, daemon=True).start()
    return sock


def closed_by_server(sock):
    sock.settimeout(0.05)
    try:
        data = sock.recv(4096)
        return data == b"" or data.startswith(b"HTTP/1.1 4")
    except socket.timeout:
        return False
    except OSError:
        return True


def timed_push(port, name, headers=None):
    start = time.monotonic()
    body = json.dumps({"items": [{"queue": "slow", "transactionId": name, "payload": 1}]})
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("POST", "/api/v1/push", body=body,
                     headers={"content-type": "application/json", **(headers or {})})
        status = conn.getresponse().status
        conn.close()
    except OSError:
        status = None
    return status, time.monotonic() - start


def slow_bodies(s, binary, root):
    proc, port, up = start_node(binary, root, "slow", {})
    try:
        s.check("a single node starts for the slow-body attacks", up)
        stop = threading.Event()
        slow = [trickle(port, "127.0.0.2", "", stop) for _ in range(2)]
        answers = []
        for i in range(10):
            answers.append(timed_push(port, f"meanwhile-{i}"))
            time.sleep(0.1)
        worst = max(t for _, t in answers)
        s.check("pushes from another address are answered within 1 s while 64 MiB bodies "
                "trickle in", all(st == 201 for st, _ in answers) and worst < 1.0,
                f"{answers}")
        dropped = poll(6.0, lambda: all(closed_by_server(x) for x in slow), interval_s=0.2)
        s.check("connections that trickle their body are dropped", bool(dropped))
        stop.set()
        for sock in slow:
            sock.close()
    finally:
        proc.kill()
        proc.wait()


def jwt(secret, claims):
    def b64(raw):
        return base64.urlsafe_b64encode(raw).rstrip(b"=")
    head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64(json.dumps(claims).encode())
    sig = b64(hmac.new(secret.encode(), head + b"." + body, hashlib.sha256).digest())
    return (head + b"." + body + b"." + sig).decode()


def slow_bodies_without_token(s, binary, root):
    secret = "attack-jwt-secret"
    proc, port, up = start_node(binary, root, "jwt",
                                {"JWT_ENABLED": "true", "JWT_SECRET": secret})
    try:
        s.check("a node with JWT on starts", up)
        stop = threading.Event()
        slow = trickle(port, "127.0.0.2", "", stop)
        refused = poll(2.0, lambda: closed_by_server(slow), interval_s=0.1)
        s.check("with JWT on, a trickling request without a token is refused before its body",
                bool(refused))
        token = jwt(secret, {"sub": "attack", "role": "admin", "exp": int(time.time()) + 600})
        status, took = timed_push(port, "with-token", {"authorization": f"Bearer {token}"})
        s.check("a push with a token is answered within 1 s meanwhile",
                status == 201 and took < 1.0, f"{status} in {took:.2f} s")
        stop.set()
        slow.close()
    finally:
        proc.kill()
        proc.wait()


def make_certs(root, name):
    """A CA and one certificate it signed (for every node: peers trust the CA)."""
    d = os.path.join(root, name)
    os.makedirs(d, exist_ok=True)

    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=d)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
        f"/CN={name}-ca", "-keyout", "ca.key", "-out", "ca.pem")
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}-peer",
        "-keyout", "peer.key", "-out", "peer.csr")
    run("x509", "-req", "-in", "peer.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-out", "peer.pem")
    return {k: os.path.join(d, f) for k, f in
            (("ca", "ca.pem"), ("cert", "peer.pem"), ("key", "peer.key"))}


def tls_refused(port, cert=None):
    """True when a TLS client (with `cert`, or none) cannot exchange a request."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if cert:
        ctx.load_cert_chain(cert["cert"], cert["key"])
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3) as raw:
            with ctx.wrap_socket(raw) as tls:
                tls.sendall(b"POST /raft/messages HTTP/1.1\r\nHost: x\r\n"
                            b"Content-Length: 0\r\n\r\n")
                return tls.recv(64) == b""
    except (OSError, ssl.SSLError):
        return True


def mutual_tls(s, binary, root):
    try:
        certs = make_certs(root, "cluster")
        rogue = make_certs(root, "rogue")
    except (OSError, subprocess.CalledProcessError) as e:
        s.check("certificates for the TLS cluster", False, str(e))
        return
    c = Cluster(binary, os.path.join(root, "tls"), {
        "QUEEN_RAFT_TLS_CERT": certs["cert"], "QUEEN_RAFT_TLS_KEY": certs["key"],
        "QUEEN_RAFT_TLS_CA": certs["ca"]})
    os.makedirs(c.root, exist_ok=True)
    c.start()
    try:
        s.check("a cluster over mutual TLS elects a leader", bool(poll(20.0, c.leader)))
        s.check("a cluster over mutual TLS takes pushes", push_works(c, "over-tls"))
        port = c.raft[0]
        s.check("plain HTTP to a TLS raft port is refused",
                post_raft(port, [raft_message(APPEND_RESP, 2, 1, 5)], sender="2") is None)
        s.check("a TLS client without a certificate is refused", tls_refused(port))
        s.check("a TLS client with another CA's certificate is refused",
                tls_refused(port, rogue))
        s.check("the TLS cluster keeps its leader after the refusals", bool(poll(5.0, c.leader)))
    finally:
        c.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="queen-attack-")
    s = Suite()
    refuses_unsecured_start(s, args.binary, root)
    slow_bodies(s, args.binary, root)
    slow_bodies_without_token(s, args.binary, root)
    c = Cluster(args.binary, root)
    c.start()
    try:
        forged_messages(s, c)
        max_term_messages(s, c)
        half_open_headers(s, c)
        listens_on_peer_address(s, c)
        paused_leader(s, c)
        s.check("pushes are answered at the end", push_works(c, "at-the-end"))
    finally:
        c.stop()
    try:
        mutual_tls(s, args.binary, root)
    finally:
        if args.keep or s.failed:
            print(f"attack: data and logs kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(f"{s.passed} passed, {s.failed} failed")
    return 1 if s.failed else 0


if __name__ == "__main__":
    sys.exit(main())
