#!/usr/bin/env python3
"""Wire conformance suite for the Queen HTTP API.

Starts a node, runs every case file in cases/*.json (sorted by name) against it over HTTP and
reports each case whose answer differs from what a Queen 2.x client reads: the status, the
envelope (array or object), a missing or forbidden field, a field of the wrong type or value.

    python3 tests/conformance/run.py --binary build/server/queen [--only FAMILY] [--keep]

--only FAMILY runs cases/FAMILY.json only (several: comma-separated). --keep keeps the data
folders and node logs and prints where they are.

The node listens on a free loopback port with its data in a temporary folder; the run waits
for GET /health to answer 200 (polling, with a deadline) and kills the node at the end. The
files without "env" share one node, so each file uses queue, group and key names of its own.
Each failing case prints one line:

    FAIL <file> | <case name> | <method> <path> | <what differed> | body: <answer, cut>

and the last line printed is always "N passed, M failed"; the exit status is 1 when a case
failed (2 when the run could not begin).

Case files
----------
A case file is an object:

    {"env": {"VAR": "value"},        optional: this file gets a node of its own, started
                                     with these variables added
     "cases": [case, ...]}

and a case is:

    {"name": "push answers 201",
     "method": "POST", "path": "/api/v1/push?x=1",
     "query": {"k": "v"},            optional, URL-encoded and appended to the path
     "headers": {"X-Name": "v"},     optional
     "body": {...},                  JSON body, sent with Content-Type: application/json
     "rawBody": "...",               or a body sent byte for byte (Content-Type: application/json
                                     unless headers set one); with neither, no body and no
                                     Content-Type are sent
     "timeoutMs": 10000,             optional HTTP timeout
     "expect": {"status": 201,       an int, or a list of acceptable ints
                "body": pattern,     optional, see below
                "emptyBody": true,   optional: the body must be empty
                "headers": {"Name": pattern}},   optional, names case-insensitive
     "save": {"lease": "messages.0.leaseId"},    optional, see below
     "poll": {"deadlineMs": 3000,    optional: resend until the expectation holds (or, with
              "untilStatus": 200,    untilStatus, until that status comes back, then check),
              "intervalMs": 50}}     giving up at the deadline

Shape language (patterns)
-------------------------
* A JSON object lists required keys; each value is the pattern of that key's value. Extra
  keys are allowed unless the object has "$strict": true. {"$absent": true} as a key's value
  means the key must not be there; {"$optional": p} that it may be absent, and matches p
  when present. An object pattern fails on an array ("envelope").
* A string naming types, "<string>", "<int>", "<number>", "<bool>", "<null>", "<array>",
  "<object>", "<any>", "<uuid>", "<iso-time>", "<digits>" (a string of decimal digits),
  "<nonempty>" (a non-empty string) or a union of them such as "<string|null>", matches by
  type. Any other string, number, bool or null must be equal (1 and 1.0 are equal, 1 and
  true are not).
* [p] is a non-empty array whose every element matches p; [] is the empty array; a longer
  list matches position by position, like $items.
* {"$len": n, "$each": p}: an array of exactly n elements (each matching p if given);
  {"$minLen": n} at least n elements; {"$items": [p0, p1, ...]}: exactly these positions;
  {"$prefix": [p0, ...]}: the first elements match these, more may follow.
* {"$oneOf": [p, q, ...]}: any one of the patterns; {"$regex": "re"}: a string the regular
  expression matches somewhere; {"$contains": x}: a string containing the string x, or an
  array with an element matching the pattern x; {"$not": p}: anything p does not match;
  {"$deep": p}: the value, or any value nested in it at any depth, matches p (for answers
  whose envelope the references leave open).
* Operators and keys mix: {"error": "<string>", "$oneOf": [...]} checks both.
* A body that is not JSON is matched as one string (for $contains / $regex on text answers).

Generated bodies
----------------
In "body" and "rawBody", {"$repeat": n, "$of": x} becomes x repeated n times: a string when x
is a string, else an array of n copies of x in which "${i}" is the copy's index (0..n-1).

Saved values
------------
"save": {"name": "dotted.path.0.field"} stores a value of the answer's JSON body (array
indices are path parts). Later cases of the same file substitute ${name} in the path, query,
headers, body strings and expected patterns (a case's own expectations see the values it
saved, so two fields of one answer can be compared); a string that is exactly "${name}"
takes the saved value with its JSON type (an int stays an int). Built in: ${uuid} (a fresh
UUID at each use), ${now} (the current UTC time, ISO 8601), ${nowMs} (epoch milliseconds).
"""

import argparse
import datetime
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
CASES_DIR = os.path.join(HERE, "cases")
HEALTH_DEADLINE_S = 30.0
BODY_SHOWN_MAX = 300
ERRORS_SHOWN_MAX = 4

TYPE_NAMES = {"string", "int", "number", "bool", "null", "array", "object", "any", "uuid",
              "iso-time", "digits", "nonempty"}
TYPE_RE = re.compile(r"^<([a-z-]+(\|[a-z-]+)*)>$")
UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                     r"[0-9a-fA-F]{12}$")
ISO_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})$")
VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
OPERATORS = {"$len", "$each", "$minLen", "$items", "$prefix", "$oneOf", "$regex", "$contains",
             "$not", "$deep"}


class Missing(Exception):
    """A ${name} with nothing saved under it."""


# ---------- the shape language ----------

def type_spec(pattern):
    """The set of type names of a "<a|b>" pattern, or None for a literal string."""
    m = TYPE_RE.match(pattern)
    if not m:
        return None
    names = m.group(1).split("|")
    if not all(n in TYPE_NAMES for n in names):
        return None
    return names


def is_type(name, v):
    if name == "any":
        return True
    if name == "string":
        return isinstance(v, str)
    if name == "nonempty":
        return isinstance(v, str) and v != ""
    if name == "int":
        return isinstance(v, int) and not isinstance(v, bool)
    if name == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if name == "bool":
        return isinstance(v, bool)
    if name == "null":
        return v is None
    if name == "array":
        return isinstance(v, list)
    if name == "object":
        return isinstance(v, dict)
    if name == "uuid":
        return isinstance(v, str) and UUID_RE.match(v) is not None
    if name == "iso-time":
        return isinstance(v, str) and ISO_RE.match(v) is not None
    if name == "digits":
        return isinstance(v, str) and v.isdigit() and v.isascii()
    return False


def kind(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def short(v, limit=80):
    text = json.dumps(v, separators=(",", ":")) if not isinstance(v, str) else json.dumps(v)
    return text if len(text) <= limit else text[:limit] + "..."


def equal(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    return a == b


def where(path):
    return path if path else "body"


def match(pattern, actual, path=""):
    """The list of differences between `actual` and `pattern` (empty when it matches)."""
    if isinstance(pattern, str):
        names = type_spec(pattern)
        if names is None:
            if equal(pattern, actual):
                return []
            return [f"{where(path)}: expected {short(pattern)}, got {short(actual)}"]
        if any(is_type(n, actual) for n in names):
            return []
        return [f"{where(path)}: wrong type, expected {pattern}, got {kind(actual)} "
                f"{short(actual, 40)}"]
    if isinstance(pattern, list):
        if len(pattern) == 1:
            if not isinstance(actual, list):
                return [f"{where(path)}: expected an array, got {kind(actual)}"]
            if not actual:
                return [f"{where(path)}: expected a non-empty array, got []"]
            errs = []
            for i, v in enumerate(actual):
                errs += match(pattern[0], v, f"{path}[{i}]")
            return errs
        return match({"$items": pattern}, actual, path)
    if isinstance(pattern, dict):
        if any(k in OPERATORS for k in pattern):
            errs = match_operator(pattern, actual, path)
            rest = {k: v for k, v in pattern.items() if k not in OPERATORS}
            return errs + (match(rest, actual, path) if rest else [])
        if not isinstance(actual, dict):
            return [f"{where(path)}: expected an object, got {kind(actual)} {short(actual, 60)}"]
        errs = []
        for key, sub in pattern.items():
            if key == "$strict":
                continue
            sub_path = f"{path}.{key}" if path else key
            if isinstance(sub, dict) and sub.get("$absent") is True:
                if key in actual:
                    errs.append(f"{sub_path}: must be absent, got {short(actual[key], 40)}")
                continue
            if isinstance(sub, dict) and "$optional" in sub:
                if key in actual:
                    errs += match(sub["$optional"], actual[key], sub_path)
                continue
            if key not in actual:
                errs.append(f"{sub_path}: missing")
                continue
            errs += match(sub, actual[key], sub_path)
        if pattern.get("$strict") is True:
            extra = sorted(k for k in actual if k not in pattern)
            if extra:
                errs.append(f"{where(path)}: unexpected keys {', '.join(extra)}")
        return errs
    if equal(pattern, actual):
        return []
    return [f"{where(path)}: expected {short(pattern)}, got {short(actual)}"]


def nested(value):
    """`value` and every value nested in it."""
    yield value
    children = value.values() if isinstance(value, dict) else value
    if isinstance(value, (dict, list)):
        for child in children:
            yield from nested(child)


def match_operator(pattern, actual, path):
    errs = []
    if "$deep" in pattern:
        if not any(not match(pattern["$deep"], v, path) for v in nested(actual)):
            errs.append(f"{where(path)}: nothing in it matches {short(pattern['$deep'])}")
    if "$oneOf" in pattern:
        options = pattern["$oneOf"]
        if not any(not match(p, actual, path) for p in options):
            errs.append(f"{where(path)}: {short(actual, 60)} matches none of {short(options)}")
    if "$not" in pattern and not match(pattern["$not"], actual, path):
        errs.append(f"{where(path)}: must not match {short(pattern['$not'])}")
    if "$regex" in pattern:
        if not isinstance(actual, str) or not re.search(pattern["$regex"], actual):
            errs.append(f"{where(path)}: {short(actual, 60)} does not match "
                        f"/{pattern['$regex']}/")
    if "$contains" in pattern:
        want = pattern["$contains"]
        if isinstance(actual, str) and isinstance(want, str):
            if want not in actual:
                errs.append(f"{where(path)}: text lacks {short(want)}")
        elif isinstance(actual, list):
            tries = [match(want, v, f"{path}[{i}]") for i, v in enumerate(actual)]
            if all(tries):
                closest = min(tries, key=len) if tries else []
                hint = f" (closest: {'; '.join(closest[:2])})" if closest else " (empty)"
                errs.append(f"{where(path)}: no element matches{hint}")
        else:
            errs.append(f"{where(path)}: expected a string or array containing {short(want)},"
                        f" got {kind(actual)}")
    array_ops = {"$len", "$each", "$minLen", "$items", "$prefix"} & pattern.keys()
    if array_ops:
        if not isinstance(actual, list):
            return errs + [f"{where(path)}: expected an array, got {kind(actual)} "
                           f"{short(actual, 60)}"]
        if "$len" in pattern and len(actual) != pattern["$len"]:
            errs.append(f"{where(path)}: expected {pattern['$len']} elements, got {len(actual)}")
        if "$minLen" in pattern and len(actual) < pattern["$minLen"]:
            errs.append(f"{where(path)}: expected at least {pattern['$minLen']} elements, "
                        f"got {len(actual)}")
        if "$each" in pattern:
            for i, v in enumerate(actual):
                errs += match(pattern["$each"], v, f"{path}[{i}]")
        if "$items" in pattern:
            items = pattern["$items"]
            if len(actual) != len(items):
                errs.append(f"{where(path)}: expected {len(items)} elements, got {len(actual)}")
            for i, (p, v) in enumerate(zip(items, actual)):
                errs += match(p, v, f"{path}[{i}]")
        if "$prefix" in pattern:
            items = pattern["$prefix"]
            if len(actual) < len(items):
                errs.append(f"{where(path)}: expected at least {len(items)} elements, "
                            f"got {len(actual)}")
            for i, (p, v) in enumerate(zip(items, actual)):
                errs += match(p, v, f"{path}[{i}]")
    return errs


# ---------- generated bodies and saved values ----------

def with_index(value, i):
    if isinstance(value, str):
        return i if value == "${i}" else value.replace("${i}", str(i))
    if isinstance(value, list):
        return [with_index(v, i) for v in value]
    if isinstance(value, dict):
        return {k: with_index(v, i) for k, v in value.items()}
    return value


def expand(value):
    """`value` with every {"$repeat": n, "$of": x} generated."""
    if isinstance(value, dict):
        if "$repeat" in value:
            n, of = value["$repeat"], expand(value["$of"])
            if isinstance(of, str):
                return of * n
            return [with_index(of, i) for i in range(n)]
        return {k: expand(v) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v) for v in value]
    return value


def builtin(name):
    if name == "uuid":
        return str(uuid.uuid4())
    if name == "now":
        now = datetime.datetime.now(datetime.timezone.utc)
        return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"
    if name == "nowMs":
        return int(time.time() * 1000)
    return None


def lookup(name, saved):
    if name in saved:
        return saved[name]
    value = builtin(name)
    if value is None:
        raise Missing(name)
    return value


def substitute(value, saved):
    """`value` with every ${name} replaced; keys of objects are left as they are."""
    if isinstance(value, str):
        whole = VAR_RE.fullmatch(value)
        if whole:
            return lookup(whole.group(1), saved)

        def text(m):
            v = lookup(m.group(1), saved)
            return v if isinstance(v, str) else json.dumps(v)
        return VAR_RE.sub(text, value)
    if isinstance(value, list):
        return [substitute(v, saved) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, saved) for k, v in value.items()}
    return value


def dig(doc, dotted):
    """The value at a dotted path (array indices as parts); raises KeyError when absent."""
    cur = doc
    for part in dotted.split("."):
        if isinstance(cur, list) and part.lstrip("-").isdigit():
            cur = cur[int(part)]
        elif isinstance(cur, dict) and part in cur:
            cur = cur[part]
        else:
            raise KeyError(part)
    return cur


# ---------- the node ----------

NODE_SETTING_PREFIXES = ("QUEEN_", "JWT_")
NODE_SETTINGS = {"PORT", "LOG_LEVEL", "POP_DEFAULT_TIMEOUT_MS", "DEFAULT_TIMEOUT",
                 "DEFAULT_SUBSCRIPTION_MODE", "RETENTION_INTERVAL", "PARTITION_CLEANUP_DAYS"}


def node_setting(name):
    """Whether the node reads this variable: the caller's value of it is not passed on."""
    return name in NODE_SETTINGS or name.startswith(NODE_SETTING_PREFIXES)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    def __init__(self, binary, work_dir, label, extra_env):
        self.binary = binary
        self.label = label
        self.data_dir = os.path.join(work_dir, label, "data")
        self.log_path = os.path.join(work_dir, label, "node.log")
        self.extra_env = extra_env
        self.proc = None
        self.port = None

    def start(self):
        os.makedirs(self.data_dir, exist_ok=True)
        last_error = ""
        for _ in range(3):  # a port taken between the probe and the bind: try another
            self.port = free_port()
            env = {k: v for k, v in os.environ.items() if not node_setting(k)}
            env.update({"PORT": str(self.port), "QUEEN_BIND_ADDR": "127.0.0.1",
                        "QUEEN_RAFT_DIR": self.data_dir, "LOG_LEVEL": "warn"})
            env.update(self.extra_env)
            log = open(self.log_path, "ab")
            self.proc = subprocess.Popen([self.binary], env=env, stdout=log, stderr=log,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
            log.close()
            ok, last_error = self.wait_healthy()
            if ok:
                return
            exited = self.proc.poll() is not None
            self.stop()
            if not exited:
                break  # it hung: trying again would only wait again
        raise RuntimeError(f"node {self.label} did not become healthy: {last_error}; "
                           f"log tail: {self.log_tail()}")

    def log_tail(self, chars=400):
        try:
            with open(self.log_path, "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return "(no log)"
        text = " ".join(text.split())
        return text[-chars:] if text else "(empty)"

    def wait_healthy(self):
        deadline = time.monotonic() + HEALTH_DEADLINE_S
        last = "no answer"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False, f"exited with {self.proc.returncode}"
            try:
                status, _, _ = http_request(self.port, "GET", "/health", None, {}, 1.0)
                if status == 200:
                    return True, ""
                last = f"/health answered {status}"
            except (OSError, http.client.HTTPException) as e:
                last = str(e) or type(e).__name__
            time.sleep(0.02)  # poll interval while the node boots
        return False, f"no healthy /health within {HEALTH_DEADLINE_S:.0f} s ({last})"

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.proc = None


def http_request(port, method, target, body, headers, timeout_s):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        conn.putrequest(method, target, skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        elif method in ("POST", "PUT"):
            conn.putheader("Content-Length", "0")
        conn.endheaders(body)
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
    finally:
        conn.close()


# ---------- running cases ----------

class CaseError(Exception):
    pass


def build_request(case, saved):
    path = substitute(case["path"], saved)
    if "query" in case:
        query = substitute(case["query"], saved)
        pairs = [(k, v if isinstance(v, str) else json.dumps(v)) for k, v in query.items()]
        path += ("&" if "?" in path else "?") + urllib.parse.urlencode(pairs)
    headers = {k: str(v) for k, v in substitute(case.get("headers", {}), saved).items()}
    body = None
    if "body" in case:
        body = json.dumps(substitute(expand(case["body"]), saved)).encode()
    elif "rawBody" in case:
        body = substitute(expand(case["rawBody"]), saved).encode()
    if body is not None and not any(k.lower() == "content-type" for k in headers):
        headers["Content-Type"] = "application/json"
    return path, headers, body


def check(expect, status, headers, raw):
    errs = []
    want = expect.get("status")
    if want is not None:
        wanted = want if isinstance(want, list) else [want]
        if status not in wanted:
            errs.append(f"status: expected {want}, got {status}")
    if expect.get("emptyBody") and raw:
        errs.append(f"body: expected none, got {len(raw)} bytes")
    if "body" in expect:
        text = raw.decode("utf-8", "replace")
        if not raw:
            errs.append("body: expected a body, got none")
        else:
            try:
                doc = json.loads(text)
            except ValueError:
                doc = text
            errs += match(expect["body"], doc)
    for name, pattern in expect.get("headers", {}).items():
        value = headers.get(name.lower())
        if value is None:
            errs.append(f"header {name}: missing")
        else:
            errs += [e.replace("body", f"header {name}", 1)
                     for e in match(pattern, value)]
    return errs


def save_values(case, raw, saved):
    """Stores the case's "save" values; the list of the paths that were not there."""
    errs = []
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = None
    for name, dotted in case.get("save", {}).items():
        try:
            saved[name] = dig(doc, dotted)
        except (KeyError, IndexError, TypeError):
            saved.pop(name, None)
            errs.append(f"save {name}: nothing at {dotted}")
    return errs


def attempt(node, case, request, saved):
    """Sends the request once; (differences, status, raw body)."""
    method = case["method"]
    path, headers, body = request
    try:
        status, resp_headers, raw = http_request(node.port, method, path, body, headers,
                                                 case.get("timeoutMs", 10000) / 1000.0)
    except (OSError, http.client.HTTPException) as e:
        return [f"no answer: {type(e).__name__}: {e}"], None, b""
    errs = save_values(case, raw, saved)
    try:
        expect = substitute(case.get("expect", {}), saved)
    except Missing as m:
        only_status = {"status": case.get("expect", {}).get("status")}
        return (errs + [f"${{{m}}} was not saved"] + check(only_status, status, resp_headers, raw),
                status, raw)
    return errs + check(expect, status, resp_headers, raw), status, raw


def run_case(node, case, saved):
    """(differences, request line, raw body) of one case; no differences: it passed."""
    try:
        request = build_request(case, saved)
    except Missing as m:
        return [f"${{{m}}} was not saved by an earlier case"], "", b""
    line = f"{case['method']} {request[0]}"
    poll = case.get("poll")
    deadline = time.monotonic() + (poll["deadlineMs"] / 1000.0 if poll else 0)
    while True:
        errs, status, raw = attempt(node, case, request, saved)
        if not poll or time.monotonic() >= deadline:
            break
        until = poll.get("untilStatus")
        if (until is not None and status == until) or (until is None and not errs):
            break
        time.sleep(poll.get("intervalMs", 50) / 1000.0)  # poll interval, bounded by deadline
    if poll and errs:
        errs.insert(0, f"(after polling {poll['deadlineMs']} ms)")
    return errs, line, raw


def load_files(only):
    names = sorted(n for n in os.listdir(CASES_DIR) if n.endswith(".json"))
    if only:
        wanted = {w.strip() for w in only.split(",") if w.strip()}
        unknown = wanted - {n[:-5] for n in names}
        if unknown:
            raise CaseError(f"no case file for {', '.join(sorted(unknown))}")
        names = [n for n in names if n[:-5] in wanted]
    files = []
    for n in names:
        with open(os.path.join(CASES_DIR, n)) as f:
            try:
                doc = json.load(f)
            except ValueError as e:
                raise CaseError(f"{n}: not JSON: {e}")
        for c in doc.get("cases", []):
            for field in ("name", "method", "path", "expect"):
                if field not in c:
                    raise CaseError(f"{n}: case {c.get('name', '?')} has no {field}")
        files.append((n, doc))
    return files


def report(name, case, errs, request, raw):
    shown = " ".join(raw.decode("utf-8", "replace").split())
    if len(shown) > BODY_SHOWN_MAX:
        shown = shown[:BODY_SHOWN_MAX] + "..."
    more = len(errs) - ERRORS_SHOWN_MAX
    why = "; ".join(errs[:ERRORS_SHOWN_MAX]) + (f"; +{more} more" if more > 0 else "")
    print(f"FAIL {name} | {case['name']} | {request} | {why} | body: {shown}")


def run_file(name, doc, node):
    """Runs one file's cases on `node`; (passed, failed)."""
    passed = failed = 0
    saved = {}
    for case in doc.get("cases", []):
        if not node.alive():
            errs, request, raw = [f"node exited ({node.proc.returncode})"], "", b""
        else:
            errs, request, raw = run_case(node, case, saved)
            if not node.alive():
                errs.append(f"node exited ({node.proc.returncode}) after this request")
        if errs:
            failed += 1
            report(name, case, errs, request, raw)
        else:
            passed += 1
    return passed, failed


def main():
    ap = argparse.ArgumentParser(description="Queen HTTP API wire conformance suite")
    ap.add_argument("--binary", required=True, help="the queen binary to start")
    ap.add_argument("--only", help="run only these case files (comma-separated stems)")
    ap.add_argument("--keep", action="store_true", help="keep data folders and node logs")
    ap.add_argument("--node-env", action="append", default=[], metavar="NAME=VALUE",
                    help="a setting for every node the suite starts (a case file's own wins)")
    args = ap.parse_args()
    base_env = dict(item.split("=", 1) for item in args.node_env)
    binary = os.path.abspath(args.binary)
    if not os.access(binary, os.X_OK):
        print(f"no executable at {binary}")
        print("0 passed, 1 failed")
        return 2
    try:
        files = load_files(args.only)
    except CaseError as e:
        print(e)
        print("0 passed, 1 failed")
        return 2

    work_dir = tempfile.mkdtemp(prefix="queen-conformance-")
    passed = failed = 0
    shared = None
    shared_failed = False
    nodes = []
    try:
        for name, doc in files:
            env = {k: str(v) for k, v in doc.get("env", {}).items()}
            node = shared
            try:
                if env:
                    node = Node(binary, work_dir, name[:-5], {**base_env, **env})
                    nodes.append(node)
                    node.start()
                elif shared_failed:
                    raise RuntimeError("the shared node did not start (see above)")
                elif shared is None or not shared.alive():
                    shared = node = Node(binary, work_dir, f"shared-{len(nodes)}", base_env)
                    nodes.append(node)
                    node.start()
            except RuntimeError as e:
                print(e)
                shared_failed = shared_failed or not env
                for case in doc.get("cases", []):
                    failed += 1
                    report(name, case, ["the node did not start"], "", b"")
                continue
            p, f = run_file(name, doc, node)
            passed += p
            failed += f
            if env:
                node.stop()
    finally:
        for node in nodes:
            node.stop()
        if args.keep:
            print(f"kept: {work_dir}")
        else:
            shutil.rmtree(work_dir, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
